"""The studies that span traces and sizes beyond the four questions' main replay.

* every trace: LRU, ARC, the default (`adaptive`) policy and MIN at every pool size, on the Mooncake traces,
  the shipped excerpt and the incast workloads (no parameter differs between traces);
* lookahead: hit ratio when the pool sees the queue W seconds ahead (`evaluation.lookahead`), toward MIN;
* calibration: LRU over capacities in tokens against the infinite cache, beside Mooncake's FAST'25 figure;
* capacity in bytes: blocks per switch memory preset, model and compression, with the byte hit ratio;
* the Q4 boundary grid (`evaluation.boundary`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from evaluation import boundary
from evaluation.bounds import bound_counters
from evaluation.lookahead import lookahead_curve
from evaluation.memory import COMPRESSIONS, MEMORIES, block_bytes, plan
from evaluation.model import MODELS
from evaluation.parallel import run_tasks
from evaluation.replay import replay_pool
from evaluation.sharing import MECHANISMS, Sharing
from evaluation.stream import BlockStream
from policies.spec import PolicySpec

Progress = Callable[[int], None]
CROSS_POLICIES = ("lru", "arc", "adaptive+adaptive")
"""What every trace is replayed with: the two baselines the default must beat, and the default."""
DEFAULT_POLICY = "adaptive+adaptive"
LOOKAHEAD_S = (0.0, 1.0, 5.0, 30.0)
CALIBRATION_TOKENS = (1e6, 3e6, 10e6, 30e6, 50e6, 100e6)
"""Mooncake FAST'25: 3M tokens of local cache reach under half the theoretical maximum on most workloads,
about 50M nearly all of it."""
CAPACITY_MODELS = ("llama-3-8b", "llama-3-70b", "deepseek-v3")


def run_task(streams: dict[str, BlockStream], task: tuple, progress: Progress) -> object:
    kind, name = task[0], task[1]
    stream = streams[name]
    if kind == "pool":
        spec, capacity = PolicySpec.parse(task[2]), task[3]
        counter, stats = replay_pool(stream, spec, capacity, progress)
        return {**counter.as_dict(), "prefetched": stats.get("prefetched", 0)}
    if kind == "min":
        minimum, ideal = bound_counters(stream, task[2], progress)
        return {str(c): m.as_dict() for c, m in minimum.items()}, ideal.as_dict()
    if kind == "lookahead":
        return {str(w): c.as_dict() for w, c in lookahead_curve(stream, task[2], LOOKAHEAD_S).items()}
    raise ValueError(f"unknown study task {kind!r}")


def reused_from_q1(q1: dict | None, fractions: Sequence[float]) -> dict[tuple, object]:
    """The main stream's results Q1 already has, keyed as the tasks that would recompute them."""
    if q1 is None:
        return {}
    found: dict[tuple, object] = {}
    runs = {(r["policy"], str(r["fraction"])): r for r in q1["runs"]}
    for policy in CROSS_POLICIES:
        for f in fractions:
            run = runs.get((policy, str(f)))
            if run is not None:
                found[("pool", policy, str(f))] = {
                    **{k: v for k, v in run.items() if k not in ("policy", "capacity_blocks", "fraction", "pool_stats")},
                    "prefetched": run["pool_stats"].get("prefetched", 0)}
    if all(str(f) in q1["min"] for f in fractions):
        found[("min",)] = ({str(q1["capacities"][str(f)]): q1["min"][str(f)] for f in fractions}, q1["ideal"])
    return found


def reusable_keys(q1_policies: Sequence[str], q1_fractions: Sequence[float],
                  fractions: Sequence[float]) -> set[tuple]:
    """The keys `_reused` will find in a Q1 of these policies (names) and sizes: known before Q1 has run, so
    that the studies can be planned (and run beside Q1) without the tasks Q1 already covers."""
    keys: set[tuple] = {("pool", p, str(f)) for p in CROSS_POLICIES if p in q1_policies
                        for f in fractions if str(f) in {str(g) for g in q1_fractions}}
    if all(str(f) in {str(g) for g in q1_fractions} for f in fractions):
        keys.add(("min",))
    return keys


def study_tasks(streams: dict[str, BlockStream], main: str, fractions: Sequence[float],
                lookahead_fraction: float, reused: set[tuple] | dict[tuple, object]) -> list[tuple]:
    """The replays of the studies but those whose key is in `reused` (the main stream's, from Q1)."""
    tasks: list[tuple] = []
    for name, stream in streams.items():
        caps = [stream.capacity(f) for f in fractions]
        if name != main or ("min",) not in reused:
            tasks.append(("min", name, caps))
        tasks += [("pool", name, p, c) for p in CROSS_POLICIES for c, f in zip(caps, fractions, strict=True)
                  if name != main or ("pool", p, str(f)) not in reused]
    tasks += [("lookahead", name, stream.capacity(lookahead_fraction)) for name, stream in streams.items()]
    tasks += [("pool", n, "lru", c) for n, caps in _calibration(streams).items() for c in caps]
    tasks += [("pool", main, "lru", c) for c in _byte_caps(streams[main])]
    return tasks


def task_cost(streams: dict[str, BlockStream], task: tuple) -> float:
    """Estimated CPU of one study task (the units of `evaluation.experiments.task_cost`)."""
    from evaluation.experiments import policy_cost

    kind, stream = task[0], streams[task[1]]
    n = len(stream)
    if kind == "pool":
        return n * policy_cost(task[2], task[3] / max(1, stream.unique_blocks))
    if kind == "min":
        return n * 2.5 * len(task[2])
    if kind == "lookahead":
        return n * LOOKAHEAD_COST * len(LOOKAHEAD_S)
    return 0.0


LOOKAHEAD_COST = 6.0
"""Relative CPU per reference of one lookahead window (LRU = 1)."""


def _calibration(streams: dict[str, BlockStream]) -> dict[str, list[int]]:
    mooncake = [n for n in streams if n.endswith("_trace")]
    return {n: [max(1, round(t / 512)) for t in CALIBRATION_TOKENS] for n in mooncake}


def _byte_caps(stream: BlockStream) -> list[int]:
    return sorted({r["blocks"] for r in capacity_rows(stream.unique_blocks)})


def studies_from(streams: dict[str, BlockStream], main: str, fractions: Sequence[float],
                 lookahead_fraction: float, results: list, reused: dict[tuple, object]) -> dict:
    """The studies section from the results of `study_tasks` (in their order) and the `reused` Q1 results."""
    done = iter(results)
    traces: dict[str, dict] = {}
    for name, stream in streams.items():
        caps = [stream.capacity(f) for f in fractions]
        here = reused if name == main else {}
        minimum, ideal = here[("min",)] if ("min",) in here else next(done)  # type: ignore[misc]
        runs = {p: {str(f): here.get(("pool", p, str(f))) or next(done) for f in fractions}
                for p in CROSS_POLICIES}
        runs["MIN"] = {str(f): minimum[str(c)] for f, c in zip(fractions, caps, strict=True)}
        traces[name] = {"references": len(stream), "unique_blocks": stream.unique_blocks,
                        "capacities": {str(f): c for f, c in zip(fractions, caps, strict=True)},
                        "runs": runs, "ideal": ideal, "lookahead": None}
    for name in streams:
        traces[name]["lookahead"] = {"fraction": lookahead_fraction, "hits": next(done),
                                     "min": traces[name]["runs"]["MIN"].get(str(lookahead_fraction))}
    calibration = _calibration(streams)
    calib = {n: {"tokens": list(CALIBRATION_TOKENS), "lru": [next(done)["block_hit_ratio"] for _ in caps],
                 "ideal": traces[n]["ideal"]["block_hit_ratio"]} for n, caps in calibration.items()}
    sizes = capacity_rows(streams[main].unique_blocks)
    lru_at = {c: next(done)["block_hit_ratio"] for c in _byte_caps(streams[main])}
    if next(done, None) is not None:
        raise ValueError("studies: more results than tasks")
    for row in sizes:
        row["lru_hit_ratio"] = lru_at[row["blocks"]]
        row["byte_hit_ratio"] = row["lru_hit_ratio"] * row["share"]
    return {"default_policy": DEFAULT_POLICY, "traces": traces, "calibration": calib, "capacity": sizes,
            "boundary": boundary_study()}


def run_studies(streams: dict[str, BlockStream], main: str, fractions: Sequence[float], lookahead_fraction: float,
                progress: Progress | None = None, jobs: int = 1, q1: dict | None = None) -> dict:
    """Everything above but the boundary, as plain data; `main` names the stream whose Q1 ran already (its
    runs of the every-trace policies and its MIN are taken from `q1` instead of replayed again)."""
    reused = reused_from_q1(q1, fractions)
    tasks = study_tasks(streams, main, fractions, lookahead_fraction, reused)
    results = run_tasks(run_task, streams, tasks, jobs, progress, lambda t: task_cost(streams, t))
    return studies_from(streams, main, fractions, lookahead_fraction, results, reused)


def capacity_rows(unique_blocks: int) -> list[dict]:
    """Every memory preset × model × compression: bytes per block and how the pool holds them."""
    rows = []
    for model in CAPACITY_MODELS:
        for comp in COMPRESSIONS.values():
            size = block_bytes(MODELS[model], comp)
            for memory in MEMORIES.values():
                p = plan(memory.bytes, size)
                rows.append({"model": model, "compression": comp.name, "memory": memory.name,
                             "memory_bytes": memory.bytes, "block_bytes": size, "blocks": p.blocks,
                             "share": p.share, "mode": p.mode, "whole": p.whole,
                             "fraction_of_unique": p.blocks / max(1, unique_blocks)})
    return rows


BOUNDARY_BLOCKS = {f"{m} {c}": block_bytes(MODELS[m], COMPRESSIONS[c])
                   for m, c in (("llama-3-70b", "bf16"), ("llama-3-8b", "bf16"), ("llama-3-8b", "fp8"),
                                ("deepseek-v3", "bf16"), ("deepseek-v3", "fp8"), ("deepseek-v3", "cachegen-4.3x"))}
BOUNDARY_CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
BOUNDARY_LINKS = (25.0, 100.0, 400.0)
BOUNDARY_NODES = (2, 4, 8, 16, 32, 64)
BOUNDARY_WINDOWS_S = (0.001, 0.004, 0.01, 0.05, 0.2, 1.0)
"""Spans over which the group's readers start (agent fan-out: 16 calls within 50 ms; batch jobs: 2 s)."""


def _cells(rows: list[list[boundary.Outcome]]) -> list[list[dict]]:
    return [[{"net_ms": 1000 * o.net_benefit_s, "store_adds_ms": 1000 * o.store_adds_s,
              "without_ms": 1000 * o.without_s, "installed": o.installed_share,
              "writes_per_s": o.table_writes_per_s, "sends_per_reader": o.sends_per_reader} for o in row]
            for row in rows]


BOUNDARY_WINDOW_S = 0.05
"""The planes' readers start over 50 ms: an agent step's 16 parallel calls (`evaluation.synthetic`), the
incast workload whose readers start closest together; at the old 1 s nothing merges as built."""


def boundary_study() -> dict:
    """Four planes through the boundary, around Llama-3-8B FP8 blocks, 16 readers starting over 50 ms,
    100 Gb/s, 16 nodes; and the base at 1 s as built against what the old 1 s window credited."""
    base = boundary.Scenario(block_bytes=BOUNDARY_BLOCKS["llama-3-8b fp8"], memory=MEMORIES["switch+dram"],
                             window_s=BOUNDARY_WINDOW_S)
    memories = list(MEMORIES)
    planes = {}
    rows = []
    for mem in memories:
        software = mem == "softswitch"
        rows.append([boundary.evaluate(replace(base, block_bytes=b, memory=MEMORIES[mem], software_target=software))
                     for b in BOUNDARY_BLOCKS.values()])
    planes["memory x block bytes"] = {"x": list(BOUNDARY_BLOCKS), "y": memories, "cells": _cells(rows)}
    planes["link x concurrency"] = {
        "x": [f"{g:g} Gb/s" for g in BOUNDARY_LINKS], "y": [str(c) for c in BOUNDARY_CONCURRENCY],
        "cells": _cells(boundary.grid(base, "link_gbps", list(BOUNDARY_LINKS), "concurrency",
                                      list(BOUNDARY_CONCURRENCY)))}
    planes["nodes x concurrency"] = {
        "x": [str(n) for n in BOUNDARY_NODES], "y": [str(c) for c in BOUNDARY_CONCURRENCY],
        "cells": _cells(boundary.grid(base, "nodes", list(BOUNDARY_NODES), "concurrency",
                                      list(BOUNDARY_CONCURRENCY)))}
    mechanisms = [Sharing(m) for m in MECHANISMS]
    planes["sharing x arrival window"] = {
        "x": [f"{1000 * w:g} ms" for w in BOUNDARY_WINDOWS_S], "y": [m.label() for m in mechanisms],
        "cells": _cells(boundary.grid(base, "window_s", list(BOUNDARY_WINDOWS_S), "sharing", mechanisms))}
    per_block = boundary.evaluate(boundary.Scenario(block_bytes=BOUNDARY_BLOCKS["llama-3-8b fp8"],
                                                    memory=MEMORIES["switch+dram"], chunk_index=False))
    second = replace(base, window_s=1.0)
    credited = boundary.evaluate(replace(second, sharing=Sharing("incast-window")))
    as_built = boundary.evaluate(second)
    planes_note = {"per_block_index_net_ms": 1000 * per_block.net_benefit_s,
                   "per_block_index_installed": per_block.installed_share,
                   "as_built_net_ms": 1000 * as_built.net_benefit_s,
                   "as_built_sends_per_reader": as_built.sends_per_reader,
                   "credited_net_ms": 1000 * credited.net_benefit_s,
                   "round_trip_ms": 1000 * base.sharing.round_trip_s}
    return {"planes": planes, "base": {"block": "llama-3-8b fp8", "memory": "switch+dram", "concurrency": 16,
                                       "link_gbps": 100.0, "nodes": 16, "prefix_blocks": 24,
                                       "window_s": base.window_s, "sharing": base.sharing.label(),
                                       "writes_per_s": boundary.CONTROLLER_WRITES_PER_S},
            **planes_note}
