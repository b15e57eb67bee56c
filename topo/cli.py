"""The testbed's command line, behind `make run`, `make stop`, `make demo` and `make compile`.

    python -m topo run      --target soft|bmv2|bridge [--topology star|leaf-spine|FILE.json] [--hosts N]
                            [--storage-nodes M] [--store memory|mooncake]
                            [--admission P --eviction P --recycling P --param KIND.NAME=VALUE ...]
                            [--metrics-base PORT] [--no-pcap] [--switch-log LEVEL] [--resume]
                            [--engine vllm [--engine-python PATH] [--preset tiny]]
    python -m topo stop     [--state DIR]
    python -m topo demo     (as run; --preset prefill-bound) [--trace PATH] [--out DIR] [--requests 300]
                            [--engine-requests 24 (prefill-bound: 8)]
    python -m topo compile  --target T --out build
    python -m topo topology star|leaf-spine [--hosts N --leaves L --spines S]   (prints a topology.json)
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from topo.switches import REPO, SWITCHES, TestbedError
from topo.topologies import GENERATORS, MAX_HOSTS

ENGINE_HOSTS = 2
"""Inference hosts of the star topology with --engine unless --hosts says otherwise (4 hosts run 4 to 8 vLLM
servers, more than a 2-core machine starts in reasonable time)."""
DEMO_PRESET = "prefill-bound"
"""The engine demo's default preset: it prefills slowly enough per byte of KV that the pool shortens TTFT on this
testbed, as on real hardware (docs/engines.md "Which preset"); `run` keeps `tiny`, which starts faster."""
DEMO_TRACE = REPO / "data" / "traces" / "mooncake_conversation_excerpt.jsonl"
"""The excerpt shipped with the repository: `make demo` needs nothing from outside it."""


def _hosts(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_HOSTS:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_HOSTS}")
    return value


def _storage_nodes(text: str) -> int:
    from topo.topologies import MAX_STORAGE

    value = int(text)
    if not 1 <= value <= MAX_STORAGE:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_STORAGE}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m topo", description="kvswitch Mininet testbed")
    sub = parser.add_subparsers(dest="command", required=True)

    def testbed_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--target", choices=sorted(SWITCHES), default="soft",
                       help="soft: embedded P4 target; bmv2: simple_switch_grpc; bridge: Linux bridge, no pool")
        p.add_argument("--hosts", type=_hosts, default=None,
                       help="inference hosts h1..hN of star or leaf-spine (default: the shipped file's, 4)")
        p.add_argument("--storage-nodes", type=_storage_nodes, default=None, metavar="M",
                       help="storage nodes st1..stM of star or leaf-spine (default 1); M > 1: one pool address "
                            "(10.0.0.200) the switches steer over them")
        p.add_argument("--store", choices=("memory", "mooncake"), default="memory",
                       help="the storage nodes' backend (mooncake: the testbed starts a Mooncake master)")
        p.add_argument("--topology", default="star", metavar="star|leaf-spine|FILE.json",
                       help="a shipped topology (topo/layouts/) or a topology.json of your own (default star)")
        p.add_argument("--build", type=Path, default=REPO / "build", help="compiled programs (default build/)")
        p.add_argument("--state", type=Path, default=REPO / "out" / "testbed",
                       help="logs, hosts.json, controller state (default out/testbed/)")
        p.add_argument("--grpc-base", type=int, default=9559, help="P4Runtime port of device 1")
        p.add_argument("--api-base", type=int, default=9090, help="controller API port of device 1")
        p.add_argument("--no-controller", action="store_true", help="do not start controllers (no routes!)")
        p.add_argument("--verbose", action="store_true", help="Mininet's info log")
        p.add_argument("--no-pcap", action="store_true", help="no per-port pcaps under <state>/<switch>/pcap/")
        p.add_argument("--switch-log", default="info", choices=("trace", "debug", "info", "warn", "error", "off"),
                       help="the switches' -L (default info; debug/trace: every packet, in <state>/<switch>/)")
        p.add_argument("--metrics-base", type=int, default=9464,
                       help="Prometheus port of device 1's controller, device i on +i-1 (0: none; default 9464)")
        for kind in ("admission", "eviction", "recycling"):
            p.add_argument(f"--{kind}", default=None, help=f"the controllers' {kind} policy (default theirs)")
        p.add_argument("--param", action="append", default=[], metavar="KIND.NAME=VALUE",
                       help="a controller policy parameter (repeatable), e.g. admission.threshold=0.5")
        p.add_argument("--resume", action="store_true",
                       help="keep the last run's controller state and storage disk (default: start clean)")

    def engine_args(p: argparse.ArgumentParser, preset: str = "tiny") -> None:
        from topo.engines import ENGINES

        p.add_argument("--engine", choices=ENGINES, default=None,
                       help="also run an inference engine on every host, its KV connector on the pool "
                            f"(docs/engines.md; star: {ENGINE_HOSTS} hosts unless --hosts); default: none")
        p.add_argument("--engine-python", type=Path, default=REPO / ".venv-engine" / "bin" / "python",
                       help="the engine environment's python (default .venv-engine/bin/python)")
        p.add_argument("--preset", default=preset,
                       help=f"the engines' model preset (connectors/presets; default {preset})")

    run = sub.add_parser("run", help="start the testbed and open the Mininet CLI")
    testbed_args(run)
    engine_args(run)
    stop = sub.add_parser("stop", help="stop the testbed recorded in --state: its processes, nodes and interfaces")
    stop.add_argument("--state", type=Path, default=REPO / "out" / "testbed")
    demo = sub.add_parser("demo", help="testbed + trace replay + report and plot, then exit")
    testbed_args(demo)
    demo.add_argument("--trace", type=Path, default=DEMO_TRACE,
                      help="Mooncake-format JSONL (default: the shipped data/traces excerpt)")
    demo.add_argument("--out", type=Path, default=REPO / "out" / "demo", help="report folder (default out/demo)")
    demo.add_argument("--requests", type=int, default=300, help="first N requests of the trace (default 300)")
    demo.add_argument("--block-bytes", type=int, default=256, help="bytes per KV block in the demo (default 256)")
    demo.add_argument("--duration", type=float, default=20.0,
                      help="seconds the excerpt's arrival times are squeezed into (default 20)")
    demo.add_argument("--burst-mib", type=int, default=16,
                      help="then every host reads one block of this many MiB at once, with and without "
                           "coalescing (default 16; 0: no burst)")
    demo.add_argument("--announce", action="store_true",
                      help="also send INSERT for every stored block (admission on INSERT; heavy on the controller)")
    engine_args(demo, preset=DEMO_PRESET)
    demo.add_argument("--engine-requests", type=int, default=None,
                      help="with --engine: requests replayed through the engines (default 24; prefill-bound 8)")
    comp = sub.add_parser("compile", help="compile p4src/ for a target")
    comp.add_argument("--target", choices=("soft", "bmv2"), default="soft")
    comp.add_argument("--out", type=Path, default=REPO / "build")
    comp.add_argument("--force", action="store_true", help="even if up to date")
    shape = sub.add_parser("topology", help="print a shipped topology's topology.json at another size")
    shape.add_argument("name", choices=sorted(GENERATORS))
    shape.add_argument("--hosts", type=_hosts, default=4)
    shape.add_argument("--leaves", type=int, default=2, help="leaf-spine only")
    shape.add_argument("--spines", type=int, default=2, help="leaf-spine only")
    shape.add_argument("--storage-nodes", type=_storage_nodes, default=1, metavar="M")
    return parser


def _options(args: argparse.Namespace):
    from topo.testbed import TestbedOptions

    hosts = args.hosts
    if hosts is None and getattr(args, "engine", None) and args.topology == "star":
        hosts = ENGINE_HOSTS  # each host's engines take a core's worth of work to start: fewer hosts by default
    return TestbedOptions(target=args.target, hosts=hosts, storage_nodes=args.storage_nodes, store=args.store,
                          topology=args.topology, build_dir=args.build,
                          state_dir=args.state, grpc_base=args.grpc_base, api_base=args.api_base,
                          controller=not args.no_controller, verbose=args.verbose, pcap=not args.no_pcap,
                          switch_log_level=args.switch_log, metrics_base=args.metrics_base or None,
                          admission=args.admission, eviction=args.eviction, recycling=args.recycling,
                          params=tuple(args.param), resume=args.resume)


def _engine_options(args: argparse.Namespace):
    from topo.engines import EngineOptions

    return EngineOptions(kind=args.engine, preset=args.preset, python=args.engine_python)


def run(args: argparse.Namespace) -> int:
    if args.command == "compile":
        from topo.build import compile_program

        art = compile_program(args.target, args.out, force=args.force)
        print(f"{art.device_config}\n{art.p4info}")
        return 0
    if args.command == "topology":
        from topo.topologies import leaf_spine, star

        spec = (star(args.hosts, storage=args.storage_nodes) if args.name == "star"
                else leaf_spine(args.hosts, leaves=args.leaves, spines=args.spines, storage=args.storage_nodes))
        print(spec.dumps(), end="")
        return 0
    if args.command == "stop":
        from topo.testbed import stop_recorded

        for line in stop_recorded(args.state):
            print(f"stopped {line}")
        return 0
    if args.command == "run":
        from mininet.cli import CLI
        from mininet.log import setLogLevel

        from topo.testbed import Testbed

        bed = Testbed(_options(args))
        bed.start(progress=lambda msg: print(f"*** {msg}", flush=True))
        try:
            if args.engine:
                from topo.engines import start_engines

                engines = start_engines(bed, _engine_options(args), args.state / "engines",
                                        progress=lambda msg: print(f"*** {msg}", flush=True))
                for e in engines:
                    print(f"*** {e.host}: {args.engine} at {e.url} (in {e.host}'s namespace), log {e.log}")
                print(f"*** try: h1 curl -s {engines[0].url}/v1/completions -H 'Content-Type: application/json' "
                      f"-d '{{\"model\": \"kvswitch/{args.preset}\", \"prompt\": [5, 6, 7], \"max_tokens\": 4, "
                      f"\"return_tokens_as_token_ids\": true, \"logprobs\": 1}}'")
            print(bed.describe())
            print(f"*** try: h1 {sys.executable} -m kvpool.client --server {bed.storage_address[0]} put 0x1 "
                  "--version 1 --data hi")
            print(f"***      and (another terminal) {sys.executable} -m controller --api "
                  f"{bed.api_address(bed.plan.switches[0].device_id)} ls")
            setLogLevel("output")  # the CLI prints command output at this level
            CLI(bed.net)
        finally:
            bed.stop()
        return 0
    if args.command == "demo" and args.engine:
        from topo.engine_demo import options_for_preset, run_engine_demo

        print(run_engine_demo(_options(args), _engine_options(args),
                              options_for_preset(args.preset, args.trace, args.out, args.engine_requests)))
        return 0
    if args.command == "demo":
        from topo.demo import DemoOptions, run_demo

        report = run_demo(_options(args), DemoOptions(trace=args.trace, out=args.out, requests=args.requests,
                                                      block_bytes=args.block_bytes, duration=args.duration,
                                                      announce=args.announce,
                                                      burst_bytes=args.burst_mib << 20))
        print(report)
        return 0
    raise AssertionError(args.command)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # so `finally` tears the testbed down on SIGTERM too
    try:
        return run(args)
    except (TestbedError, ValueError) as exc:  # ValueError: TopologyError from a generator's arguments
        print(f"topo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
