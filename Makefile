# Two commands: `make run` starts the product, `make test` runs every test. Both install what they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: run test lint install install-dev chromium schema bench clean reliability-figures

run: $(VENV)/.installed
	$(PY) manage.py up

test: lint chromium
	$(PY) -m pytest $(PYTEST_ARGS)

# Style (ruff), the layers (import-linter, contracts in pyproject.toml) and types (mypy with django-stubs,
# strict for the engine's text and ranking modules): a surface importing another, the engine importing a
# surface, or a type error fails here before any test runs.
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/dead_code.py
	@# every statement of the engine is a Fragment sent by sql.execute: no hand-counted parameter lists
	@! grep -rn --include='*.py' '\.execute(' search/engine | grep -v '^search/engine/sql.py:' \
		|| { echo "search/engine: send SQL with search.engine.sql.execute(cursor, Fragment/compose(...))"; exit 1; }
	@# mypy loads the settings (django-stubs): a REDIS_URL keeps them from starting an embedded Valkey that outlives it
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:9/0} $(VENV)/bin/mypy search accounts presets analytics browse graphql_api mcp_api benchmarks config adapters follows

# Refresh docs/reliability/figures.json, the figures docs/reliability.md cites: the reliability suite with its
# figures written to that tracked file (a plain test run writes them to var/reliability/figures.json).
reliability-figures: $(VENV)/.installed-dev
	RELIABILITY_FIGURES=$(CURDIR)/docs/reliability/figures.json $(PY) -m pytest tests/reliability $(PYTEST_ARGS)

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the CPU build (2.13.0) that pip finds locally; anything else pulls CUDA.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(PIP) install -q -e '.[dev]'
	touch $@

# Headless Chromium from Debian's packages for the browser tests (Playwright cannot download one here).
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing chromium (apt-get)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install -y chromium (browser tests will be skipped)"; fi; \
	fi

schema: $(VENV)/.installed
	$(PY) manage.py export_schema

clean:
	rm -rf $(VENV) var
