# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing interlock with its dev tools"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The embedded local model: llama-cpp-python compiled once (pip's wheel cache keeps it) and the weights.
LOCAL_STAMP := $(VENV)/.local-model
$(LOCAL_STAMP): scripts/setup_local_model.sh $(STAMP)
	bash scripts/setup_local_model.sh
	@touch $(LOCAL_STAMP)

# The published Genkit clients the interop tests drive the server with (npm genkit; PyPI genkit in its own venv).
INTEROP_STAMP := .interop/.installed
$(INTEROP_STAMP): scripts/setup_interop.sh tests/interop/package.json tests/interop/package-lock.json tests/interop/requirements.txt
	bash scripts/setup_interop.sh
	@touch $(INTEROP_STAMP)

demo: $(STAMP) $(LOCAL_STAMP)
	$(BIN)/interlock demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/python scripts/check_module_size.py

typecheck: $(STAMP) $(LOCAL_STAMP)
	$(BIN)/pyright

unit: $(STAMP) $(LOCAL_STAMP) $(INTEROP_STAMP)
	$(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/core.py
	$(BIN)/python bench/agents.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/effects_faults.py
	$(BIN)/python bench/signing.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/notify.py
	$(BIN)/python bench/effects.py  # last: it exits 1 while the journal's cost is over its target

clean:
	rm -rf $(VENV) .interop build dist
