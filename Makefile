# Developer entry points; see README.md.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
PY := $(VENV)/bin/python
SERVICES := scripts/services.sh

PYTEST_ARGS ?= -q
# `make test` runs every test, fault tests included, which take a good part of its time;
# PYTEST_MARK="not slow" leaves out the slowest for a quicker run.
PYTEST_MARK ?=
BENCH ?=
ZK_PORT ?= 2181
REDIS_PORT ?= 6379
REDIS_URL ?= redis://127.0.0.1:$(REDIS_PORT)/0
WEB_PORT ?= 8000

CONTENT_PORT ?= 8001
# The demo depositor's notification receiver (scripts/demo_receiver.py).
RECEIVER_PORT ?= 8002
# `make demo` submits its update batch once the workers have stored the first version.
DEMO_UPDATE_WAIT ?= 120
# Every name in DEMO_PROCS is started by `make demo` and stopped by `make stop`, with
# var/run/NAME.pid and var/log/NAME.log; its command is PROC_NAME.
DEMO_PROCS := web content receiver dispatcher worker1 worker2 reserved1 reconciler
QUEUES = $$($(PY) -c 'from merritt_queue.core.queues import all_queue_names as q; print(*q())')
# A reserved worker (docs/deployment.md): small or urgent deposits never wait for a worker
# held by a long download.
RESERVED_QUEUES = $$($(PY) -c 'from merritt_queue.core.queues import reserved_queue_names as q; print(*q())')
PROC_web = $(PY) manage.py runserver --noreload 127.0.0.1:$(WEB_PORT)
PROC_content = $(PY) -m http.server $(CONTENT_PORT) --bind 127.0.0.1 --directory var/demo-content
# It fails the first delivery on purpose, so the batch page shows a retry.
PROC_receiver = $(PY) scripts/demo_receiver.py --port $(RECEIVER_PORT) --fail-first 1 \
	--secret-file var/run/demo-receiver.secret --log var/log/receiver-events.log
PROC_dispatcher = $(PY) manage.py run_dispatcher
PROC_worker1 = $(PY) manage.py rqworker $(QUEUES)
PROC_worker2 = $(PY) manage.py rqworker $(QUEUES)
PROC_reserved1 = $(PY) manage.py rqworker $(RESERVED_QUEUES)
PROC_reconciler = $(PY) manage.py reconcile --watch

.PHONY: help venv check test test-faults bench demo demo-env demo-start manage stop lint fmt clean

help:
	@echo "make demo    start ZooKeeper, Redis and the web app on http://127.0.0.1:$(WEB_PORT)/"
	@echo "make stop    stop what demo started"
	@echo "make manage ARGS=\"...\"   a manage.py command with the demo's settings (var/demo.env)"
	@echo "make check   ruff, mypy, missing migrations, the fast tests (no services)"
	@echo "make test    run the tests against a throw-away ZooKeeper, Redis and PostgreSQL (fault tests included)"
	@echo "make test-faults   run every fault test: workers killed, ZooKeeper and Redis stopped"
	@echo "make bench [BENCH=zk]   run the benchmarks"
	@echo "make lint | fmt | clean"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The fast tier runs on SQLite with ZooKeeper and Redis pointed at a closed port: a test that
# reaches for a service fails at once instead of finding a developer's own server.
check: export MQ_FAST_TIER = 1
check: export ZK_HOSTS = 127.0.0.1:1
check: export REDIS_URL = redis://127.0.0.1:1/0
check: lint
	$(PY) -m mypy
	@# DEBUG: the system checks refuse the development SECRET_KEY otherwise.
	env -u DATABASE_URL DEBUG=true $(PY) manage.py makemigrations --check --dry-run
	env -u DATABASE_URL $(PY) -m pytest -m fast $(PYTEST_ARGS)

test: export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = 1
test: venv
	$(SERVICES) ensure-zookeeper
	$(SERVICES) ensure-chromium
	$(SERVICES) ensure-axe
	$(SERVICES) ensure-postgres
	$(SERVICES) with-test-services $(PY) -m pytest $(if $(PYTEST_MARK),-m "$(PYTEST_MARK)") $(PYTEST_ARGS)

test-faults: venv
	$(SERVICES) ensure-zookeeper
	$(SERVICES) with-test-services $(PY) -m pytest -m faults $(PYTEST_ARGS) --durations=0

# The reconcile benchmark's 100,000 jobs hold about 950 MB of ZooKeeper heap, far more than
# the tests'; its 1,000,000 (BENCH_RECONCILE_JOBS) need ZK_HEAP=16g (docs/benchmarks.md).
bench: export ZK_HEAP ?= 2g
bench: venv
	$(SERVICES) ensure-zookeeper
	$(SERVICES) with-test-services $(PY) -m bench $(if $(BENCH),--only $(BENCH),)

