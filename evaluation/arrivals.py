"""How far apart the readers of each shared block start: what a switch mechanism that merges reads must tolerate.

For every block read by at least `min_reads` requests, the reads' start times (the requests' arrival times)
in order; measured over all such blocks:

* the gaps between consecutive reads of a block, and their p50 / p90 / p99;
* for a block of `block_bytes` streamed at a link rate, the share of repeat reads (every read of a block but
  its first) that start while an earlier read's transfer is still running (gap < the block's transfer time):
  readers that overlap in time, which is what makes an incast;
* per sharing mechanism (`evaluation.sharing`), the share of repeat reads it merges with an earlier one and the
  blocks' worth the storage node sends per read of such a block (1.0: no relief);
* the share of repeat reads that start more than `HEAT_WINDOW_S` after the block's first read: at best the reads
  a replica made on heat (Mooncake Store's dynamic replication, whose shortest heat window is 1 s) could take;
  the reads before it all land on the one replica the block had.

A read here is a request whose prompt holds the block, whichever tier would serve it: the spread of demand,
before caches. Blocks of one request are taken to start together; a later block of two requests starts as far
apart as their first.

A trace may stamp arrivals coarsely: Mooncake's conversation trace has about ten requests per timestamp, in
3 s steps. Requests stamped together then look simultaneous, and every mechanism seems to merge them. For such
a trace (`STAMPED` requests or more per distinct timestamp) the study adds rows with each stamp's requests
spread evenly over the step to the next stamp (`spread_stamps`), the other reading of the same data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.sharing import SharedReads, Sharing
from evaluation.stream import BlockStream


@dataclass(frozen=True)
class ArrivalSpread:
    """The arrival spread of one trace's shared blocks."""

    trace: str
    blocks: int
    """Blocks read by at least `min_reads` requests."""
    reads: int
    """Their reads."""
    gap_p50_s: float
    gap_p90_s: float
    gap_p99_s: float
    overlap: dict[str, float]
    """Per link label: share of repeat reads that start within one block transfer of the previous read."""
    merged: dict[str, float]
    """Per mechanism label: share of repeat reads it merges with an earlier one."""
    sends_per_read: dict[str, float]
    """Per mechanism label: blocks' worth the storage node sends per read of these blocks."""
    late_share: float = 0.0
    """Share of repeat reads starting more than `HEAT_WINDOW_S` after their block's first read."""

    @property
    def repeat_reads(self) -> int:
        return self.reads - self.blocks

    def as_dict(self) -> dict:
        return {"trace": self.trace, "blocks": self.blocks, "reads": self.reads, "repeat_reads": self.repeat_reads,
                "gap_p50_s": self.gap_p50_s, "gap_p90_s": self.gap_p90_s, "gap_p99_s": self.gap_p99_s,
                "overlap": dict(self.overlap), "merged": dict(self.merged),
                "sends_per_read": dict(self.sends_per_read), "late_share": self.late_share}


def read_starts(stream: BlockStream, min_reads: int = 2) -> list[np.ndarray]:
    """Sorted start times of the reads of each block read by at least `min_reads` requests."""
    times, first = _flat_starts(stream, min_reads)
    return np.split(times, np.flatnonzero(first)[1:]) if times.size else []


HEAT_WINDOW_S = 1.0
"""Mooncake Store's shortest dynamic-replication heat window (`--dynamic_replication_heat_window_seconds`, whole
seconds): reads of a block before its first read is this old cannot be spread over a replica made on heat."""

STAMPED = 2.0
"""Requests per distinct timestamp from which a trace's stamps are taken to hide its spread."""


def stamps(times: Sequence[float]) -> tuple[float, float]:
    """(requests per distinct timestamp, median step between consecutive distinct timestamps in s)."""
    distinct = np.unique(np.asarray(times, dtype=float))
    if not distinct.size:
        return 0.0, 0.0
    steps = np.diff(distinct)
    return len(times) / distinct.size, float(np.median(steps)) if steps.size else 0.0


def spread_stamps(times: Sequence[float]) -> np.ndarray:
    """Arrival times (in order) with the requests of each timestamp spread evenly over the step to the next
    distinct timestamp (the last stamp's over the median step), in their trace order."""
    at = np.asarray(times, dtype=float)
    distinct, first, counts = np.unique(at, return_index=True, return_counts=True)
    if not at.size:
        return at
    steps = np.diff(distinct)
    step = np.append(steps, np.median(steps) if steps.size else 0.0)
    rank = np.arange(at.size) - np.repeat(first, counts)  # position within its stamp (the trace is in order)
    stamp = np.searchsorted(distinct, at)
    return at + rank * step[stamp] / counts[stamp]


