"""`python -m evaluation run --trace PATH --policies a,b,c --pool-sizes 0.5%,1%,5%,10% --nodes N --out DIR`.

Replays a KV-cache trace through the switch pool policies and the tiered cluster model, then writes
`results.json`, `report.md`, `requests.csv` (per request: source tier of each reused block, bytes per link,
TTFT with all tiers) and PNG plots answering the project's four research questions.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from evaluation import arrivals, studies, testbed
from evaluation.cluster import ClusterConfig
from evaluation.costs import ControlCosts, Links, gpu_preset
from evaluation.experiments import (
    EvalOptions,
    SideTasks,
    parse_policies,
    run_all,
    scale_streams,
    sharings,
    work_units,
)
from evaluation.memory import COMPRESSIONS, MEMORIES
from evaluation.model import MODELS, model_preset
from evaluation.parallel import default_jobs
from evaluation.plots import write_all
from evaluation.remote_store import REMOTE_TIERS, MooncakeEviction
from evaluation.report import render
from evaluation.sharing import MECHANISMS, ROUND_TRIP_S, Sharing
from evaluation.stream import BlockStream
from evaluation.synthetic import INCAST_KINDS, generate_incast
from evaluation.traces import TraceError, default_trace_path, load_trace
from evaluation.ttft import CostModel

DEFAULT_POLICIES = ("lru,s3fifo,arc,tinylfu+lru,value+value+residual,conversation+conversation+residual,"
                    "adaptive+adaptive")
"""Baseline LRU, scan-resistant classics, the project's reuse-value and conversation policies, and the default
(`adaptive`: follows the best of LRU, ARC and conversation online)."""


def default_extra_traces(main: Path) -> list[Path]:
    """The other Mooncake traces next to the main one, and the shipped excerpt (so `make eval` covers all)."""
    found = sorted(p for p in main.parent.glob("*_trace.jsonl") if p.resolve() != main.resolve())
    excerpt = Path(__file__).resolve().parents[1] / "data" / "traces" / "mooncake_conversation_excerpt.jsonl"
    return found + ([excerpt] if excerpt.exists() else [])


def percent_list(text: str) -> tuple[float, ...]:
    """`0.5%,1%,5%` or `0.005,0.01` → fractions in (0, 1]."""
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            value = float(item[:-1]) / 100 if item.endswith("%") else float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not a percentage like 1% or a fraction like 0.01") from None
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"{item!r} must be in (0%, 100%]")
        values.append(value)
    return tuple(values)


def int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be ≥ 1")
    return values


def float_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be > 0")
    return values


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be ≥ 1")
    return value


def storage_size(text: str) -> int | str:
    if text in ("unbounded", "auto"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a block count or 'unbounded'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be ≥ 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="replay a trace and write the standard report",
                         description="Replay a trace; write results.json, report.md and PNG plots.")
    run.add_argument("--trace", type=Path, default=None,
                     help="Mooncake-format JSON Lines trace (default: $KVSWITCH_TRACES/mooncake/"
                          "conversation_trace.jsonl)")
    run.add_argument("--limit", type=positive_int, default=None, help="replay only the first N requests")
    run.add_argument("--policies", default=DEFAULT_POLICIES,
                     help="comma-separated [ADMISSION+]EVICTION[+RECYCLING] (default %(default)s)")
    run.add_argument("--pool-sizes", type=percent_list, default=(0.005, 0.01, 0.05, 0.10),
                     help="switch pool sizes as %% of unique blocks (default 0.5%%,1%%,5%%,10%%)")
    run.add_argument("--switch-size", type=percent_list, default=(0.01,),
                     help="pool size for the tier, recycling and scale experiments (default 1%%)")
    run.add_argument("--nodes", type=positive_int, default=4, help="inference nodes (default 4)")
    run.add_argument("--routing", choices=("prefix", "round-robin"), default="prefix")
    run.add_argument("--hbm-blocks", type=int, default=256, help="per node (default 256)")
    run.add_argument("--dram-blocks", type=int, default=2048, help="per node; 0 disables (default 2048)")
    run.add_argument("--remote-tier", choices=REMOTE_TIERS, default="mooncake",
                     help="how the Q2/Q3 remote DRAM pool evicts: as Mooncake Store's master (watermark, ratio, "
                          "leases, soft pins), exact LRU, or never (default %(default)s)")
    run.add_argument("--remote-size", type=percent_list, default=(0.05,),
                     help="Q2/Q3 remote pool capacity as %% of unique blocks (default 5%%)")
    run.add_argument("--remote-soft-pin-depth", type=int, default=0,
                     help="Mooncake tier: blocks at prompt depth < N are put with soft pin (default 0: none)")
    run.add_argument("--storage-blocks", type=storage_size, default="auto",
                     help="Q2/Q3 remote pool capacity in blocks (overrides --remote-size), or 'unbounded' "
                          "(= --remote-tier infinite); default auto")
    run.add_argument("--storage-nodes", type=positive_int, default=1)
    run.add_argument("--model", choices=sorted(MODELS), default="llama-3-8b")
    run.add_argument("--gpu", choices=("a100", "h100"), default="a100")
    run.add_argument("--utilisation", type=float, default=0.5, help="achieved fraction of GPU peak")
    run.add_argument("--link-gbps", type=float, default=100.0, help="node, storage and switch port line rate")
    run.add_argument("--sharing", choices=MECHANISMS, default="stream-join",
                     help="which reads of one block the switch merges (evaluation.sharing): stream-join (the data "
                          "plane as built: coalescing plus stream join), round-trip (coalescing only) or "
                          "incast-window (the old 1 s window, an upper bound); default %(default)s")
    run.add_argument("--round-trip-ms", type=float, default=1000 * ROUND_TRIP_S,
                     help="how long a first reader's GET stays pending at the switch (default %(default)g ms)")
    run.add_argument("--recycling", default="drop,demote,residual", help="recycling policies compared in Q3")
    run.add_argument("--scale-nodes", type=int_list, default=(2, 4, 8, 16, 32))
    run.add_argument("--link-speeds", type=float_list, default=(25.0, 100.0, 400.0), help="Gb/s, for Q4")
    run.add_argument("--scale-requests", type=positive_int, default=3000)
    run.add_argument("--extra-traces", default="auto",
                     help="comma-separated traces for the every-trace studies; 'auto': the other *_trace.jsonl "
                          "beside --trace and the shipped excerpt; 'none': only --trace")
    run.add_argument("--no-incast", action="store_true", help="leave the synthetic incast workloads out")
    run.add_argument("--switch-memory", choices=sorted(MEMORIES), default="switch+dram",
                     help="switch pool memory preset for Q2/Q3 (default %(default)s)")
    run.add_argument("--compression", choices=sorted(COMPRESSIONS), default="bf16")
    run.add_argument("--bench-dir", type=Path, default=Path("out/bench"),
                     help="benchmark results (incast.json, mooncake_fanout.json) for the model-versus-testbed "
                          "table; left out when none is there (default %(default)s)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", type=Path, default=Path("out/eval"))
    run.add_argument("--jobs", type=positive_int, default=default_jobs(),
                     help="worker processes for independent replays (default %(default)s)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def options_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> EvalOptions:
    """Turn parsed arguments into options; anything invalid becomes a usage error."""
    try:
        specs = tuple(parse_policies(args.policies))
        gpu = gpu_preset(args.gpu)
        if not 0 < args.utilisation <= 1:
            raise ValueError(f"--utilisation must be in (0, 1], got {args.utilisation}")
        gpu = dataclasses.replace(gpu, utilisation=args.utilisation)
        if args.remote_soft_pin_depth < 0:
            raise ValueError("--remote-soft-pin-depth must be ≥ 0")
        cluster = ClusterConfig(nodes=args.nodes, routing=args.routing, hbm_blocks=args.hbm_blocks,
                                dram_blocks=args.dram_blocks, storage_nodes=args.storage_nodes,
                                mooncake=MooncakeEviction(soft_pin_depth=args.remote_soft_pin_depth,
                                                          seed=args.seed))
        remote_tier = "infinite" if args.storage_blocks == "unbounded" else args.remote_tier
        remote_blocks = args.storage_blocks if isinstance(args.storage_blocks, int) else None
        links = Links(node_nic_gbps=args.link_gbps, storage_nic_gbps=args.link_gbps,
                      switch_port_gbps=args.link_gbps)
        sharing = Sharing(args.sharing, args.round_trip_ms / 1000, links.incast_window_s)
        recycling = tuple(r.strip() for r in args.recycling.split(",") if r.strip())
        for name in recycling:
            parse_policies(f"{specs[0].admission}+{specs[0].eviction}+{name}")
    except (ValueError, KeyError, LookupError) as exc:
        parser.error(str(exc))
    return EvalOptions(policies=specs, fractions=args.pool_sizes, cluster=cluster,
                       cost=CostModel(model_preset(args.model), gpu, links, ControlCosts(), sharing=sharing),
                       switch_fraction=args.switch_size[0], recycling=recycling,
                       scale_nodes=args.scale_nodes, link_gbps=args.link_speeds,
                       scale_requests=args.scale_requests, seed=args.seed,
                       switch_memory=args.switch_memory, compression=args.compression,
                       remote_tier=remote_tier, remote_fraction=args.remote_size[0], remote_blocks=remote_blocks)


def write_outputs(results: dict, out: Path) -> list[Path]:
    """results.json, report.md, requests.csv and the PNGs, into `out` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    per_request = results["q2"]["configs"][0].pop("per_request")
    with (out / "requests.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(per_request[0]))
        writer.writeheader()
        writer.writerows(per_request)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "report.md").write_text(render(results))
    return write_all(results, out)


def trace_name(path: Path) -> str:
    return path.name.removesuffix(".jsonl")


def study_streams(main: Path, stream: BlockStream, args: argparse.Namespace) -> dict[str, BlockStream]:
    """The main trace, the extra traces and (unless --no-incast) the incast workloads, by name."""
    streams = {trace_name(main): stream}
    if args.extra_traces == "auto":
        extra = default_extra_traces(main)
    elif args.extra_traces == "none":
        extra = []
    else:
        extra = [Path(p.strip()) for p in args.extra_traces.split(",") if p.strip()]
    for path in extra:
        streams[trace_name(path)] = BlockStream.from_trace(load_trace(path, args.limit))
    if not args.no_incast:
        for kind in INCAST_KINDS:
            streams[kind] = BlockStream.from_trace(generate_incast(kind, seed=args.seed))
    return streams


ARRIVALS_COST = 4.0
"""Relative CPU per block reference of the arrival-spread study (units of `studies.task_cost`)."""


def side_task(shared: tuple[dict[str, BlockStream], tuple], task: tuple, progress: Callable[[int], None]) -> object:
    """A task run beside Q1: a study replay, or (`("arrivals",)`) the arrival spread of every stream."""
    streams, arrival_args = shared
    if task[0] == "arrivals":
        return arrivals.study(streams, *arrival_args)
    return studies.run_task(streams, task, progress)


def side_cost(streams: dict[str, BlockStream], task: tuple) -> float:
    if task[0] == "arrivals":
        return ARRIVALS_COST * sum(len(s) for s in streams.values())
    return studies.task_cost(streams, task)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    options = options_from(args, parser)
    path = args.trace or default_trace_path()
    started = time.perf_counter()
    try:
        args.out.mkdir(parents=True, exist_ok=True)  # fail before a long replay, not after it
    except OSError as exc:
        print(f"error: cannot create the output folder {args.out}: {exc}", file=sys.stderr)
        return 1
    try:
        trace = load_trace(path, args.limit)
    except (TraceError, FileNotFoundError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stream = BlockStream.from_trace(trace)
    streams = scale_streams(options)
    try:
        studied = study_streams(path, stream, args)
    except (TraceError, FileNotFoundError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    workloads = {name: s for name, s in studied.items() if name in INCAST_KINDS}
    total = work_units(stream, options, streams, workloads) + sum(len(s) for s in studied.values()) * 14
    with tqdm(total=total, unit="ref", unit_scale=True, disable=args.no_progress, file=sys.stderr) as bar:
        # The studies' replays do not depend on Q1's outcome: they run in Q1's batch, longest first, so both
        # workers stay busy; the main trace's runs Q1 makes anyway are taken from Q1, not replayed again.
        main = trace_name(path)
        planned = studies.reusable_keys([s.name for s in options.policies], options.fractions, options.fractions)
        cost = options.cost
        assert cost is not None  # options_from always sets it
        # The arrival spread needs no replay either: one more side task (the last).
        arrival_args = (cost.block_bytes, options.link_gbps, sharings(cost), cost.links.storage_nic_gbps)
        side = SideTasks(side_task, (studied, arrival_args),
                         [*studies.study_tasks(studied, main, options.fractions, options.switch_fraction, planned),
                          ("arrivals",)],
                         lambda t: side_cost(studied, t))
        results = run_all(stream, options, bar.update, bar.set_description, streams, args.jobs, side, workloads)
        reused = studies.reused_from_q1(results["q1"], options.fractions)
        if set(reused) != planned:
            raise AssertionError(f"studies planned to reuse {sorted(planned)} from Q1, found {sorted(reused)}")
        results["arrivals"] = side.results.pop()
        results["studies"] = studies.studies_from(studied, main, options.fractions, options.switch_fraction,
                                                  side.results, reused)
    try:
        measured = testbed.compare(args.bench_dir, cost.sharing)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"warning: model versus testbed left out: {args.bench_dir}: {exc!r}", file=sys.stderr)
        measured = None
    if measured is not None:
        results["testbed"] = measured
    results["meta"] = {
        "trace": str(path), "requests": len(trace.requests), "block_references": len(stream),
        "unique_blocks": stream.unique_blocks, "duration_s": trace.duration_s,
        "model": cost.model.name, "block_bytes": cost.block_bytes, "block_tokens": cost.block_tokens,
        "gpu": cost.gpu.name, "utilisation": cost.gpu.utilisation, "link_gbps": cost.links.node_nic_gbps,
        "nodes": options.cluster.nodes, "routing": options.cluster.routing,
        "switch_fraction": options.switch_fraction, "policies": [s.name for s in options.policies],
        "switch_memory": options.switch_memory, "compression": options.compression,
        "remote_tier": options.remote_tier,
        "seconds": time.perf_counter() - started, "jobs": args.jobs,
    }
    try:
        pngs = write_outputs(results, args.out)
    except OSError as exc:
        print(f"error: cannot write the report to {args.out}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'results.json'}, report.md, requests.csv and {len(pngs)} plots "
          f"in {results['meta']['seconds']:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args, parser)
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
