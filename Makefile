# Two entry points a fresh machine needs (see README): `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test bench-quality

$(BIN)/ragpulse: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(BIN)/ragpulse

demo: install
	$(BIN)/ragpulse up --demo

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider
