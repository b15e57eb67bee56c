# kvswitch: an in-network memory pool for LLM KV-cache blocks.
# Every target that needs software installs it first (scripts/bootstrap.sh), so on a fresh machine
# `make run` and `make test` are the only two commands to know.

PY        := .venv/bin/python
TARGET    ?= soft
HOSTS     ?= 4
TRACE     ?= $(or $(KVSWITCH_TRACES),../shared/traces)/mooncake/conversation_trace.jsonl
PYTEST_ARGS ?=

.PHONY: help setup run stop demo test test-fast test-bmv2 bench eval check compile clean

help:  ## this menu
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: TARGET=soft|bmv2 (switch target), HOSTS=N (inference hosts), TRACE=path.jsonl"

setup:  ## install Debian packages (as root) and the Python venv
	@scripts/bootstrap.sh

run: setup  ## start the Mininet testbed (switch, storage node, controller) and its CLI
	$(PY) -m topo run --target $(TARGET) --hosts $(HOSTS)

stop:  ## stop this project's testbed (recorded pids, its interfaces by name; no other Mininet)
	-$(PY) -m topo stop

demo: setup  ## non-interactive: testbed + trace replay + report and plot, then exit
	$(PY) -m topo demo --target $(TARGET) --hosts $(HOSTS) --trace $(TRACE) --out out/demo

test: setup  ## the whole suite (Mininet and veth tests need root)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup  ## the suite without slow (process, veth, Mininet) tests
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-bmv2: setup  ## the cross-target checks on BMv2 (needs p4c and simple_switch_grpc on PATH, root)
	$(PY) -m pytest -m bmv2 tests/dataplane tests/targets $(PYTEST_ARGS)

bench: setup  ## benchmarks; JSON and tables under out/bench
	$(PY) -m bench all --out out/bench

eval: setup  ## the standard evaluation report on the conversation trace (TRACE=), under out/eval
	$(PY) -m evaluation run --trace $(TRACE) --out out/eval

compile: setup  ## compile p4src/ for the chosen target into build/
	$(PY) -m topo compile --target $(TARGET) --out build

check: setup  ## lint
	$(PY) -m ruff check .

clean:  ## remove build outputs (keeps .venv)
	rm -rf build out .pytest_cache .ruff_cache
