"""Evaluator throughput: block references replayed per second per policy through `policies.pool.Pool`,
against libCacheSim's own C replay of the same block stream in the same run, and the wall time of the
standard report (`python -m evaluation run`; quick mode: the shipped excerpt with small scale points).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from evaluation.__main__ import main as evaluation_main
from evaluation.replay import replay_pool
from evaluation.stream import BlockStream
from evaluation.traces import default_trace_path, excerpt_path, load_trace
from policies.reference import POLICIES as LIBCACHESIM_POLICIES
from policies.reference import ReferenceTrace
from policies.spec import PolicySpec

POLICIES = ("lru", "s3fifo", "arc", "tinylfu+lru", "prefix_lru", "value+value+residual")
FRACTION = 0.01


def _trace_path(quick: bool) -> Path:
    full = default_trace_path()
    return excerpt_path() if quick or not full.is_file() else full


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = _trace_path(quick)
    stream = BlockStream.from_trace(load_trace(path))
    capacity = stream.capacity(FRACTION)
    keys = [b.key for b in stream.blocks]
    rows = []
    with ReferenceTrace(keys) as reference:
        for text in POLICIES:
            spec = PolicySpec.parse(text)
            started = time.perf_counter()
            counter, _ = replay_pool(stream, spec, capacity)
            ours_s = time.perf_counter() - started
            baseline = spec.eviction if spec.eviction in LIBCACHESIM_POLICIES else "lru"
            ref = reference.run(baseline, capacity)
            ours_rate = len(stream) / ours_s
            ref_rate = len(stream) / ref.seconds if ref.seconds else float("inf")
            rows.append({"policy": spec.name, "refs": len(stream), "capacity_blocks": capacity,
                         "hit_ratio": counter.block_hit_ratio, "refs_per_s": ours_rate,
                         "libcachesim_policy": baseline, "libcachesim_hit_ratio": ref.hit_ratio,
                         "libcachesim_refs_per_s": ref_rate, "ratio": ours_rate / ref_rate})
    report_dir = out_dir / "evaluation_report"
    argv = ["run", "--trace", str(path), "--out", str(report_dir), "--no-progress"]
    if quick:
        argv += ["--scale-nodes", "2,8", "--scale-requests", "500"]
    started = time.perf_counter()
    code = evaluation_main(argv)
    report_s = time.perf_counter() - started
    result = {"trace": str(path), "quick": quick, "replay": rows,
              "standard_report": {"argv": argv, "exit_code": code, "wall_s": report_s}}
    (out_dir / "evaluation.json").write_text(json.dumps(result, indent=1))
    lines = [f"## evaluation — trace `{path.name}`, pool {100 * FRACTION:g}% ({capacity} blocks)", "",
             "| policy | refs/s (Pool) | hit ratio | libCacheSim policy | refs/s (libCacheSim) | hit ratio | ratio |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    lines += [f"| {r['policy']} | {r['refs_per_s']:,.0f} | {r['hit_ratio']:.4f} | {r['libcachesim_policy']} | "
              f"{r['libcachesim_refs_per_s']:,.0f} | {r['libcachesim_hit_ratio']:.4f} | {r['ratio']:.3f} |"
              for r in rows]
    lines += ["", f"Standard report (`python -m evaluation {' '.join(argv[1:])}`): {report_s:.1f} s wall, "
              f"exit code {code}.", ""]
    (out_dir / "evaluation.md").write_text("\n".join(lines))
    return result
