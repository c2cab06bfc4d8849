# Two entry points for a fresh clone: `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.genobird-installed
CORES ?= 2

.PHONY: setup demo test test-fast lint format clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py scripts/setup.sh genobird/corpus/_bpe.c
	bash scripts/setup.sh $(VENV)

demo: $(STAMP)
	bash scripts/demo.sh $(BIN)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not pipeline"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-demo:
	rm -rf results/demo
