# kvswitch: an in-network memory pool for LLM KV-cache blocks.
# Every target that needs software installs it first (scripts/bootstrap.sh), so on a fresh machine
# `make run` and `make test` are the only two commands to know.

PY        := .venv/bin/python
ENGINE_PY := .venv-engine/bin/python
TARGET    ?= soft
TOPO      ?= star
HOSTS     ?=
STORAGE   ?=
STORE     ?= memory
TRACE     ?=
DEMO_TRACE := data/traces/mooncake_conversation_excerpt.jsonl
EVAL_TRACE := $(or $(KVSWITCH_TRACES),../shared/traces)/mooncake/conversation_trace.jsonl
ADMISSION ?=
EVICTION  ?=
RECYCLING ?=
PARAMS    ?=
METRICS_PORT ?= 9464
PCAP      ?= 1
SWITCH_LOG ?= info
RESUME    ?=
PYTEST_ARGS ?=
ENGINE    ?=
PRESET    ?=

# What `make run` and `make demo` pass to `python -m topo` (see `python -m topo run --help`).
TESTBED_ARGS = --target $(TARGET) --topology $(TOPO) $(if $(HOSTS),--hosts $(HOSTS)) \
	$(if $(STORAGE),--storage-nodes $(STORAGE)) --store $(STORE) \
	$(if $(ADMISSION),--admission $(ADMISSION)) $(if $(EVICTION),--eviction $(EVICTION)) \
	$(if $(RECYCLING),--recycling $(RECYCLING)) $(foreach p,$(PARAMS),--param $(p)) \
	--metrics-base $(METRICS_PORT) --switch-log $(SWITCH_LOG) $(if $(filter 0,$(PCAP)),--no-pcap) \
	$(if $(filter 1,$(RESUME)),--resume)
# With ENGINE=vllm, `make run` and `make demo` also start a vLLM server per host (docs/engines.md).
ENGINE_ARGS = $(if $(ENGINE),--engine $(ENGINE) --engine-python $(ENGINE_PY) $(if $(PRESET),--preset $(PRESET)))

.PHONY: help setup run stop demo test test-fast test-bmv2 test-mooncake bench eval check compile clean

help:  ## this menu
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: TARGET=soft|bmv2|bridge   TOPO=star|leaf-spine|path/topology.json   HOSTS=N (star, leaf-spine)"
	@echo "             STORAGE=M (storage nodes behind one pool address 10.0.0.200)   STORE=memory|mooncake"
	@echo "             ADMISSION= EVICTION= RECYCLING= (controller policies)   PARAMS='admission.threshold=0.5 ...'"
	@echo "             METRICS_PORT=9464 (Prometheus of device 1's controller; 0: off)   RESUME=1 (keep last run's state)"
	@echo "             PCAP=1|0 (per-port pcaps in out/testbed/<switch>/pcap)   SWITCH_LOG=info|debug|trace (switch -L)"
	@echo "             TRACE=path.jsonl (demo: the shipped excerpt; eval: the full conversation trace)"
	@echo "             ENGINE=vllm (run, demo: a vLLM server per host on the pool; demo: TTFT with/without it)"
	@echo "             PRESET=tiny|prefill-bound|llama3-8b-kv (with ENGINE: the model; run: tiny, demo: prefill-bound)"
	@echo "             ENGINE_PY=.venv-engine/bin/python (the engine environment's python)"

setup:  ## install Debian packages (as root), the Python venv and the engine venv (.venv-engine)
	@scripts/bootstrap.sh

run: setup  ## start the Mininet testbed (switch, storage node, controller) and its CLI
	$(PY) -m topo run $(TESTBED_ARGS) $(ENGINE_ARGS)

stop:  ## stop this project's testbed (recorded pids, its interfaces by name; no other Mininet)
	-$(PY) -m topo stop

demo: setup  ## non-interactive: testbed + trace replay + report and plot, then exit
	$(PY) -m topo demo $(TESTBED_ARGS) $(ENGINE_ARGS) --trace $(or $(TRACE),$(DEMO_TRACE)) --out out/demo

test: setup  ## the whole suite (Mininet and veth tests need root), then the engine tests in .venv-engine
	$(PY) -m pytest $(PYTEST_ARGS)
	$(ENGINE_PY) -m pytest tests/connectors $(PYTEST_ARGS)

test-fast: setup  ## the suite without slow (process, veth, Mininet, vLLM engine) tests
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)
	$(ENGINE_PY) -m pytest -m "not slow" tests/connectors $(PYTEST_ARGS)

test-bmv2: setup  ## every BMv2 case (needs p4c and simple_switch_grpc on PATH, root); a skip fails
	$(PY) -m pytest -m bmv2 -p kvtesting.require_targets --require-target bmv2 $(PYTEST_ARGS)

test-mooncake: setup  ## the Mininet coherence and hostile-host suites again, storage nodes over Mooncake Store
	KVSWITCH_TEST_STORE=mooncake $(PY) -m pytest tests/topo/test_coherence.py tests/topo/test_hostile_hosts.py $(PYTEST_ARGS)

bench: setup  ## benchmarks; JSON and tables under out/bench
	$(PY) -m bench all --out out/bench

eval: setup  ## the standard evaluation report on the conversation trace (TRACE=), under out/eval
	$(PY) -m evaluation run --trace $(or $(TRACE),$(EVAL_TRACE)) --out out/eval

compile: setup  ## compile p4src/ for the chosen target into build/
	$(PY) -m topo compile --target $(TARGET) --out build

check: setup  ## ruff, mypy (packages in pyproject.toml) and compiling p4src/ (softswitch; p4c too when on PATH)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m topo compile --target soft --out build/check --force
	@if command -v p4c >/dev/null 2>&1; then $(PY) -m topo compile --target bmv2 --out build/check --force; \
	else echo "check: p4c is not on PATH: p4src/ compiled on the softswitch only"; fi

clean:  ## remove build outputs (keeps .venv and .venv-engine; the tiny preset is generated again)
	rm -rf build out .pytest_cache .ruff_cache
