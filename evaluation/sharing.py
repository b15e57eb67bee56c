"""Which reads of one block a switch mechanism can merge into one send from the storage node, and at what cost.

A switch relieves an N-to-1 incast only for readers whose reads it can merge, and which those are depends on
the mechanism, not on a window the evaluator picks:

* `round-trip` (the data plane as built, docs/dataplane.md, "What it takes for readers to share a GET"): a
  reader's GET for a chunk joins a pending entry only while the first reader's GET for that chunk waits for
  the storage node's reply, one storage round trip. Readers that start a block within `round_trip_s` of the
  first share its sends; a later reader costs the node a whole block of its own. The default, 4 ms, is the
  round trip measured on the softswitch bed (`bench incast`); hardware switches have microseconds.
* `stream-join` (a proposed mechanism): a reader whose GET finds the block being streamed to others joins the
  stream (the switch replicates every later chunk reply to it) and fetches the chunks it missed itself. A
  reader starting `d` after the stream's first reader, while that stream lasts (`transfer_s`, one block at the
  link rate), costs the node `d / transfer_s` of a block; after it, a whole block and a stream of its own.
* `incast-window`: every read of a block from one node in the same aligned `incast_window_s` window merges
  into one send, whatever their distance. What the evaluator used to credit; kept as the upper bound that no
  built or proposed mechanism reaches.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

MECHANISMS = ("round-trip", "stream-join", "incast-window")
ROUND_TRIP_S = 0.004
"""One storage round trip per chunk on the softswitch bed, the pending entry's lifetime in effect."""


@dataclass(frozen=True)
class Sharing:
    """A switch mechanism that merges reads of one block from one storage node."""

    mechanism: str = "round-trip"
    round_trip_s: float = ROUND_TRIP_S
    """How long a first reader's GET for a chunk stays pending (`round-trip`)."""
    incast_window_s: float = 1.0
    """The aligned window of `incast-window`."""

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"unknown sharing mechanism {self.mechanism!r}; known: {', '.join(MECHANISMS)}")
        if self.round_trip_s < 0 or self.incast_window_s <= 0:
            raise ValueError("sharing: round_trip_s >= 0 and incast_window_s > 0")

    def joins(self, delay_s: float, lead_s: float, at_s: float, transfer_s: float) -> bool:
        """Whether a read at `at_s`, `delay_s` after the first read of the current stream (at `lead_s`), merges."""
        if self.mechanism == "incast-window":
            return int(at_s // self.incast_window_s) == int(lead_s // self.incast_window_s)
        window = self.round_trip_s if self.mechanism == "round-trip" else max(self.round_trip_s, transfer_s)
        return delay_s < window

    def joined_cost(self, delay_s: float, transfer_s: float) -> float:
        """Blocks' worth the node still sends for a reader that merged `delay_s` after the stream's first."""
        if self.mechanism != "stream-join" or delay_s <= self.round_trip_s:
            return 0.0  # a GET that joins a pending entry gets every chunk's reply
        return min(1.0, delay_s / transfer_s) if transfer_s > 0 else 1.0

    def label(self) -> str:
        if self.mechanism == "round-trip":
            return f"round-trip ({1000 * self.round_trip_s:g} ms)"
        if self.mechanism == "incast-window":
            return f"incast-window ({self.incast_window_s:g} s)"
        return "stream-join"


@dataclass
class SharedReads:
    """Reads of blocks from storage nodes, fed in time order; prices each under one mechanism."""

    sharing: Sharing
    transfer_s: float
    """One block's stream time at the link rate (how long a `stream-join` stream lasts)."""
    _lead: dict[Hashable, float] = field(default_factory=dict)

    def read(self, node: Hashable, key: Hashable, at_s: float) -> float:
        """Blocks' worth `node` sends for this read of `key` starting at `at_s` (1.0: a send of its own)."""
        lead = self._lead.get((node, key))
        if lead is not None and self.sharing.joins(at_s - lead, lead, at_s, self.transfer_s):
            return self.sharing.joined_cost(at_s - lead, self.transfer_s)
        self._lead[node, key] = at_s
        return 1.0


def sends_for(starts: Sequence[float], sharing: Sharing, transfer_s: float) -> float:
    """Blocks' worth one storage node sends for reads of one block starting at `starts` (any order)."""
    reads = SharedReads(sharing, transfer_s)
    return sum(reads.read(0, 0, t) for t in sorted(starts))
