"""Hit ratio and replay speed of every policy combination on the Mooncake conversation trace.

Block stream: requests in timestamp order, each contributing its hash_ids, one access per block
reference, block-level hits (as in /work/shared/traces/README.md). Pools of 1% and 5% of the unique
blocks. Yardsticks measured in the same run: libCacheSim's LRU/LFU/S3-FIFO/ARC and Belady's MIN (which
reads the future; no policy of ours does). Speed: block references replayed per second through
`policies.pool.Pool`, against libCacheSim's own C replay (`process_trace`) of the same stream, as a ratio;
and the replay loop the evaluator uses (`Pool.access_many` per request) against libCacheSim's Python loop
(`cache.get(request)` per reference) for LRU, same stream, same hits (`replay_speed`).

`python -m bench policies` runs everything; `python -m bench.policies --speed-only` only the LRU speed ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from typing import Any

import libcachesim as lcs

from policies.base import BlockInfo
from policies.reference import ReferenceTrace
from policies.registry import make_pool
from policies.request import RequestAnnotator

COMBINATIONS: list[tuple[str, str]] = [
    ("always", "lru"),
    ("always", "lfu"),
    ("always", "s3fifo"),
    ("always", "arc"),
    ("always", "prefix_lru"),
    ("always", "kvcache_wild"),
    ("frequency", "lru"),
    ("tinylfu", "lru"),
    ("frequency", "kvcache_wild"),
    ("value", "kvcache_wild"),
    ("value", "value"),
    ("conversation", "conversation"),
    ("frequency", "conversation"),
]
"""(admission, eviction) pairs replayed; recycling is `drop` (it does not change hits in one tier)."""

REFERENCE = ["lru", "lfu", "s3fifo", "arc", "belady"]
SHARES = (0.01, 0.05)
QUICK_REQUESTS = 2000


def trace_path() -> pathlib.Path:
    """The conversation trace: $KVSWITCH_TRACES/mooncake/..., else the shared folder next to the repo."""
    root = os.environ.get("KVSWITCH_TRACES")
    base = pathlib.Path(root) if root else pathlib.Path(__file__).resolve().parents[2] / "shared" / "traces"
    return base / "mooncake" / "conversation_trace.jsonl"


def load_stream(path: pathlib.Path, limit: int | None = None) -> list[tuple[BlockInfo, float]]:
    """(block, time in seconds) per block reference, requests sorted stably by timestamp."""
    with open(path) as lines:
        requests = [json.loads(line) for line in lines if line.strip()]
    requests.sort(key=lambda r: r["timestamp"])
    if limit is not None:
        requests = requests[:limit]
    annotator = RequestAnnotator()
    stream: list[tuple[BlockInfo, float]] = []
    for request in requests:
        now = request["timestamp"] / 1000.0
        stream.extend(
            (block, now)
            for block in annotator.blocks(
                request["hash_ids"], request["input_length"], now=now, output_length=request["output_length"]
            )
        )
    return stream


TTL_GRID_S = (3, 6, 10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800)


def class_ttl_bound(stream: list[tuple[BlockInfo, float]], capacity: int) -> float:
    """Hit ratio of the best *fixed* per-class TTL policy, tuned offline on the reuse times themselves.

    Classes are those of `policies.reuse` (turn ≤ 5, earlier reads ≤ 3, prompt tail): hold a block T_c
    seconds after each read, with the T_c chosen by a Lagrangian sweep so that the *average* occupancy
    fits `capacity`. It is a reference point for "class-level knowledge, perfectly tuned", not a strict
    ceiling: the load varies over the hour and an adaptive policy (even LRU at 5%) can beat fixed TTLs.
    """
    n = len(stream)
    next_use = [0.0] * n
    seen: dict[Any, float] = {}
    for i in range(n - 1, -1, -1):
        block, now = stream[i]
        next_use[i] = seen.get(block.key, float("inf")) - now
        seen[block.key] = now
    reads: dict[Any, int] = {}
    per_class: dict[tuple[int, int, bool], list[float]] = {}
    for i, (block, _) in enumerate(stream):
        count = reads.get(block.key, 0)
        reads[block.key] = count + 1
        per_class.setdefault((min(block.turn, 5), min(count, 3), block.is_last), []).append(next_use[i])
    table = [
        [(sum(1 for x in gaps if x <= ttl), sum(min(x, ttl) for x in gaps)) for ttl in TTL_GRID_S]
        for gaps in per_class.values()
    ]
    duration = max(stream[-1][1] - stream[0][1], 1.0)
    low, high, best = 0.0, 1.0, 0
    for _ in range(40):
        price = (low + high) / 2
        hits = held = 0.0
        for options in table:
            _gain, h, s = max(((h - price * s), h, s) for h, s in [(0, 0.0), *options])
            hits += h
            held += s
        if held / duration > capacity:
            low = price
        else:
            high, best = price, hits
    return best / n


SPEED_REPEATS = 3
"""Each loop runs this many times; the fastest counts (the least disturbed by other work on the machine)."""


def _libcachesim_python_loop(keys: list[int], capacity: int, sized: bool) -> tuple[int, float]:
    """(hits, seconds) of libCacheSim's LRU driven from Python, one `get` per reference, one reused request.

    `sized`: its hash table sized to the stream as `policies.reference` does; else libCacheSim's default of 2^24
    buckets, whose first touches and cache misses fall inside the loop and slow it about 3×."""
    if sized:
        cache = lcs.LRU(capacity, hashpower=max(12, min(24, len(set(keys)).bit_length() + 1)))
    else:
        cache = lcs.LRU(capacity)
    request = lcs.Request()
    request.obj_size = 1
    get = cache.get
    hits = 0
    start = time.perf_counter()
    for key in keys:
        request.obj_id = key
        hits += get(request)
    return hits, time.perf_counter() - start


def _pool_loop(stream: list[tuple[BlockInfo, float]], capacity: int) -> tuple[int, float]:
    """(hits, seconds) of our LRU pool driven as the evaluator does: `Pool.access_many` per request."""
    requests: list[tuple[float, list[BlockInfo]]] = []
    for block, now in stream:
        if not requests or requests[-1][0] != now or block.depth == 0:
            requests.append((now, []))
        requests[-1][1].append(block)
    pool = make_pool(capacity, "always", "lru", "drop", log_limit=0)
    access_many = pool.access_many
    hits = 0
    start = time.perf_counter()
    for now, blocks in requests:
        hits += sum(access_many(blocks, now))
    return hits, time.perf_counter() - start


def replay_speed(stream: list[tuple[BlockInfo, float]], capacities: dict[str, int],
                 repeats: int = SPEED_REPEATS) -> dict[str, Any]:
    """LRU replay rate of `Pool.access_many` over libCacheSim's Python loop, per pool size (same hits)."""
    keys = [int(block.key) for block, _ in stream]  # type: ignore[call-overload]  # evaluator keys are ints
    rows: dict[str, Any] = {}
    for label, capacity in capacities.items():
        ours = min((_pool_loop(stream, capacity) for _ in range(repeats)), key=lambda r: r[1])
        row: dict[str, Any] = {"capacity": capacity, "hits": ours[0], "pool_refs_per_s": len(keys) / ours[1]}
        for table in ("default", "sized"):
            theirs = min((_libcachesim_python_loop(keys, capacity, table == "sized") for _ in range(repeats)),
                         key=lambda r: r[1])
            if ours[0] != theirs[0]:
                raise AssertionError(f"LRU at {capacity} blocks: {ours[0]} hits here, {theirs[0]} in libCacheSim")
            row[f"libcachesim_{table}_refs_per_s"] = len(keys) / theirs[1]
            row[f"ratio_{table}"] = theirs[1] / ours[1]
        rows[label] = row
    return {"references": len(keys), "repeats": repeats, "sizes": rows}


