# One venv for everything; every target creates it if missing, so a fresh clone needs only make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
PYTEST_ARGS ?= -n auto

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/codewhale

lint: $(STAMP_DEV)
	$(BIN)/ruff check codewhale tests bench
	$(BIN)/ruff format --check codewhale tests bench

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP_DEV)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
