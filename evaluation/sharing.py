"""Which reads of one block a switch mechanism can merge into one send from the storage node, and at what cost.

A switch relieves an N-to-1 incast only for readers whose reads it can merge, and which those are depends on
the mechanism, not on a window the evaluator picks:

* `stream-join` (the data plane as built, the default; docs/dataplane.md, "Stream join"): the first reader
  whose GET of a block leaves the switch towards the block's storage node is the ORIGIN of the block's stream;
  a later reader of the block, while that stream lives, becomes a SUBSCRIBER, at most `max_subscribers` (64)
  per stream: every later chunk reply is copied to it, and it misses the part of the block before the stream's
  front when it joined. The stream moves at a lone reader's pace (one block per `transfer_s`) at best, and no
  faster than the switch copies its replies to its members (`SharedReads.delivery`): a software switch slows a
  stream as members join, so it lives longer and later readers still find it. The missed parts nest (the last
  joiner's holds every other's), so the stream's PATCH PASS, after the first, sends the longest of them (J)
  once for all (`patch_pass`, as built): a subscriber costs the node only what its missed part adds to the
  longest so far, and the stream 1 + J / count blocks in all. A reader that arrives during the patch pass
  joins at the block's end (it missed all of it): the patch pass then covers the whole block, and what the
  patch pass had sent before such readers came is sent once more, once for all of them (their missed parts
  nest too; in the data plane they fetch them together when the patch pass ended, as the next stream). Without
  `patch_pass` (the readers' `immediate_patch`) every subscriber fetches its own missed part at once, which
  coalesces only as below. A reader beyond the bound is forwarded as today (a whole block of its own); a
  reader after the stream ended starts the next one.
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

from collections.abc import Callable, Hashable, Sequence
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
class _Stream:
    """One stream of a block (`stream-join`): its passes over the block, its members, and how far it got.

    Pass 0 (the first pass) covers the whole block; a member that joined pass k with that pass's front at p
    missed [0, p), which pass k + 1 covers (the patch pass after the first; in the data plane a pass after the
    patch pass is the next stream those members open when they GET what they missed, and its own members
    join it the same way). A member joining pass k ≥ 1 joins at the block's end (the first pass's front is the
    chunk count): pass k then covers the whole block (it gets the rest from it) and pass k + 1 what it missed.
    """

    at: float
    """The time the stream's progress was computed up to."""
    reach: list[float]
    """How far each pass goes, as a share of the block: what the node sends for it (pass 0: the whole block)."""
    members: int = 1
    """The origin and its subscribers: every pushed reply is copied to each of them."""
    current: int = 0
    """The pass under way (`len(reach)`: the stream ended)."""
    front: float = 0.0
    """How far the current pass is, as a share of the block."""
    trail: list[tuple[int, float, float, float]] = field(default_factory=list)
    """(pass, from time, its front then, pace in blocks/s): the passes' progress, for when members finish."""

    @property
    def ended(self) -> bool:
        return self.current >= len(self.reach)


@dataclass
class _Block:
    """What one storage node has pending and streaming for one block."""

    window_start: float | None = None
    """When the newest aligned window started (`incast-window`)."""
    stream: _Stream | None = None
    """The newest stream of the whole block (`stream-join`)."""
    pending: list[tuple[float, float, float]] = field(default_factory=list)
    """(sent at, first, end) of chunk ranges whose GETs went to the node, as shares of the block."""


