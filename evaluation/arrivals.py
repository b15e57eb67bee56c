"""How far apart the readers of each shared block start: what a switch mechanism that merges reads must tolerate.

For every block read by at least `min_reads` requests, the reads' start times (the requests' arrival times)
in order; measured over all such blocks:

* the gaps between consecutive reads of a block, and their p50 / p90 / p99;
* for a block of `block_bytes` streamed at a link rate, the share of repeat reads (every read of a block but
  its first) that start while an earlier read's transfer is still running (gap < the block's transfer time):
  readers that overlap in time, which is what makes an incast;
* per sharing mechanism (`evaluation.sharing`), the share of repeat reads it merges with an earlier one and the
  blocks' worth the storage node sends per read of such a block (1.0: no relief).

A read here is a request whose prompt holds the block, whichever tier would serve it: the spread of demand,
before caches. Blocks of one request are taken to start together; a later block of two requests starts as far
apart as their first.
"""

from __future__ import annotations

from collections.abc import Mapping
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

    @property
    def repeat_reads(self) -> int:
        return self.reads - self.blocks

    def as_dict(self) -> dict:
        return {"trace": self.trace, "blocks": self.blocks, "reads": self.reads, "repeat_reads": self.repeat_reads,
                "gap_p50_s": self.gap_p50_s, "gap_p90_s": self.gap_p90_s, "gap_p99_s": self.gap_p99_s,
                "overlap": dict(self.overlap), "merged": dict(self.merged),
                "sends_per_read": dict(self.sends_per_read)}


def read_starts(stream: BlockStream, min_reads: int = 2) -> list[np.ndarray]:
    """Sorted start times of the reads of each block read by at least `min_reads` requests."""
    keys: dict[object, int] = {}
    ids: list[int] = []
    times: list[float] = []
    for now, first, end in stream.request_slices():
        for info in stream.blocks[first:end]:
            ids.append(keys.setdefault(info.key, len(keys)))
            times.append(now)
    if not ids:
        return []
    block = np.asarray(ids)
    at = np.asarray(times, dtype=float)
    order = np.lexsort((at, block))
    block, at = block[order], at[order]
    cuts = np.flatnonzero(np.diff(block)) + 1
    return [group for group in np.split(at, cuts) if group.size >= min_reads]


def measure(name: str, starts: list[np.ndarray], transfers_s: Mapping[str, float],
            mechanisms: Mapping[str, tuple[Sharing, float]]) -> ArrivalSpread:
    """The spread of `starts` (one sorted array per block); `transfers_s`: link label → one block's transfer
    time; `mechanisms`: label → (sharing, the block's transfer time it sees)."""
    reads = sum(int(s.size) for s in starts)
    gaps = np.concatenate([np.diff(s) for s in starts]) if starts else np.empty(0)
    repeat = max(1, gaps.size)

    def pct(q: float) -> float:
        return float(np.percentile(gaps, q)) if gaps.size else 0.0

    overlap = {label: float(np.count_nonzero(gaps < t)) / repeat for label, t in transfers_s.items()}
    merged: dict[str, float] = {}
    sends: dict[str, float] = {}
    for label, (sharing, transfer) in mechanisms.items():
        own = 0
        blocks_sent = 0.0
        for block, times in enumerate(starts):
            shared = SharedReads(sharing, transfer)
            for t in times.tolist():
                cost = shared.read(0, block, t)
                blocks_sent += cost
                own += cost == 1.0
        merged[label] = (reads - own) / repeat
        sends[label] = blocks_sent / max(1, reads)
    return ArrivalSpread(name, len(starts), reads, pct(50), pct(90), pct(99), overlap, merged, sends)


def spread(name: str, stream: BlockStream, transfers_s: Mapping[str, float],
           mechanisms: Mapping[str, tuple[Sharing, float]], min_reads: int = 2) -> ArrivalSpread:
    """`measure` over the blocks of `stream` read by at least `min_reads` requests."""
    return measure(name, read_starts(stream, min_reads), transfers_s, mechanisms)


TESTBED_BLOCK_BYTES = 16 << 20
"""The block of `bench incast` and `bench mooncake_fanout`."""
TESTBED_BYTES_PER_S = 118e6
"""One client's block read rate through the softswitch (docs/status.md): how long a testbed stream lasts."""


def study(streams: Mapping[str, BlockStream], block_bytes: int, links_gbps: tuple[float, ...],
          mechanisms: Mapping[str, Sharing], stream_gbps: float) -> dict:
    """The report's table: every stream's spread, overlap at each link speed for `block_bytes` and for the
    testbed's 16 MiB block at its measured rate, and what each mechanism merges (a `stream-join` stream lasts
    one block at `stream_gbps`)."""
    transfers = {f"{g:g} Gb/s": block_bytes * 8 / (g * 1e9) for g in links_gbps}
    transfers["testbed 16 MiB"] = TESTBED_BLOCK_BYTES / TESTBED_BYTES_PER_S
    stream_s = block_bytes * 8 / (stream_gbps * 1e9)
    priced = {name: (sharing, stream_s) for name, sharing in mechanisms.items()}
    rows = [spread(name, stream, transfers, priced).as_dict() for name, stream in streams.items()]
    return {"block_bytes": block_bytes, "transfer_s": transfers, "stream_gbps": stream_gbps,
            "mechanisms": {name: sharing.label() for name, sharing in mechanisms.items()}, "rows": rows}