def _flat_starts(stream: BlockStream, min_reads: int,
                 times: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every block's sorted read starts one after another, and where each block's first read is (the requests'
    arrival `times`, default the stream's own)."""
    keys: dict[object, int] = {}
    ids = np.fromiter((keys.setdefault(info.key, len(keys)) for info in stream.blocks), dtype=np.int64,
                      count=len(stream.blocks))
    per_request = np.diff(np.asarray(stream.starts))
    at = np.repeat(np.asarray(stream.times if times is None else times, dtype=float), per_request)
    if not ids.size:
        return np.empty(0), np.empty(0, dtype=bool)
    order = np.lexsort((at, ids))
    ids, at = ids[order], at[order]
    counts = np.bincount(ids)
    keep = counts[ids] >= min_reads
    ids, at = ids[keep], at[keep]
    first = np.ones(ids.size, dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return at, first


def _flatten(starts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if not starts:
        return np.empty(0), np.empty(0, dtype=bool)
    times = np.concatenate(starts)
    first = np.zeros(times.size, dtype=bool)
    first[np.cumsum([0] + [s.size for s in starts[:-1]])] = True
    return times, first


def measure(name: str, starts: list[np.ndarray], transfers_s: Mapping[str, float],
            mechanisms: Mapping[str, tuple[Sharing, float]]) -> ArrivalSpread:
    """The spread of `starts` (one sorted array per block); `transfers_s`: link label → one block's transfer
    time; `mechanisms`: label → (sharing, the block's transfer time it sees)."""
    return _measure(name, *_flatten(starts), transfers_s, mechanisms)


def _measure(name: str, times: np.ndarray, first: np.ndarray, transfers_s: Mapping[str, float],
             mechanisms: Mapping[str, tuple[Sharing, float]]) -> ArrivalSpread:
    reads = int(times.size)
    blocks = int(np.count_nonzero(first))
    gaps = np.diff(times)[~first[1:]] if reads else np.empty(0)
    repeat = max(1, gaps.size)

    def pct(q: float) -> float:
        return float(np.percentile(gaps, q)) if gaps.size else 0.0

    overlap = {label: float(np.count_nonzero(gaps < t)) / repeat for label, t in transfers_s.items()}
    late = 0.0
    if reads:
        block = np.cumsum(first) - 1
        since = times - times[first][block]
        late = float(np.count_nonzero(since[~first] > HEAT_WINDOW_S)) / repeat
    merged: dict[str, float] = {}
    sends: dict[str, float] = {}
    for label, (sharing, transfer) in mechanisms.items():
        own, blocks_sent = _block_sends(times, first, sharing, transfer)
        merged[label] = (reads - own) / repeat
        sends[label] = blocks_sent / max(1, reads)
    return ArrivalSpread(name, blocks, reads, pct(50), pct(90), pct(99), overlap, merged, sends, late)


def block_sends(starts: list[np.ndarray], sharing: Sharing, transfer_s: float) -> tuple[int, float]:
    """(reads that cost a whole block, blocks' worth sent) over every block's sorted read starts; the same as
    feeding them to `SharedReads`, with quicker paths for the mechanisms that merge whole reads only."""
    return _block_sends(*_flatten(starts), sharing, transfer_s)


def _block_sends(times: np.ndarray, first: np.ndarray, sharing: Sharing, transfer_s: float) -> tuple[int, float]:
    if sharing.mechanism == "incast-window":
        windows = np.floor_divide(times, sharing.incast_window_s)
        new = first.copy()
        new[1:] |= windows[1:] != windows[:-1]
        streams = int(np.count_nonzero(new))
        return streams, float(streams)
    own = 0
    if sharing.mechanism == "round-trip":
        window = sharing.round_trip_s
        lead = 0.0
        for t, starts_block in zip(times.tolist(), first.tolist(), strict=True):
            if starts_block or t - lead >= window:
                lead = t
                own += 1
        return own, float(own)
    sent = 0.0
    shared = SharedReads(sharing, transfer_s)
    block = -1
    for t, starts_block in zip(times.tolist(), first.tolist(), strict=True):
        block += starts_block
        cost = shared.read(0, block, t)
        sent += cost
        own += cost == 1.0
    return own, sent


def spread(name: str, stream: BlockStream, transfers_s: Mapping[str, float],
           mechanisms: Mapping[str, tuple[Sharing, float]], min_reads: int = 2,
           times: np.ndarray | None = None) -> ArrivalSpread:
    """`measure` over the blocks of `stream` read by at least `min_reads` requests (arriving at `times`,
    default the stream's own)."""
    return _measure(name, *_flat_starts(stream, min_reads, times), transfers_s, mechanisms)


TESTBED_BLOCK_BYTES = 16 << 20
"""The block of `bench incast` and `bench mooncake_fanout`."""
TESTBED_BYTES_PER_S = 118e6
"""One client's block read rate through the softswitch (docs/status.md): how long a testbed stream lasts."""


HOT_READS = 8
"""A block read this often is a hot one: the incast a switch is meant to relieve (the benchmarks' smallest N)."""


def study(streams: Mapping[str, BlockStream], block_bytes: int, links_gbps: tuple[float, ...],
          mechanisms: Mapping[str, Sharing], stream_gbps: float, min_reads: tuple[int, ...] = (2, HOT_READS)) -> dict:
    """The report's table: every stream's spread over the blocks read at least `min_reads` times (a row per
    threshold), overlap at each link speed for `block_bytes` and for the testbed's 16 MiB block at its measured
    rate, and what each mechanism merges (a `stream-join` stream's pass lasts one block at `stream_gbps`)."""
    transfers = {f"{g:g} Gb/s": block_bytes * 8 / (g * 1e9) for g in links_gbps}
    transfers["testbed 16 MiB"] = TESTBED_BLOCK_BYTES / TESTBED_BYTES_PER_S
    stream_s = block_bytes * 8 / (stream_gbps * 1e9)
    priced = {name: (sharing, stream_s) for name, sharing in mechanisms.items()}
    rows = []
    for name, stream in streams.items():
        per_stamp, step = stamps(stream.times)
        readings: list[tuple[str, np.ndarray | None]] = [(name, None)]
        if per_stamp >= STAMPED:
            readings.append((f"{name}, stamps spread over {step:g} s", spread_stamps(stream.times)))
        for label, times in readings:
            for least in min_reads:
                row = spread(label, stream, transfers, priced, least, times).as_dict()
                rows.append({**row, "min_reads": least, "requests_per_stamp": per_stamp, "stamp_step_s": step})
    return {"block_bytes": block_bytes, "transfer_s": transfers, "stream_gbps": stream_gbps,
            "mechanisms": {name: sharing.label() for name, sharing in mechanisms.items()}, "rows": rows}
