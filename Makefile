# uep — Unified Evaluation Platform. `make demo` and `make test` are the two commands a new user needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: chromium sandbox servers-packages

UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
PY := .venv/bin/python
STACK := $(PY) deploy/local/uep_stack.py
KAFKA_LIBS := .run/kafka-libs

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(UV):
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q "uv==$(UV_VERSION)"

install: $(UV) chromium sandbox servers-packages $(KAFKA_LIBS)/.complete ## create .venv, install the workspace from uv.lock, the servers' packages and Kafka's jars
	$(UV) sync --frozen
	@$(MAKE) --no-print-directory .venv/.bytecode

# Bytecode for every module of .venv and the workspace, compiled once per lock: where PYTHONDONTWRITEBYTECODE is
# set (these machines set it) nothing caches it at run time, and each process would compile all it imports again
# (measured: importing two services took 24-31 s uncached against 7.5-11 s cached on a loaded 2-core machine).
# A file that does not compile (a package's Python 2 example, say) cannot be imported either: compileall's status
# is not the build's.
.venv/.bytecode: uv.lock
	$(PY) -m compileall -q -j 0 .venv/lib/python3.11/site-packages libs services clients deploy/model-server > /dev/null || true
	touch $@

# The stack runs its own servers (deploy/local/servers.py): Debian's PostgreSQL and Redis, and Apache Kafka from
# Maven Central (a Java 17 runtime and Maven from Debian where missing).
SERVER_PKGS := postgresql redis-server openjdk-17-jre-headless maven
servers-packages:
	@{ ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && command -v redis-server >/dev/null && command -v java >/dev/null && command -v mvn >/dev/null; } || { \
	  echo "installing Debian's $(SERVER_PKGS) (the stack's PostgreSQL, Redis and Kafka)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SERVER_PKGS); \
	  else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SERVER_PKGS); fi; }

# Apache Kafka's broker classpath (deploy/local/kafka/pom.xml pins the version): collected once into an ignored
# folder, again only when the POM changes; Maven keeps its download cache in ~/.m2.
$(KAFKA_LIBS)/.complete: deploy/local/kafka/pom.xml | servers-packages
	rm -rf $(KAFKA_LIBS)
	mvn -q -B -f deploy/local/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	touch $@

# Reports are rendered to PDF and the annotation page is tested in headless Chromium (Debian's package;
# Playwright drives it with executable_path, it never downloads a browser).
# pdftoppm (poppler-utils) turns report PDFs into PNG pages, for the tests that look at a report's charts.
chromium:
	@{ command -v chromium >/dev/null && command -v pdftoppm >/dev/null; } || { echo "installing Debian's chromium and poppler-utils (PDF reports, page tests, PDF pages as PNG)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium poppler-utils; \
	  else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium poppler-utils; fi; }

# The scorer runs benchmark and model code in a bubblewrap sandbox with a libseccomp filter, under Debian's
# python3.11 (readable by the sandbox's unprivileged uid); without them code benchmarks score 'sandbox_unavailable'.
SANDBOX_PKGS := bubblewrap libseccomp2 python3.11-minimal
sandbox:
	@{ command -v bwrap >/dev/null && /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2' && [ -x /usr/bin/python3.11 ]; } || { \
	  echo "installing Debian's $(SANDBOX_PKGS) (the scorer's code sandbox)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SANDBOX_PKGS); \
	  else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SANDBOX_PKGS); fi; }

up: install ## start the local stack (PostgreSQL, Redis, Kafka, migrations, Triton, six services; REPLICAS=2: two of each consumer service)
	UEP_STACK_REPLICAS=$(or $(REPLICAS),1) $(STACK) up

down: ## stop the local stack, then its PostgreSQL and Redis (by PID)
	@if [ -x $(PY) ]; then UEP_STACK_REPLICAS=$(or $(REPLICAS),1) $(STACK) down; fi

status: ## show the local stack's processes and health
	@if [ -x $(PY) ]; then $(STACK) status; else echo "not installed: run make install"; fi

demo: install ## install, start the stack, evaluate the embedded LLM on real benchmarks, print the summary and the web UI's address, stop (KEEP=1: leave it up)
	KEEP=$(KEEP) $(PY) deploy/local/demo.py

# Static checks with the locked tools in .venv (ruff, mypy: configuration in pyproject.toml) and the lock's freshness.
check: install ## lint, format check, type check (mypy), import directions (lint-imports), docstring cross-references, uv lock --check and check-k8s
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	.venv/bin/lint-imports --no-cache
	$(PY) docs/check_xrefs.py
	$(UV) lock --check
	$(MAKE) --no-print-directory check-k8s

# Every kustomize overlay rendered and validated strictly (Kubernetes schemas of kubernetes-validate, the CRD
# schemas vendored in deploy/k8s/schemas), and hadolint on every Dockerfile; the tools are dev-group wheels.
# DL3008 (pin apt package versions) is off: the images take the security updates of their Debian release.
DOCKERFILES = Dockerfile $(sort $(wildcard deploy/*/Dockerfile))
check-k8s: install ## validate the Kubernetes overlays and lint the Dockerfiles
	$(PY) deploy/k8s/validate.py
	.venv/bin/hadolint --no-color --ignore DL3008 $(DOCKERFILES)

test: install ## run every test but the slow LLM ones (unit, scorer, model server, end to end on a fresh stack)
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow"

test-slow: install ## run the tests marked slow: the embedded LLM for minutes (dialogues, agents, log-likelihood invariance)
	$(PY) -m pytest -q -p no:cacheprovider -m slow

# Test tiers (markers given by tests/conftest.py): unit needs no server; db needs PostgreSQL/Redis only;
# stack starts a fresh test stack (and ui drives headless Chromium on it).
test-unit: install ## run the tests that need no server (fast: no broker, database, Triton or services)
	$(PY) -m pytest -q -p no:cacheprovider -m unit

test-db: install ## run the tests that need PostgreSQL and/or Redis only (no broker, Triton or services)
	$(PY) -m pytest -q -p no:cacheprovider -m db

test-stack: install ## run the tests on a fresh test stack and in headless Chromium (-m "stack or ui")
	$(PY) -m pytest -q -p no:cacheprovider -m "stack or ui"

bench: install ## bench/pipeline_overhead: pipeline vs direct Triton throughput, echo model and LLM at 1 and 4 slots, at defaults
	$(PY) bench/pipeline_overhead.py

bench-scale: install ## bench/scale: echo evaluations of 1k, 10k, 100k items (SIZES=1000,1000000: others) and the model alone: items/s per decile, RSS, broker disk, bytes per item
	$(PY) bench/scale.py $(if $(SIZES),--sizes $(SIZES))

bench-idle: install ## bench/idle_cost: CPU of an idle stack per process over 30 s (target < 2 % of a core in total)
	$(PY) bench/idle_cost.py

bench-idle-memory: install ## bench/idle_memory: PSS of an idle stack per process, models built lazily vs eagerly (target <= 1 GiB)
	$(PY) bench/idle_memory.py

bench-busy: install ## bench/busy_cost: the stack's CPU per item at one slot on a slow model, reconcile every 1 s vs the defaults
	$(PY) bench/busy_cost.py

bench-profile: install ## bench/hot_path_profile: py-spy summary of each service on an instant model (needs py-spy)
	$(PY) bench/hot_path_profile.py

bench-path: install ## bench/sample_path: the source files one evaluation's path runs through, per service (goal <= 18)
	$(PY) bench/sample_path.py $(if $(LIST),--list)

bench-llm-interference: install ## bench/llm_interference: the embedded LLM's throughput under a small background CPU load, by llama.cpp thread count
	$(PY) bench/llm_interference.py

bench-classifier: install ## bench/classifier_throughput: a classifier's and a ranker's throughput, pipeline vs direct Triton, ratios
	$(PY) bench/classifier_throughput.py

bench-scorer: install ## bench/scorer_throughput: our metrics vs the reference libraries, samples/s ratios
	$(PY) bench/scorer_throughput.py

bench-lm-eval: install ## bench/vs_lm_eval: uep vs lm-evaluation-harness (own cached venv) on the served model: agreement, near ties, max |Δ loglik|
	$(PY) bench/vs_lm_eval.py

bench-chaos: install ## bench/chaos: kill -9 each service and restart the broker under a 500-sample run, 5 times; prints clean runs x/5
	$(PY) bench/chaos.py

bench-scheduler: install ## bench/scheduler: POST → first SampleDispatched (p50, p99) and dispatch throughput, 10,000 queued samples
	$(PY) bench/scheduler.py

bench-report: install ## bench/report: build the report (and leaderboard) of a 100,000-item evaluation; seconds (target < 5) and peak memory
	$(PY) bench/report.py

.PHONY: bench-gateway-auth
bench-gateway-auth: install ## bench/gateway_auth: latency the access checks add to GET /v1/models, p50/p99 (target < 1 ms at p50)
	$(PY) bench/gateway_auth.py

bench-agent: install ## bench/agent_steps: the agent harness's time per step vs the model call; SmolLM2 on sklearn-data-agent
	$(PY) bench/agent_steps.py

bench-cli: install ## bench/cli_startup: `uep --help` and `uep status ID` start-up times against the bare interpreter's (target < 0.3 s)
	$(PY) bench/cli_startup.py

asyncapi: install ## regenerate docs/asyncapi.json from the services' FastStream apps
	$(PY) docs/generate_asyncapi.py

.PHONY: help install up down status demo check check-k8s test test-slow test-unit test-db test-stack bench bench-scale bench-idle bench-idle-memory bench-busy bench-profile bench-llm-interference bench-classifier bench-scorer bench-chaos asyncapi bench-scheduler bench-report bench-lm-eval bench-cli bench-agent
