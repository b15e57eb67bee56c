"""Model against testbed: what the evaluator predicts for the N-reader rows the benchmarks measure.

A row is N readers of one cold block whose starts spread over `spread_s` (evenly, as `bench mooncake_fanout`
releases them; `bench incast`'s spread table at each reader's measured start). The model, the one the report
prices with (`evaluation.sharing`):

* the storage node holding the block sends, per read, what the switch's sharing mechanism leaves it (no switch
  function, or Mooncake Store reading one replica: a whole block per read). Under the stream join as built a
  stream makes passes over the block: the first pass sends the whole block, its patch pass the longest part a
  late member missed (J), so 1 + J / count blocks for all its members; a reader arriving during the patch pass
  makes it cover the whole block and the part the patch pass had sent before it came is sent once more, once for
  all such readers (`SharedReads`);
* where J lands depends on how fast the stream moves: at a lone reader's pace at best, and, behind a software
  switch that copies each pushed reply to every member, no faster than the switch delivers: with m members,
  min(lone pace, delivery(m) / m) blocks/s. A stream of 16 members behind the Python switch moves at about a
  seventh of a lone reader's pace, so it lives for seconds and readers 500 ms apart all join its first pass,
  where a stream at the lone pace would have ended and a second one opened;
* a stream's member finishes when the pass after the one it joined reaches its join point; readers of their
  own (no merging) share the node's rate fairly (processor sharing), none faster than one lone reader on the
  same bed (block bytes / the lone reader's block time, measured by the benchmark itself).

The rates are fitted on other rows of the same run (`BedRate`: blocks/s in all with m readers active, through
N blocks / p99 of the narrowest row of each N, marked *fitted*): the node's on the rows without merging (no
switch function for the pool's bed, with a lone reader's rate at m = 1; each Mooncake system for its own bed),
the switch's delivery on the narrowest stream-join rows (all N readers in one stream from the start). Every other
row is predicted from them; a fitted row's p99 is exact by construction, its bytes are not fitted.

`bench incast`'s spread table (its JSON's `spread` part: no switch function, kvswitch, Mooncake off / on at
starts spread 0 / 50 ms / 500 ms / a lone block time) is the model's main check.

Reported per row: predicted and measured bytes the busiest storage node sent per block read, and p99
completion, with the error of each.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from evaluation.sharing import SharedReads, Sharing


def starts_over(readers: int, spread_s: float) -> list[float]:
    """Reader i starts at i × spread / (N - 1)."""
    return [spread_s * i / (readers - 1) if readers > 1 else 0.0 for i in range(readers)]


@dataclass(frozen=True)
class BedRate:
    """Blocks/s a bed delivers in all with m readers active, fitted on measured rows: piecewise linear through
    (N, N blocks / the row's p99) of the rows it was fitted on, flat beyond the first and the last.

    On a bed of two shared cores N reader processes together get more than one lone reader does, and less per
    reader the more of them there are, so one rate per N, not one per bed. A stream's delivery curve is flat
    below the smallest fitted N (it has no point at m = 1): a stream of 2-4 members behind the Python switch
    keeps a lone reader's pace (the cap; measured: N = 8 at 500 ms, MTU 9000, the origin read the block in
    0.25 s with 4 members by then, a lone reader in 0.21 s), so the switch delivers more with a few members than
    with 8."""

    points: tuple[tuple[int, float], ...]

    def __call__(self, active: int) -> float:
        xs, ys = zip(*sorted(self.points), strict=True)
        return float(np.interp(active, xs, ys))


def processor_sharing(starts: list[float], sizes: list[float], rate: float | Callable[[int], float],
                      cap: float | None = None) -> list[float]:
    """Finish time of each job (start, size in blocks) when `rate` blocks/s (or `rate(active jobs)`) is shared
    equally by the active, none faster than `cap` blocks/s."""
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
        total = rate(len(active)) if callable(rate) else rate
        share = total / len(active) if cap is None else min(cap, total / len(active))
        first_done = min(left[j] for j in active) / share
        step = min(first_done, starts[pending[0]] - now) if pending else first_done
        for j in active:
            left[j] -= share * step
        now += step
        for j in [j for j in active if left[j] <= 1e-12]:
            finish[j] = now
            active.remove(j)
    return finish


def predict(readers: int | list[float], spread_s: float, lone_s: float, sharing: Sharing | None,
            node_blocks_per_s: float | Callable[[int], float] | None = None,
            delivery: Callable[[int], float] | None = None) -> dict:
    """Busiest node's blocks per read and p50 / p99 completion for one row (`sharing` None: no merging).

    `readers`: how many, starting evenly over `spread_s`, or their start times. The node sends
    `node_blocks_per_s` (a rate, or a rate per active reader count; default: a lone reader's rate) shared by
    the reads it serves, none faster than a lone reader. A `stream-join` member finishes when its stream
    brought it the block (`SharedReads.finish_times`), the stream moving at min(lone pace, delivery(m) / m)
    with m members (`delivery`: the switch's blocks/s in all to a stream's members; None: the lone pace)."""
    starts = sorted(readers) if isinstance(readers, list) else starts_over(readers, spread_s)
    rate = node_blocks_per_s or 1.0 / lone_s
    shared = SharedReads(sharing, lone_s, delivery, timed=True) if sharing is not None else None
    costs = [1.0 if shared is None else shared.read(0, 0, t) for t in starts]
    streamed = shared.finish_times() if shared is not None else [None] * len(starts)
    own = [i for i, end in enumerate(streamed) if end is None]
    finish = processor_sharing([starts[i] for i in own], [costs[i] for i in own], rate, 1.0 / lone_s)
    ends = dict(zip(own, finish, strict=True))
    done = []
    stream_end = 0.0
    for i, (cost, start) in enumerate(zip(costs, starts, strict=True)):
        end = streamed[i]
        if end is None:
            end = ends[i]
            if cost >= 1.0 - 1e-9:
                stream_end = end  # a read of the whole block: later readers coalescing merged end with it
            end = max(end, stream_end)
        done.append(end - start)
    return {"busiest_blocks_per_read": sum(costs) / len(starts), "p50_s": float(np.percentile(done, 50)),
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
    """`bench incast`'s spread table against the model: each system with its own lone block time and mechanism,
    each row at its readers' measured starts (as planned if not recorded).

    Rates fitted per bed and MTU on the narrowest row of each N (`BedRate`; those rows are marked fitted, every
    other row is predicted from them, never from its own measurement): the node's on the rows without merging
    (no switch function for the pool's bed, each Mooncake system for its own), and for the stream join the
    switch's delivery to a stream's members on the narrowest stream-join rows (all readers in one stream from
    the start: N blocks delivered by its p99)."""
    rows_in = spread.get("rows", [])
    lone = spread.get("lone_block_time_s", {})

    def curve_of(r: dict) -> tuple[str, int]:
        """Which fitted rate a row is priced with, and fits: the node's without merging, or the stream's."""
        sharing = _system_sharing(r["system"], built)
        if sharing is not None and sharing.mechanism == "stream-join":
            return ("stream " + r["system"].removesuffix(IMMEDIATE_PATCHES), r.get("mtu", 0))
        return ("pool" if not r["system"].startswith("Mooncake") else r["system"], r.get("mtu", 0))

    def fits_curve(r: dict) -> bool:
        sharing = _system_sharing(r["system"], built)
        return sharing is None or (sharing.mechanism == "stream-join" and sharing.patch_pass)

    fits: dict[tuple[str, int, int], dict] = {}
    for r in rows_in:
        if r["readers"] >= 2 and fits_curve(r) and r.get("p99_s", 0) > 0:
            key = (*curve_of(r), r["readers"])
            if key not in fits or r["spread_s"] < fits[key]["spread_s"]:
                fits[key] = r
    curves: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for (name, mtu, n), r in sorted(fits.items()):
        curves.setdefault((name, mtu), []).append((n, n / r["p99_s"]))
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
        sharing = _system_sharing(r["system"], built)
        name, mtu = curve_of(r)
        points = curves.get((name, mtu)) or curves.get(("pool", mtu))
        stream = sharing is not None and sharing.mechanism == "stream-join"
        if points and not stream:
            points = [(1, 1.0 / lone_s), *points]  # one reader of its own: a lone reader's rate (the N = 1 row)
        rate = BedRate(tuple(points)) if points else None
        p = predict(_starts(r), r["spread_s"], lone_s, sharing, None if stream else rate, rate if stream else None)
        out.append({"bench": "incast spread", "setup": r["system"] + (f", MTU {r['mtu']}" if "mtu" in r else ""),
                    "readers": r["readers"], "spread": r["spread_label"], "busiest_predicted":
                    p["busiest_blocks_per_read"], "busiest_measured": r["busiest_blocks_per_read"],
                    "p99_predicted_s": p["p99_s"], "p99_measured_s": r["p99_s"],
                    "fitted": r is fits.get((name, mtu, r["readers"]))})
    return out


def _starts(r: dict) -> list[float] | int:
    """A row's readers' measured start times, from the first (their count if not recorded)."""
    starts = [p["start_s"] for p in r.get("per_reader", []) if isinstance(p.get("start_s"), int | float)]
    if len(starts) != r["readers"]:
        return int(r["readers"])
    first = min(starts)
    return [t - first for t in starts]


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
