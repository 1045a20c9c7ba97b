# Two entry points a fresh machine needs (see README): `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test chromium

$(BIN)/ragpulse: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(BIN)/ragpulse

demo: install
	$(BIN)/ragpulse up --demo

# The report test screenshots `ragpulse report` output in headless Chromium (Debian's package).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian's chromium for the report screenshot test"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

test: install chromium
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider
