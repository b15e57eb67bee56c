"""Model against testbed: what the evaluator predicts for the N-reader rows the benchmarks measure.

A row is N readers of one cold block whose starts spread over `spread_s` (evenly, as `bench mooncake_fanout`
releases them; `bench incast`'s measured start spread otherwise). The model, the one the report prices with:

* the storage node holding the block sends, per read, what the switch's sharing mechanism leaves it
  (`evaluation.sharing`; no switch function, or Mooncake Store reading one replica: a whole block per read);
* the node's sends share its rate fairly (processor sharing), no stream faster than one lone reader on the same
  bed (block bytes / the lone reader's block time, measured by the benchmark itself); the node's rate is
  fitted on one row per set-up and N (the narrowest spread, no merging: N blocks / its p99), since on a bed
  of two shared cores N reader processes together get more than one lone reader does, and less per reader the
  more of them there are; a reader the switch merged ends when the stream it joined ends;
* a stream join's stream lives while its origin reads the block, and the origin reads slower when other
  readers' patches share the node: the stream's life is the origin's predicted read time (a fixed point from
  the lone block time).

`bench incast`'s spread table (its JSON's `spread` part: no switch function, kvswitch, Mooncake off / on at
starts spread 0 / 50 ms / 500 ms / a lone block time) is the model's main check; the node's rate for the kvswitch
rows is fitted on the same N's no-switch-function row at spread 0 (same bed, no merging).

Reported per row: predicted and measured bytes the busiest storage node sent per block read, and p99
completion, with the error of each.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from evaluation.sharing import SharedReads, Sharing


def starts_over(readers: int, spread_s: float) -> list[float]:
    """Reader i starts at i × spread / (N - 1)."""
    return [spread_s * i / (readers - 1) if readers > 1 else 0.0 for i in range(readers)]


def processor_sharing(starts: list[float], sizes: list[float], rate: float, cap: float | None = None) -> list[float]:
    """Finish time of each job (start, size in blocks) when `rate` blocks/s is shared equally by the active,
    none faster than `cap` blocks/s."""
    order = sorted(range(len(starts)), key=lambda i: starts[i])
    left = {i: sizes[i] for i in order}
    finish = [0.0] * len(starts)
    active: list[int] = []
    now = starts[order[0]] if order else 0.0
    pending = list(order)
    while pending or active:
        while pending and starts[pending[0]] <= now + 1e-12:
            job = pending.pop(0)
            if left[job] <= 0:
                finish[job] = starts[job]
            else:
                active.append(job)
        if not active:
            now = starts[pending[0]]
            continue
        share = rate / len(active) if cap is None else min(cap, rate / len(active))
        first_done = min(left[j] for j in active) / share
        step = min(first_done, starts[pending[0]] - now) if pending else first_done
        for j in active:
            left[j] -= share * step
        now += step
        for j in [j for j in active if left[j] <= 1e-12]:
            finish[j] = now
            active.remove(j)
    return finish


STREAM_LIFE_ROUNDS = 6
"""Fixed-point rounds for a stream's life (the origin's read time under the row's load)."""


def predict(readers: int, spread_s: float, lone_s: float, sharing: Sharing | None,
            node_blocks_per_s: float | None = None) -> dict:
    """Busiest node's blocks per read and p50 / p99 completion for one row (`sharing` None: no merging);
    the node sends `node_blocks_per_s` (default: a lone reader's rate), no stream faster than a lone reader."""
    starts = starts_over(readers, spread_s)
    rate = node_blocks_per_s or 1.0 / lone_s
    costs = [1.0] * readers
    finish = processor_sharing(starts, costs, rate, 1.0 / lone_s)
    if sharing is not None:
        life = lone_s
        for _ in range(STREAM_LIFE_ROUNDS):
            shared = SharedReads(sharing, life)
            costs = [shared.read(0, 0, t) for t in starts]
            finish = processor_sharing(starts, costs, rate, 1.0 / lone_s)
            if sharing.mechanism != "stream-join":
                break
            life = max(lone_s, finish[0] - starts[0])  # the first reader is the first stream's origin
    done = []
    stream_end = 0.0
    for cost, start, end in zip(costs, starts, finish, strict=True):
        if cost >= 1.0 - 1e-9:
            stream_end = end  # a stream of the whole block: later merged readers end with it
        done.append(max(end, stream_end) - start)
    return {"busiest_blocks_per_read": sum(costs) / readers, "p50_s": float(np.percentile(done, 50)),
            "p99_s": float(np.percentile(done, 99))}


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured else float("inf")


def fit_row(rows: list[dict]) -> dict | None:
    """The row the node's rate is fitted on: the narrowest spread (`spread_s`)."""
    return min(rows, key=lambda r: r["spread_s"]) if rows else None


def fitted_rate(row: dict | None, p99_s: float) -> float | None:
    """Blocks/s of the node that sends `row`'s N blocks by its p99."""
    return row["readers"] / p99_s if row is not None and p99_s > 0 else None


def mooncake_rows(result: dict) -> list[dict]:
    """`bench mooncake_fanout`'s rows against the model (one replica serves every read, as measured)."""
    rows = []
    fits = {(r["replication"], r["readers"]): fit_row([q for q in result["rows"] if q["replication"] == r["replication"]
                                                       and q["readers"] == r["readers"]]) for r in result["rows"]}
    rates = {key: fitted_rate(row, row["p99_s"]) if row else None for key, row in fits.items()}
    for r in result["rows"]:
        lone = result["lone_block_time_s"][r["replication"]]
        p = predict(r["readers"], r["spread_s"], lone, None, rates[r["replication"], r["readers"]])
        rows.append({"bench": "mooncake_fanout", "setup": f"Mooncake, dynamic replication {r['replication']}",
                     "readers": r["readers"], "spread": r["spread_label"],
                     "busiest_predicted": p["busiest_blocks_per_read"],
                     "busiest_measured": r["busiest_blocks_per_read"], "p99_predicted_s": p["p99_s"],
                     "p99_measured_s": r["p99_s"], "fitted": r is fits[r["replication"], r["readers"]]})
    return rows


def incast_rows(result: dict, sharing: Sharing) -> list[dict]:
    """`bench incast`'s rows against the model: coalescing off (a block per read) and on (`sharing`), each at
    the row's measured start spread; the lone block time is the N = 1 row's p50 at that block size."""
    rows = []
    lone = {r["block_mib"]: r["completion_s"]["p50"] for r in result["rows"] if r["readers"] == 1}

    def spread_of(r: dict) -> float:
        spread = r.get("start_spread_ms", 0.0) / 1000
        return 0.0 if spread != spread else spread  # NaN: no start times recorded

    fits = {(r["block_mib"], r["readers"]): fit_row([{**q, "spread_s": spread_of(q)} for q in result["rows"]
                                                     if q["block_mib"] == r["block_mib"] and q["readers"] == r["readers"]
                                                     and q["coalescing"] == "off" and not q.get("loss_percent", 0)])
            for r in result["rows"]}
    rates = {key: fitted_rate(row, row["completion_s"]["p99"]) if row else None for key, row in fits.items()}
    for r in result["rows"]:
        if r["readers"] < 2 or r["block_mib"] not in lone or r.get("loss_percent", 0):
            continue
        spread = spread_of(r)
        on = r["coalescing"] == "on"
        key = (r["block_mib"], r["readers"])
        p = predict(r["readers"], spread, lone[r["block_mib"]], sharing if on else None, rates[key])
        rows.append({"bench": "incast", "setup": f"kvswitch {r['reader_mode']}, coalescing {r['coalescing']}, "
                     f"{r['block_mib']} MiB", "readers": r["readers"], "spread": f"{1000 * spread:.0f} ms (measured)",
                     "busiest_predicted": p["busiest_blocks_per_read"],
                     "busiest_measured": r["storage_gets_per_chunk"] / r["readers"],
                     "p99_predicted_s": p["p99_s"], "p99_measured_s": r["completion_s"]["p99"],
                     "fitted": fits[key] is not None and {**r, "spread_s": spread} == fits[key]})
    return rows


