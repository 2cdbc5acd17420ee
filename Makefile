# The two commands of the README: `make demo` and `make test` (and `make quick`, the unit tier, while you work).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test quick lint typecheck docs unit bench regress clean postgres browser

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing interlock with its dev tools (pip shows each package as it goes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@touch $(STAMP)

# The embedded local model: llama-cpp-python compiled once (pip's wheel cache keeps it) and the weights.
LOCAL_STAMP := $(VENV)/.local-model
$(LOCAL_STAMP): scripts/setup_local_model.sh $(STAMP)
	bash scripts/setup_local_model.sh
	@touch $(LOCAL_STAMP)

# The published Genkit clients the interop tests drive the server with (npm genkit; PyPI genkit in its own venv).
INTEROP_STAMP := .interop/.installed
$(INTEROP_STAMP): scripts/setup_interop.sh tests/kit/interop/package.json tests/kit/interop/package-lock.json tests/kit/interop/requirements.txt
	bash scripts/setup_interop.sh
	@touch $(INTEROP_STAMP)

# PostgreSQL from Debian's packages, if missing: the tests start a throwaway cluster with scripts/postgres.sh
# (one per pytest session, on a free port under a temp directory; tests/integration/conftest.py), and so does bench/postgres.py.
postgres:
	bash scripts/postgres.sh install

# Debian's chromium for the inbox's browser tests (Playwright drives it by its path; no browser download).
browser:
	bash scripts/setup_browser.sh

demo: $(STAMP) $(LOCAL_STAMP)
	$(BIN)/interlock demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/python scripts/check_module_size.py

typecheck: $(STAMP) $(LOCAL_STAMP)
	$(BIN)/pyright

# The docs site (mkdocs.yml): strict, so a broken link, a missing page or a bad snippet fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The coverage gate: branch coverage of src/interlock (pyproject's [tool.coverage]), in the pytest process and
# in the servers and workers the tests start, failing under COV_MIN %. `make unit COV=` runs without it.
COV ?= 1
COV_MIN ?= 91
COV_ARGS := $(if $(COV),--cov --cov-branch --cov-report=term:skip-covered --cov-fail-under=$(COV_MIN))

# Every tier of tests/ (unit/, integration/, faults/, in full) under the coverage gate.
unit: $(STAMP) $(LOCAL_STAMP) $(INTEROP_STAMP) postgres browser
	rm -f .coverage .coverage.*
	COVERAGE_FILE=$(CURDIR)/.coverage $(BIN)/pytest $(COV_ARGS)

# The unit tier alone: in one process, no server, subprocess, network or PostgreSQL (under 2 minutes on 2 cores).
# It needs only the dev install: no PostgreSQL, browser, interop clients or local model.
quick: $(STAMP)
	$(BIN)/pytest tests/unit -x -q -p no:cov

test: lint typecheck docs unit

# First: CPU per operation of this checkout against the wave-1 commit, interleaved (bench/regress.py).
bench: $(STAMP) postgres
	$(BIN)/python bench/regress.py --base 6f3566d
	$(BIN)/python bench/peers_pg.py
	$(BIN)/python bench/pg_trips.py
	$(BIN)/python bench/core.py
	$(BIN)/python bench/agents.py
	$(BIN)/python bench/store.py
	$(BIN)/python bench/faults.py
	$(BIN)/python bench/effects_faults.py
	$(BIN)/python bench/signing.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/postgres.py
	$(BIN)/python bench/http_cycle.py
	$(BIN)/python bench/multiserver.py
	$(BIN)/python bench/pg_ceiling.py
	$(BIN)/python bench/pg_floor.py
	$(BIN)/python bench/inbox_http.py
	$(BIN)/python bench/inbox_index.py
	$(BIN)/python bench/notify.py
	$(BIN)/python bench/delegation.py
	$(BIN)/python bench/workers.py
	-$(BIN)/python bench/telemetry.py  # exits 1 while a telemetry ratio is over its target; effects.py still runs
	$(BIN)/python bench/effects.py  # last: it exits 1 while the journal's cost is over its target

# The same comparison against a commit of your choice: `make regress BASE=e974be2` (PAIRS=, OPS= optional).
PAIRS ?= 10
OPS ?= 300
regress: $(STAMP)
	@test -n "$(BASE)" || { echo "make regress needs BASE=<commit>, e.g. make regress BASE=e974be2"; exit 2; }
	$(BIN)/python bench/regress.py --base $(BASE) --pairs $(PAIRS) --ops $(OPS)

clean:
	rm -rf $(VENV) .interop build dist .coverage .coverage.*
