"""Where a block's stream is, as one of its members sees it: which chunks to ask for while pushes come.

A reader that sets F_STREAM on its GETs may be made a member of the block's stream by a switch
(docs/dataplane.md, *Stream join*): copies of the other members' replies beyond the stream's front (and of every
reply to the stream's first reader, the origin) reach it as pushed chunks (F_PUSHED), in the order the storage
node answered them. `StreamPosition` keeps what the reader learnt from them (docs/protocol.md, *Pushed chunks*);
the read (kvpool/client.py) follows it only while the newest push is above every chunk its own GETs brought
(another member leads), and reads on by itself otherwise:

* the newest pushed index H, where the leading member's read is: the chunks above it will come pushed while
  pushes keep coming, so a following reader does not ask for them;
* the chunks it missed: those below the first pushed index (the stream had passed them before the reader
  joined) are due at once (when the caller asks for them: `due(before=True)`; kvpool/client.py does so only in
  the stream's patch pass, unless `immediate_patch`); a hole in the pushed indices (a push lost, or the leader's request lost and resent)
  is due only once it is more than `lag` chunks behind H or an RTO old, since pushes arrive in the leader's order
  give or take its own resends;
* whether pushes keep coming: `live` until none came for two RTOs (the stream ended: the members finished or
  died, or a write ended it), plus a `defer` that is shorter the more of the block the reader missed (so the
  members that find the stream quiet together take the lead one after the other, the one that misses most
  first); after that the reader asks for everything left, as without a stream.

Pure bookkeeping on times the caller passes: no I/O, no clock, no timers of its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StreamPatience:
    """How long a subscriber trusts the stream, in chunks and in retransmission timeouts (RTOs: the reader's
    current one is passed to every call, so the patience follows the path as it is measured)."""

    lag: int = 64
    """A hole more than this many chunks behind the newest pushed one is due (the origin's reordering stays
    within its window; the client passes twice its own)."""
    hole_rtos: float = 1.0
    """A hole is due this many RTOs after the push that skipped it, however close to the newest one it is: by
    then the origin's own resend would have come back (RACK resends after about 1.25 round trips)."""
    quiet_rtos: float = 2.0
    """The stream counts as ended after this many RTOs without any push: long enough for the origin to resend
    a lost request once, short enough that a dead origin costs the reader little."""
    defer_rtos: float = 4.0
    """Most RTOs a member waits beyond `quiet_rtos` before it takes the lead (`StreamPosition.defer`), and most
    `min_rto`s a late member waits before it begins its patch pass (kvpool/client.py): members that find the
    stream quiet, or its first pass over, together would otherwise all read the same chunks at once."""

    def __post_init__(self) -> None:
        if self.lag < 1 or self.hole_rtos <= 0 or self.quiet_rtos <= 0 or self.defer_rtos < 0:
            raise ValueError("a stream needs lag >= 1, hole_rtos > 0, quiet_rtos > 0 and defer_rtos >= 0")

    def defer_for(self, missed: int, chunks: int) -> float:
        """RTOs a member that missed the block's first `missed` of `chunks` chunks waits, beyond `quiet_rtos`,
        before it takes the lead: the more it missed, the sooner (docs/protocol.md, *Pushed chunks*). The member
        that missed most is the one that needs every chunk the others miss (the missed prefixes nest), so once
        it leads, nobody has to take over from it, and the others, seeing its pushes, never read the same
        chunks at the same time."""
        return self.defer_rtos * (1.0 - min(max(missed, 0), chunks) / max(chunks, 1))


@dataclass(slots=True)
class _Hole:
    since: float
    """When the push that skipped it arrived."""
    next: int
    """The hole's lowest index not yet handed out."""
    end: int
    """One past its highest index."""


class StreamPosition:
    """The pushes one read received: the newest index, the holes, when the last one came."""

    def __init__(self, first: int, now: float, patience: StreamPatience, defer: float = 0.0) -> None:
        self.patience = patience
        self.defer = defer
        """RTOs this member waits beyond `quiet_rtos` before the stream counts as ended
        (`StreamPatience.defer_for`)."""
        self.first = first
        """The first pushed index: every chunk below it was passed before this reader joined."""
        self.newest = first
        """H: the highest pushed index so far."""
        self.last_push_at = now
        self.pushes = 1
        self._before = 0
        """Chunks below `first` handed out (or skipped as not missing) so far."""
        self._holes: deque[_Hole] = deque()

    def pushed(self, idx: int, now: float) -> None:
        """A pushed chunk `idx` was taken (or was a duplicate: the stream is alive either way)."""
        self.pushes += 1
        self.last_push_at = now
        if idx > self.newest + 1:
            self._holes.append(_Hole(now, self.newest + 1, idx))
        self.newest = max(self.newest, idx)

    def live(self, now: float, rto: float) -> bool:
        """Pushes keep coming: one came within `quiet_rtos` (+ `defer`) RTOs."""
        return now - self.last_push_at < (self.patience.quiet_rtos + self.defer) * rto

    def due(self, now: float, rto: float, missing: Callable[[int], bool], room: int, before: bool = True) -> list[int]:
        """Up to `room` chunks to ask for now, lowest first, each handed out once: those before the join (unless
        not `before`), then the holes that are old or far enough behind H. `missing(i)`: the reader neither has
        chunk i nor asked."""
        out: list[int] = []
        while before and self._before < self.first and len(out) < room:
            i = self._before
            self._before += 1
            if missing(i):
                out.append(i)
        holes = self._holes
        while holes and len(out) < room:
            hole = holes[0]
            if now - hole.since < self.patience.hole_rtos * rto and self.newest - (hole.end - 1) <= self.patience.lag:
                break
            while hole.next < hole.end and len(out) < room:
                i = hole.next
                hole.next += 1
                if missing(i):
                    out.append(i)
            if hole.next == hole.end:
                holes.popleft()
        return out

    def next_due(self, rto: float) -> float | None:
        """When the oldest hole becomes due by age (None: no hole waits)."""
        return self._holes[0].since + self.patience.hole_rtos * rto if self._holes else None

    def quiet_at(self, rto: float) -> float:
        """When the stream counts as ended if no push comes before."""
        return self.last_push_at + (self.patience.quiet_rtos + self.defer) * rto