IMMEDIATE_PATCHES = ", immediate patches"
"""How `bench incast`'s spread table names a kvswitch row whose readers patch at once (no patch pass)."""


def _system_sharing(system: str, built: Sharing) -> Sharing | None:
    """The mechanism of a spread-table system: stream join where the row had it (with its patch pass unless the
    readers patched at once), coalescing alone, or none."""
    if not system.startswith("kvswitch"):
        return None  # no switch function; Mooncake reads one replica
    if "stream" in system:
        join = built if built.mechanism == "stream-join" else Sharing("stream-join", built.round_trip_s)
        return replace(join, patch_pass=not system.endswith(IMMEDIATE_PATCHES))
    return Sharing("round-trip", built.round_trip_s)


def spread_rows(spread: dict, built: Sharing) -> list[dict]:
    """`bench incast`'s spread table against the model: each system with its own lone block time and mechanism;
    the node's rate fitted per (system's bed, MTU, N) on the narrowest row without merging."""
    rows_in = spread.get("rows", [])
    lone = spread.get("lone_block_time_s", {})

    def bed_of(r: dict) -> tuple[str, int, int]:
        pool = not r["system"].startswith("Mooncake")
        return ("pool" if pool else r["system"], r.get("mtu", 0), r["readers"])

    fits: dict[tuple[str, int, int], dict | None] = {}
    for r in rows_in:
        if _system_sharing(r["system"], built) is None:
            key = bed_of(r)
            best = fits.get(key)
            if best is None or r["spread_s"] < best["spread_s"]:
                fits[key] = r
    out = []
    for r in rows_in:
        if r["readers"] < 2:
            continue
        system = r["system"].removesuffix(IMMEDIATE_PATCHES)  # the same bed and switch: the same lone reader
        lone_s = lone.get(f"{system}, MTU {r.get('mtu')}", lone.get(system))
        if lone_s is None:
            lone_s = next((v for k, v in lone.items() if k.startswith("no switch function")), None)
        if not lone_s:
            continue
        fit = fits.get(bed_of(r))
        rate = fitted_rate(fit, fit["p99_s"]) if fit is not None else None
        sharing = _system_sharing(r["system"], built)
        p = predict(r["readers"], r["spread_s"], lone_s, sharing, rate)
        out.append({"bench": "incast spread", "setup": r["system"] + (f", MTU {r['mtu']}" if "mtu" in r else ""),
                    "readers": r["readers"], "spread": r["spread_label"], "busiest_predicted":
                    p["busiest_blocks_per_read"], "busiest_measured": r["busiest_blocks_per_read"],
                    "p99_predicted_s": p["p99_s"], "p99_measured_s": r["p99_s"], "fitted": r is fit})
    return out


def compare(bench_dir: Path, sharing: Sharing) -> dict | None:
    """The model-versus-testbed rows of whatever benchmark results `bench_dir` holds (None: none)."""
    rows: list[dict] = []
    mooncake = bench_dir / "mooncake_fanout.json"
    if mooncake.is_file():
        rows += mooncake_rows(json.loads(mooncake.read_text()))
    incast = bench_dir / "incast.json"
    if incast.is_file():
        data = json.loads(incast.read_text())
        if isinstance(data, dict) and isinstance(data.get("spread"), dict):
            rows += spread_rows(data["spread"], sharing)
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            rows += incast_rows(data, Sharing("round-trip", sharing.round_trip_s))  # the study: coalescing only
    for r in rows:
        r["busiest_error"] = _error(r["busiest_predicted"], r["busiest_measured"])
        r["p99_error"] = _error(r["p99_predicted_s"], r["p99_measured_s"])
    return {"bench_dir": str(bench_dir), "sharing": sharing.label(), "rows": rows} if rows else None