@dataclass
class SharedReads:
    """Reads of blocks from storage nodes, fed in time order; prices each under one mechanism.

    Chunks are positions in [0, 1) of the block. A reader GETs a range of chunks (the whole block, or the part
    a stream join missed); a GET for a chunk merges with one for the same chunk sent less than one round trip
    before, as a reader that starts later by d asks for every chunk d later (readers fetch at one rate).

    A `stream-join` stream moves at most at a lone reader's pace (one block per `transfer_s`), and no faster than
    the switch copies its pushed replies: with m members a pass moves at min(1 / transfer_s, delivery(m) / m)
    blocks/s, `delivery(m)` the blocks/s the switch delivers in all to a stream's m members (None: at line rate,
    as a hardware switch replicates; a software switch copies each reply m times, so its streams slow down as
    members join, and live longer, so more late readers find them live).
    """

    sharing: Sharing
    transfer_s: float
    """A lone reader's read of the block: one block at the link rate, the fastest a stream moves."""
    delivery: Callable[[int], float] | None = None
    """Blocks/s the switch delivers in all to a stream of m members (None: a stream moves at the lone pace)."""
    timed: bool = False
    """Keep every read's stream and join point for `finish_times` (the testbed model's few readers; a cluster
    replay's many reads need only their costs, and would keep every stream alive)."""
    _blocks: dict[Hashable, _Block] = field(default_factory=dict)
    _joins: list[tuple[_Stream, int, float] | None] = field(default_factory=list)

    def read(self, node: Hashable, key: Hashable, at_s: float) -> float:
        """Blocks' worth `node` sends for this read of `key` starting at `at_s` (1.0: every chunk its own)."""
        block = self._blocks.setdefault((node, key), _Block())
        sharing = self.sharing
        if sharing.mechanism == "incast-window":
            window = at_s // sharing.incast_window_s
            self._joined(None)
            if block.window_start is not None and block.window_start // sharing.incast_window_s == window:
                return 0.0
            block.window_start = at_s
            return 1.0
        block.pending = [p for p in block.pending if at_s - p[0] < sharing.round_trip_s]
        stream = block.stream
        if stream is not None:
            self._advance(stream, at_s)
        need = 1.0
        if sharing.mechanism != "stream-join":
            self._joined(None)
        elif stream is None or stream.ended:
            block.stream = stream = _Stream(at=at_s, reach=[1.0])  # the origin of a new stream
            self._joined((stream, 0, 0.0))
        elif stream.members > sharing.max_subscribers:
            self._joined(None)  # the stream is full: this reader is forwarded as today, a block of its own
        else:
            stream.members += 1
            if sharing.patch_pass:
                return self._join(stream, block)
            self._joined((stream, 0, 0.0))  # it finishes about with the stream
            need = stream.front  # immediate patches: it fetches what it missed at once
        own = _uncovered(need, [(lo, hi) for _, lo, hi in block.pending])
        block.pending += [(at_s, lo, hi) for lo, hi in own]
        return sum(hi - lo for lo, hi in own)

    def _join(self, stream: _Stream, block: _Block) -> float:
        """A subscriber joining `stream` now, as built (patch pass): what it adds to the passes' reaches.

        In the first pass it misses [0, front), less the chunks whose GETs are still pending within a round
        trip (coalescing parks its GETs on them); the patch pass sends that once for every late member, so it
        adds only what reaches past the longest missed part so far (1 + J / count in all for a stream whose last
        joiner joined at J). In a later pass it joins at the block's end: that pass then covers the whole block,
        and the next one what it had passed before the reader came."""
        k = stream.current
        missed = stream.front
        if k == 0:
            gaps = _uncovered(stream.front, [(lo, hi) for _, lo, hi in block.pending])
            missed = max((hi for _, hi in gaps), default=0.0)
        before = sum(stream.reach)
        if k > 0:
            stream.reach[k] = 1.0
        if missed > 0:
            if len(stream.reach) == k + 1:
                stream.reach.append(0.0)
            stream.reach[k + 1] = max(stream.reach[k + 1], missed)
        self._joined((stream, k, missed))
        return sum(stream.reach) - before

    def _joined(self, join: tuple[_Stream, int, float] | None) -> None:
        if self.timed:
            self._joins.append(join)

    def _pace(self, members: int) -> float:
        lone = 1.0 / self.transfer_s if self.transfer_s > 0 else float("inf")
        return lone if self.delivery is None else min(lone, self.delivery(members) / members)

    def _advance(self, stream: _Stream, to_s: float) -> None:
        """Move `stream`'s passes on to `to_s` at its pace (members fixed since `stream.at`)."""
        while not stream.ended and stream.at < to_s:
            pace = self._pace(stream.members)
            if pace <= 0:
                break  # a switch that copies nothing: the stream never moves on
            if self.timed and (not stream.trail or stream.trail[-1][0] != stream.current
                               or stream.trail[-1][3] != pace):
                stream.trail.append((stream.current, stream.at, stream.front, pace))
            left = (stream.reach[stream.current] - stream.front) / pace
            if stream.at + left > to_s:
                stream.front += pace * (to_s - stream.at)
                stream.at = to_s
                return
            stream.at += left
            stream.current += 1
            stream.front = 0.0
            while not stream.ended and stream.reach[stream.current] <= 0.0:
                stream.current += 1
        stream.at = max(stream.at, to_s)

    def finish_times(self) -> list[float | None]:
        """When each read fed so far has its block from its stream (`stream-join` members: the pass it joined
        ended and the next one reached its join point), in the order fed; None for a read not in a stream."""
        if not self.timed:
            raise ValueError("finish_times needs SharedReads(timed=True)")
        for block in self._blocks.values():
            if block.stream is not None:
                self._advance(block.stream, float("inf"))
        return [None if join is None else _reached(*join) for join in self._joins]


def _reached(stream: _Stream, k: int, point: float) -> float:
    """When a member that joined `stream`'s pass k at `point` has the whole block: when pass k + 1 reached
    `point` (it brings what the member missed), or when pass k ended if the member missed nothing."""
    target = (k + 1, point)
    end = stream.at
    for i, (pass_k, t0, front0, pace) in enumerate(stream.trail):
        last = i + 1 == len(stream.trail)
        end = t0 + (stream.reach[pass_k] - front0) / pace if last else stream.trail[i + 1][1]
        if (pass_k, front0) >= target:
            return t0
        if pass_k == target[0] and front0 + pace * (end - t0) >= point:
            return t0 + (point - front0) / pace
    return end


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
