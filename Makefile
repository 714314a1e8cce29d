# Quick start: `make run` launches the app, `make test` runs the whole test suite.
# Both bootstrap .venv idempotently (created once, re-installed when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test test-long test-postgres venv bytecode bench bench-extra lint clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	$(MAKE) --no-print-directory bytecode
	touch $(STAMP)

venv: $(STAMP)

# The project's bytecode (__pycache__/*.pyc, git-ignored), as an installed package has it: with
# PYTHONDONTWRITEBYTECODE=1 set, every process would otherwise compile our modules from source at
# each start. Python recompiles a module whose source changed since (in memory, if it may not write).
bytecode:
	$(VENV)/bin/python -m compileall -q engine gui

run: $(STAMP)
	$(VENV)/bin/loomscope gui

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/python -m pytest

# Long property runs (issue 29 item 7, run by .ci/run after `make test`): generated chats of 257-700
# messages with batches of 1-300 changes, across the warm path's 64 / 256 limits, every strategy
# (tests/engine/test_long_properties.py; LONG_EXAMPLES per strategy, about 2 s of CPU each).
LONG_EXAMPLES ?= 20
test-long: $(STAMP)
	LOOMSCOPE_LONG_PROPERTIES=1 LOOMSCOPE_LONG_EXAMPLES=$(LONG_EXAMPLES) QT_QPA_PLATFORM=offscreen \
		$(VENV)/bin/python -m pytest -p no:cacheprovider tests/engine/test_long_properties.py

# The storage, API and generation tests against a throwaway PostgreSQL server (Debian's
# `postgresql` package: initdb in a temp dir, free port on 127.0.0.1, stopped afterwards).
# `-k postgresql` picks the PostgreSQL half of the backend-parametrized tests (the SQLite half runs in `make test`).
PG_TESTS ?= tests/engine/storage tests/engine/api tests/engine/test_generation.py
test-postgres: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/python tests/throwaway_postgres.py -- \
		$(VENV)/bin/python -m pytest -p no:cacheprovider -k postgresql $(PG_TESTS)

# ruff (rules and ignores in pyproject.toml), mypy on the engine and the GUI ([tool.mypy], pydantic plugin) and
# import-linter's layering contracts ([tool.importlinter]); the tools come with the `test` extra.
lint: $(STAMP)
	$(VENV)/bin/ruff check engine gui tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# `make bench`: issue 12's figures in one table (targets beside them) and bench-results.json, all measured in
# this run (tests/benchmarks/run_bench.py; about 4 minutes on 2 cores). `make bench-extra`: the older
# single-topic benchmarks (lorebook, large inputs, tokenizers, importers, ...), each printing its own figures.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/python tests/benchmarks/run_bench.py

bench-extra: $(BENCH_STAMP)
	for f in tests/benchmarks/bench_*.py; do QT_QPA_PLATFORM=offscreen $(VENV)/bin/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
