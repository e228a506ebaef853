# uep — Unified Evaluation Platform. `make demo` and `make test` are the two commands a new user needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: chromium

UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
PY := .venv/bin/python
STACK := $(PY) deploy/local/uep_stack.py

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(UV):
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q "uv==$(UV_VERSION)"

install: $(UV) chromium ## create .venv and install the whole workspace from uv.lock
	$(UV) sync --frozen

# Reports are rendered to PDF and the annotation page is tested in headless Chromium (Debian's package;
# Playwright drives it with executable_path, it never downloads a browser).
chromium:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium (PDF reports, annotation page tests)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; fi; }

up: install ## start the local stack (broker, migrations, Triton, six services)
	$(STACK) up

down: ## stop the local stack (by PID)
	@if [ -x $(PY) ]; then $(STACK) down; fi

status: ## show the local stack's processes and health
	@if [ -x $(PY) ]; then $(STACK) status; else echo "not installed: run make install"; fi

demo: install ## install, start the stack, evaluate the embedded LLM on real benchmarks, print the summary, stop
	$(PY) deploy/local/demo.py

test: install ## run every test (unit, scorer, model server, end to end on a fresh stack)
	$(PY) -m pytest -q -p no:cacheprovider

bench: install ## bench/pipeline_overhead: pipeline vs direct Triton throughput ratio
	$(PY) bench/pipeline_overhead.py

bench-scorer: install ## bench/scorer_throughput: our metrics vs the reference libraries, samples/s ratios
	$(PY) bench/scorer_throughput.py

bench-chaos: install ## bench/chaos: kill -9 each service and restart the broker under a 500-sample run, 5 times; prints clean runs x/5
	$(PY) bench/chaos.py

bench-scheduler: install ## bench/scheduler: POST → first SampleDispatched (p50, p99) and dispatch throughput, 10,000 queued samples
	$(PY) bench/scheduler.py

bench-report: install ## bench/report: build the report (and leaderboard) of a 100,000-item evaluation; seconds (target < 5) and peak memory
	$(PY) bench/report.py

asyncapi: install ## regenerate docs/asyncapi.json from the services' FastStream apps
	$(PY) docs/generate_asyncapi.py

.PHONY: help install up down status demo test bench bench-scorer bench-chaos asyncapi bench-scheduler bench-report
