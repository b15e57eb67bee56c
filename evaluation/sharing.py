"""Which reads of one block a switch mechanism can merge into one send from the storage node, and at what cost.

A switch relieves an N-to-1 incast only for readers whose reads it can merge, and which those are depends on
the mechanism, not on a window the evaluator picks:

* `stream-join` (the data plane as built, the default; docs/dataplane.md, "Stream join"): the first reader
  whose GET of a block leaves the switch towards the block's storage node is the ORIGIN of the block's stream;
  a later reader of the block, while that stream lives (the origin reads the block: `transfer_s`), becomes a
  SUBSCRIBER, at most `max_subscribers` (64) per stream: every later chunk reply to the origin is copied to it,
  and it misses the part of the block before its join point, `d / transfer_s` for a reader `d` after the
  origin. The missed parts nest (the last joiner's holds every other's), so the stream's PATCH PASS, after the
  first, sends the longest of them once for all (`patch_pass`, as built): a subscriber costs the node only
  what its missed part adds to the longest so far. A reader that arrives during the patch pass joins at the
  block's end (it missed all of it): the patch pass then covers the whole block, and the reader fetches itself
  what the patch pass had sent before it came. Without `patch_pass` (the readers' `immediate_patch`) every
  subscriber fetches its own missed part at once, which coalesces only as below. A reader beyond the bound is
  forwarded as today (a whole block of its own); a reader after the stream ended starts the next one.
* `round-trip` (request coalescing only, docs/dataplane.md, "What it takes for readers to share a GET"): a
  reader's GET for a chunk joins a pending entry only while the first reader's GET for that chunk waits for
  the storage node's reply, one storage round trip. Readers that start a block within `round_trip_s` of the
  first share its sends; a later reader costs the node a whole block of its own. The default, 4 ms, is the
  round trip measured on the softswitch bed (`bench incast`); hardware switches have microseconds.
* `incast-window`: every read of a block from one node in the same aligned `incast_window_s` window merges
  into one send, whatever their distance. What the evaluator used to credit; kept as the upper bound that no
  built mechanism reaches.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

MECHANISMS = ("stream-join", "round-trip", "incast-window")
"""The built mechanism first (the default), then coalescing alone, then the upper bound."""
ROUND_TRIP_S = 0.004
"""One storage round trip per chunk on the softswitch bed, the pending entry's lifetime in effect."""
STREAM_SUBSCRIBERS = 64
"""Subscribers one stream takes at most, as the data plane bounds them (docs/dataplane.md, "Stream join")."""


@dataclass(frozen=True)
class Sharing:
    """A switch mechanism that merges reads of one block from one storage node."""

    mechanism: str = "stream-join"
    round_trip_s: float = ROUND_TRIP_S
    """How long a first reader's GET for a chunk stays pending (`round-trip`, and patch GETs of `stream-join`)."""
    incast_window_s: float = 1.0
    """The aligned window of `incast-window`."""
    max_subscribers: int = STREAM_SUBSCRIBERS
    """Subscribers per stream (`stream-join`); a reader beyond them reads the whole block itself."""
    patch_pass: bool = True
    """`stream-join`: the late subscribers' missed parts are sent once for all in the stream's patch pass (as
    built); False: each fetches its own at once (the readers' `immediate_patch`)."""

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"unknown sharing mechanism {self.mechanism!r}; known: {', '.join(MECHANISMS)}")
        if self.round_trip_s < 0 or self.incast_window_s <= 0 or self.max_subscribers < 0:
            raise ValueError("sharing: round_trip_s >= 0, incast_window_s > 0 and max_subscribers >= 0")

    def label(self) -> str:
        if self.mechanism == "round-trip":
            return f"round-trip ({1000 * self.round_trip_s:g} ms, coalescing only)"
        if self.mechanism == "incast-window":
            return f"incast-window ({self.incast_window_s:g} s, upper bound)"
        if not self.patch_pass:
            return f"stream-join (≤{self.max_subscribers} subscribers, immediate patches)"
        return f"stream-join (≤{self.max_subscribers} subscribers, patch pass, as built)"


