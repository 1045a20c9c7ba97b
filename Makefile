# Two entry points a fresh machine needs (see README): `make demo` and `make test`.
# `make demo` installs the runtime only (ragpulse and the demo app's OTLP exporter);
# `make test` (and `make install`) install the dev extras: test tools, frameworks, ONNX.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test chromium bench-ragas

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Stamps: re-install when pyproject.toml changes. The dev extras include the runtime and the
# demo's exporter, so a dev install also satisfies `make demo`.
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[demo]"
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $@ $(VENV)/.runtime

install: $(VENV)/.dev

demo: $(VENV)/.runtime
	$(BIN)/ragpulse up --demo

# The report test screenshots `ragpulse report` output in headless Chromium (Debian's package).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing Debian's chromium for the report screenshot test"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# ragas in its own venv (never the project's), for bench/cost.py and the test that checks what
# ragas sends (tests/bench/test_cost_harness.py). Building it took 163 s and 800 MB on the
# 2-core machine under load; it is rebuilt only when the requirements change.
RAGAS_PY := bench/.venv-ragas/bin/python

$(RAGAS_PY): bench/requirements-ragas.txt
	$(PY) -m venv bench/.venv-ragas
	bench/.venv-ragas/bin/pip install -q -r bench/requirements-ragas.txt
	touch $@

bench-ragas: $(RAGAS_PY)

test: install chromium bench-ragas
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider
