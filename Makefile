# `make test` and `make demo` build their own environment: a fresh machine needs only Python >= 3.11.
BOOTSTRAP_PYTHON ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: test lint demo clean

$(INSTALLED): pyproject.toml
	test -x $(PYTHON) || $(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]'
	touch $(INSTALLED)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PYTHON) -m pytest -q

demo: $(INSTALLED)
	$(VENV)/bin/gym demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