@dataclass
class _Block:
    """What one storage node has pending and streaming for one block."""

    stream_start: float | None = None
    """When the newest stream of the whole block (`stream-join`) or the newest aligned window started."""
    subscribers: int = 0
    """Readers that joined the newest stream (`stream-join`)."""
    join_max: float = 0.0
    """The newest stream's highest join point, as a share of the block: what its patch pass sends."""
    pending: list[tuple[float, float, float]] = field(default_factory=list)
    """(sent at, first, end) of chunk ranges whose GETs went to the node, as shares of the block."""


@dataclass
class SharedReads:
    """Reads of blocks from storage nodes, fed in time order; prices each under one mechanism.

    Chunks are positions in [0, 1) of the block. A reader GETs a range of chunks (the whole block, or the part
    a stream join missed); a GET for a chunk merges with one for the same chunk sent less than one round trip
    before, as a reader that starts later by d asks for every chunk d later (readers fetch at one rate).
    """

    sharing: Sharing
    transfer_s: float
    """How long a `stream-join` stream lives: its origin's read of the block (one block at the link rate)."""
    _blocks: dict[Hashable, _Block] = field(default_factory=dict)

    def read(self, node: Hashable, key: Hashable, at_s: float) -> float:
        """Blocks' worth `node` sends for this read of `key` starting at `at_s` (1.0: every chunk its own)."""
        block = self._blocks.setdefault((node, key), _Block())
        sharing = self.sharing
        if sharing.mechanism == "incast-window":
            window = at_s // sharing.incast_window_s
            if block.stream_start is not None and block.stream_start // sharing.incast_window_s == window:
                return 0.0
            block.stream_start = at_s
            return 1.0
        need = 1.0
        elapsed = at_s - block.stream_start if block.stream_start is not None else float("inf")
        first_pass = elapsed < self.transfer_s
        patching = sharing.patch_pass and not first_pass and elapsed < self.transfer_s * (1 + block.join_max)
        live = first_pass or patching
        if sharing.mechanism == "stream-join" and live and block.subscribers < sharing.max_subscribers:
            block.subscribers += 1
            if sharing.patch_pass:
                block.pending = [p for p in block.pending if at_s - p[0] < sharing.round_trip_s]
                return self._patch_pass_cost(block, elapsed)
            need = elapsed / self.transfer_s  # a subscriber: the stream brings the rest
        elif sharing.mechanism != "stream-join" or not live:
            block.stream_start, block.subscribers, block.join_max = at_s, 0, 0.0  # the origin of a new stream
        # else: the stream is full: this reader is forwarded as today and reads the whole block
        block.pending = [p for p in block.pending if at_s - p[0] < sharing.round_trip_s]
        own = _uncovered(need, [(lo, hi) for _, lo, hi in block.pending])
        block.pending += [(at_s, lo, hi) for lo, hi in own]
        return sum(hi - lo for lo, hi in own)

    def _patch_pass_cost(self, block: _Block, elapsed: float) -> float:
        """A subscriber `elapsed` after its stream began: in the first pass, what its missed part adds to the
        patch pass (chunks whose GETs are still pending within a round trip it does not miss: coalescing parks
        its GETs on them); in the patch pass, the rest of the block past what the patch pass sends already, and
        what the patch pass had sent before it came (it fetches that itself)."""
        if elapsed < self.transfer_s:
            missed = _uncovered(elapsed / self.transfer_s, [(lo, hi) for _, lo, hi in block.pending])
            added = sum(max(0.0, hi - max(lo, block.join_max)) for lo, hi in missed)
            block.join_max = max([block.join_max] + [hi for _, hi in missed])
            return added
        patch_front = (elapsed - self.transfer_s) / self.transfer_s
        added = 1.0 - block.join_max
        block.join_max = 1.0
        return added + patch_front


def _uncovered(end: float, covered: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of [0, end) outside every range of `covered`."""
    gaps = []
    at = 0.0
    for lo, hi in sorted(covered):
        if lo > at:
            gaps.append((at, min(lo, end)))
        at = max(at, hi)
        if at >= end:
            break
    if at < end:
        gaps.append((at, end))
    return [(lo, hi) for lo, hi in gaps if hi > lo]


def sends_for(starts: Sequence[float], sharing: Sharing, transfer_s: float) -> float:
    """Blocks' worth one storage node sends for reads of one block starting at `starts` (any order)."""
    reads = SharedReads(sharing, transfer_s)
    return sum(reads.read(0, 0, t) for t in sorted(starts))