def _speed_markdown(speed: dict[str, Any]) -> str:
    lines = [
        f"LRU replay speed, {speed['references']:,} block references, best of {speed['repeats']} "
        "(`Pool.access_many` per request vs libCacheSim's Python loop, one `LRU.get` per reference; equal hits):",
        "",
        "| pool | blocks | ours refs/s | libCacheSim, default table | ratio | libCacheSim, table sized | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, row in speed["sizes"].items():
        lines.append(f"| {label} | {row['capacity']:,} | {row['pool_refs_per_s']:,.0f} | "
                     f"{row['libcachesim_default_refs_per_s']:,.0f} | {row['ratio_default']:.2f}× | "
                     f"{row['libcachesim_sized_refs_per_s']:,.0f} | {row['ratio_sized']:.2f}× |")
    lines += ["", "Default table: `lcs.LRU(capacity)` (2^24 hash buckets); sized: `hashpower` fitted to the stream's "
              "unique blocks, as `policies.reference` runs libCacheSim. Ratio > 1: our loop is faster."]
    return "\n".join(lines) + "\n"


def run_speed(out_dir: pathlib.Path, quick: bool = False) -> dict[str, Any]:
    """Only the LRU speed ratio: `speed.json` and `speed.md` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stream = load_stream(trace_path(), QUICK_REQUESTS if quick else None)
    unique = len({block.key for block, _ in stream})
    speed = replay_speed(stream, {f"{s:.0%}": max(20, round(unique * s)) for s in SHARES})
    (out_dir / "policies_speed.json").write_text(json.dumps(speed, indent=1))
    (out_dir / "policies_speed.md").write_text(_speed_markdown(speed))
    return speed


def run(out_dir: pathlib.Path, quick: bool = False) -> dict[str, Any]:
    from tqdm import tqdm

    out_dir.mkdir(parents=True, exist_ok=True)
    stream = load_stream(trace_path(), QUICK_REQUESTS if quick else None)
    keys = [block.key for block, _ in stream]
    unique = len(set(keys))
    capacities = {f"{share:.0%}": max(20, round(unique * share)) for share in SHARES}
    result: dict[str, Any] = {
        "trace": str(trace_path()),
        "quick": quick,
        "block_references": len(stream),
        "unique_blocks": unique,
        "capacities": capacities,
        "reference": {},
        "policies": {},
    }
    with ReferenceTrace(keys) as trace:
        for label, capacity in capacities.items():
            for name in REFERENCE:
                ref = trace.run(name, capacity)
                result["reference"].setdefault(name, {})[label] = {
                    "hit_ratio": ref.hit_ratio,
                    "refs_per_s": ref.requests / ref.seconds if ref.seconds else None,
                }
    result["class_ttl_bound"] = {label: class_ttl_bound(stream, cap) for label, cap in capacities.items()}
    jobs = [(a, e, label, cap) for a, e in COMBINATIONS for label, cap in capacities.items()]
    for admission, eviction, label, capacity in tqdm(jobs, desc="policies", unit="run"):
        pool = make_pool(capacity, admission, eviction, "drop", log_limit=0)
        start = time.perf_counter()
        hits = sum(pool.access(block, now) for block, now in stream)
        seconds = time.perf_counter() - start
        rate = len(stream) / seconds
        baseline = eviction if eviction in result["reference"] else "lru"
        lcs_rate = result["reference"][baseline][label]["refs_per_s"]
        result["policies"].setdefault(f"{admission}+{eviction}", {})[label] = {
            "hit_ratio": hits / len(stream),
            "of_min": hits / len(stream) / result["reference"]["belady"][label]["hit_ratio"],
            "refs_per_s": rate,
            "libcachesim_baseline": baseline,
            "libcachesim_refs_per_s": lcs_rate,
            "speed_ratio": rate / lcs_rate if lcs_rate else None,
        }
    best = {
        label: max(result["policies"], key=lambda name, lab=label: result["policies"][name][lab]["hit_ratio"])
        for label in capacities
    }
    result["best"] = best
    result["replay_speed"] = replay_speed(stream, capacities)
    (out_dir / "policies.json").write_text(json.dumps(result, indent=1))
    (out_dir / "policies.md").write_text(_markdown(result))
    _plot(result, out_dir / "policies.png")
    return result


def _plot(result: dict[str, Any], path: pathlib.Path) -> None:
    """Bar chart of hit ratios per pool size, MIN and LRU drawn as reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(result["capacities"])
    names = list(result["policies"])
    fig, axes = plt.subplots(1, len(labels), figsize=(6 * len(labels), 4.5), sharey=True)
    for ax, label in zip(axes if len(labels) > 1 else [axes], labels, strict=True):
        ratios = [result["policies"][name][label]["hit_ratio"] for name in names]
        ax.barh(names, ratios, color="tab:blue")
        for name, style in (("belady", "k--"), ("lru", "r:")):
            value = result["reference"][name][label]["hit_ratio"]
            ax.axvline(value, linestyle=style[1:], color=style[0], label=f"libCacheSim {name} {value:.3f}")
        ax.set_title(f"pool = {label} of unique blocks ({result['capacities'][label]:,})")
        ax.set_xlabel("block hit ratio")
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("Mooncake conversation trace: online policies vs MIN (offline) and LRU")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _markdown(result: dict[str, Any]) -> str:
    labels = list(result["capacities"])
    ref = result["reference"]
    lines = [
        f"# policies: Mooncake conversation, {result['block_references']:,} block references, "
        f"{result['unique_blocks']:,} unique blocks{' (quick excerpt)' if result['quick'] else ''}",
        "",
        "Pool sizes: " + ", ".join(f"{k} = {v:,} blocks" for k, v in result["capacities"].items()) + ".",
        "",
        "| policy (admission+eviction) | "
        + " | ".join(f"hit {k} | ×MIN {k}" for k in labels)
        + " | refs/s | ×libCacheSim |",
        "|---|" + "---:|" * (2 * len(labels) + 2),
    ]
    for name in ("belady", "lru", "lfu", "s3fifo", "arc"):
        cells = " | ".join(
            f"{ref[name][k]['hit_ratio']:.4f} | {ref[name][k]['hit_ratio'] / ref['belady'][k]['hit_ratio']:.2f}"
            for k in labels
        )
        speed = ref[name][labels[0]]["refs_per_s"]
        lines.append(
            f"| libCacheSim {name}{' (MIN, offline)' if name == 'belady' else ''} | {cells} | "
            f"{speed:,.0f} | 1.00 |"
        )
    for name, runs in result["policies"].items():
        cells = " | ".join(f"{runs[k]['hit_ratio']:.4f} | {runs[k]['of_min']:.2f}" for k in labels)
        first = runs[labels[0]]
        lines.append(
            f"| {name} | {cells} | {first['refs_per_s']:,.0f} | "
            f"{first['speed_ratio']:.2f} (vs {first['libcachesim_baseline']}) |"
        )
    bound = result["class_ttl_bound"]
    lines += [
        "",
        "Best online policy: " + ", ".join(f"{k}: {v}" for k, v in result["best"].items()) + ".",
        "",
        "Best fixed per-class TTL, tuned offline on the true reuse times (class-level knowledge, see "
        "`class_ttl_bound`): "
        + ", ".join(
            f"{k}: {bound[k]:.4f} ({bound[k] / ref['belady'][k]['hit_ratio']:.2f}×MIN)" for k in labels
        )
        + ".",
        "refs/s is our `Pool` at the first size; ×libCacheSim divides it by libCacheSim's `process_trace` rate "
        "for the same eviction policy (LRU where libCacheSim has no counterpart), measured in this run.",
        "",
        _speed_markdown(result["replay_speed"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policies", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("out/bench"))
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK_REQUESTS} requests only")
    parser.add_argument("--speed-only", action="store_true", help="only the LRU replay speed ratio")
    args = parser.parse_args(argv)
    if args.speed_only:
        print(_speed_markdown(run_speed(args.out, args.quick)), end="")
    else:
        run(args.out, args.quick)
        print((args.out / "policies.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
