# `make test` and `make demo` build their own environment: a fresh machine needs only Python >= 3.11.
BOOTSTRAP_PYTHON ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: test lint demo clean

# Each environment folder may list its own extra packages in requirements.txt.
ENV_REQUIREMENTS := $(wildcard resources_servers/*/requirements.txt)

$(INSTALLED): pyproject.toml $(ENV_REQUIREMENTS)
	test -x $(PYTHON) || $(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev]' $(addprefix -r ,$(ENV_REQUIREMENTS))
	touch $(INSTALLED)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The core's tests, then every server folder through `gym test` (its tests plus its example-data checks).
test: lint
	$(PYTHON) -m pytest -q tests
	$(VENV)/bin/gym test

demo: $(INSTALLED)
	$(VENV)/bin/gym demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
