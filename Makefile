# The two commands: `make demo` and `make test`. Both set up what they need first (scripts/bootstrap.sh).
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(BIN)/zkconsumer lab

test: setup
	$(BIN)/ruff check zkconsumer tests benchmarks
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check zkconsumer tests benchmarks

bench: setup
	$(BIN)/python benchmarks/assignors.py
	$(BIN)/python benchmarks/rebalance.py
	$(BIN)/python benchmarks/broker.py
	$(BIN)/python benchmarks/offsets_load.py
	$(BIN)/python benchmarks/sweep.py --scenarios 100000 --events 1000000

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .pytest-zkconsumer-home