# The settings `make demo` runs with, written to DEMO_ENV for `make manage` (and any shell:
# `set -a; . var/demo.env; set +a`). DEBUG is off by default; the demo keeps it on (runserver
# then serves the static files, and the development SECRET_KEY is accepted). The content server
# is on loopback, which downloads refuse by default. No proxy runs in front of the demo's
# runserver: loopback may read /metrics without a token.
DEMO_ENV ?= var/demo.env
DEMO_SETTINGS = DEBUG=true ZK_HOSTS=127.0.0.1:$(ZK_PORT) REDIS_URL=$(REDIS_URL) \
	MQ_ALLOW_LOOPBACK=true MQ_METRICS_ALLOW=127.0.0.0/8,::1/128
# What this start of the demo started, stopped again if the start fails (services.sh undo-started).
DEMO_STARTED := var/run/demo-started
# Redis is started, and its port checked, only when none answers at REDIS_URL.
REDIS_ANSWERS = command -v redis-cli >/dev/null && redis-cli -u "$(REDIS_URL)" ping 2>/dev/null | grep -q PONG

# Every port is checked before anything starts; a start that fails stops what it started.
demo: venv
	@$(SERVICES) ports-check ZK_PORT=$(ZK_PORT):var/zookeeper/zookeeper.pid \
		WEB_PORT=$(WEB_PORT):var/run/web.pid CONTENT_PORT=$(CONTENT_PORT):var/run/content.pid \
		RECEIVER_PORT=$(RECEIVER_PORT):var/run/receiver.pid \
		$$($(REDIS_ANSWERS) || echo REDIS_PORT=$(REDIS_PORT):var/redis/redis.pid) \
		|| { echo "make demo: nothing started"; exit 1; }
	@mkdir -p var/run && rm -f $(DEMO_STARTED)
	@MQ_STARTED_LOG=$(DEMO_STARTED) $(MAKE) --no-print-directory demo-start || { \
		echo "make demo failed: stopping what it started"; \
		$(SERVICES) undo-started $(DEMO_STARTED); exit 1; }
	@rm -f $(DEMO_STARTED)

demo-env:
	@mkdir -p $(dir $(DEMO_ENV))
	@printf '%s\n' "# Written by make demo: the settings it runs with, read by make manage." \
		$(foreach v,$(DEMO_SETTINGS),"$(v)") >$(DEMO_ENV)

$(foreach s,$(DEMO_SETTINGS),$(eval demo-start: export $(s)))
demo-start: demo-env
	$(SERVICES) ensure-zookeeper
	$(SERVICES) zk-start var/zookeeper $(ZK_PORT)
	@if $(REDIS_ANSWERS); then \
		echo "Redis answers at $$REDIS_URL; using it"; \
	else \
		$(SERVICES) redis-start var/redis $(REDIS_PORT); \
	fi
	$(PY) manage.py migrate --verbosity 0
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py load_demo --content-dir var/demo-content --content-url http://127.0.0.1:$(CONTENT_PORT)/ \
		--receiver-url http://127.0.0.1:$(RECEIVER_PORT)/events
	$(PY) manage.py reconcile --full
	@$(foreach p,$(DEMO_PROCS),$(SERVICES) proc-start var/run/$(p).pid var/log/$(p).log $(PROC_$(p)) &&) true
	@$(SERVICES) wait-http http://127.0.0.1:$(WEB_PORT)/healthz \
		|| { tail -n 30 var/log/web.log; echo "the web app did not start; see var/log/web.log"; exit 1; }
	$(PY) manage.py load_demo --updates --wait $(DEMO_UPDATE_WAIT) --content-url http://127.0.0.1:$(CONTENT_PORT)/
	@echo
	@echo "Merritt queue is running at http://127.0.0.1:$(WEB_PORT)/  (admin: /admin/, health: /healthz)"
	@echo "ZooKeeper 127.0.0.1:$(ZK_PORT), Redis $$REDIS_URL, logs in var/log/. Stop with: make stop"
	@echo "Its commands: make manage ARGS=\"submit --help\" (settings in $(DEMO_ENV))"

# A manage.py command with the demo's settings (DEMO_ENV, written by make demo):
# make manage ARGS="check_tree".
manage: venv
	@test -s $(DEMO_ENV) || { echo "no $(DEMO_ENV): start the demo first (make demo)"; exit 1; }
	@set -a && . "$(abspath $(DEMO_ENV))" && set +a && $(PY) manage.py $(ARGS)

stop:
	@$(foreach p,$(DEMO_PROCS),$(SERVICES) proc-stop var/run/$(p).pid;)
	@$(SERVICES) redis-stop var/redis
	@$(SERVICES) zk-stop var/zookeeper
	@# /metrics counts of the stopped processes: the next start counts afresh.
	rm -rf var/metrics

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean: stop
	rm -rf var .pytest_cache .ruff_cache build *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

