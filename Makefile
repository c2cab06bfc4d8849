# Two entry points for a fresh clone: `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
BIN := $(VENV)/bin
# the demo needs genobird alone; tests and lint add the dev extra (pytest, ruff, and
# transformers as an oracle), which would cost `make demo` about 20 s of its 10 minutes
STAMP := $(VENV)/.genobird-installed
DEV_STAMP := $(VENV)/.genobird-dev-installed
CORES ?= 2

.PHONY: setup demo test test-fast lint format clean-demo

setup: $(DEV_STAMP)

$(STAMP): pyproject.toml setup.py scripts/setup.sh genobird/corpus/_bpe.c
	bash scripts/setup.sh $(VENV)

$(DEV_STAMP): pyproject.toml setup.py scripts/setup.sh genobird/corpus/_bpe.c
	bash scripts/setup.sh $(VENV) dev

demo: $(STAMP)
	bash scripts/demo.sh $(BIN)

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not pipeline"

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-demo:
	rm -rf results/demo
