# The two commands: `make demo` and `make test`. Both set up what they need first (scripts/bootstrap.sh).
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench soak clean faults full docs

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(BIN)/zkconsumer lab

# Two pytest workers (pytest-xdist), a test file each at a time: module-scoped servers stay in one worker, and most
# tests wait on sessions and timers rather than the CPU, so two at once halve the wall time on a 2-core machine.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/ruff check zkconsumer tests benchmarks scripts
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

faults: setup  # the whole fault matrix and the failure catalogue's modes (make test runs part of them)
	$(BIN)/python -m pytest -q -m "faults or faults_full" tests/test_faults.py tests/test_migration_faults.py tests/test_nemesis_lab.py \
		tests/test_scenarios.py tests/test_failure_modes.py tests/test_kafka_cluster.py

full: setup  # every test: make test's, the whole fault matrix and the extended cells of the other matrices
	$(BIN)/python -m pytest -q -m ""

# the documentation site (mkdocs.yml, docs/) into site/: open site/index.html, no server needed. Strict: a broken link
# or anchor, or a page missing from the nav, fails it (tests/test_docs_site.py builds it in make test too)
docs: setup
	$(BIN)/mkdocs build --strict

lint: setup
	$(BIN)/ruff check zkconsumer tests benchmarks scripts

bench: setup
	$(BIN)/python benchmarks/assignors.py
	$(BIN)/python benchmarks/rebalance.py
	$(BIN)/python benchmarks/mixed_groups.py
	$(BIN)/python benchmarks/broker.py
	$(BIN)/python benchmarks/offsets_load.py
	$(BIN)/python benchmarks/sweep.py --scenarios 100000 --events 1000000

# 30 minutes of churn and faults on one lab, then the Spark report (docs/faults.md); not part of `make test`
soak: setup
	$(BIN)/python benchmarks/soak.py --minutes 30

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .pytest-zkconsumer-home site
