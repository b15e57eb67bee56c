"""How many requests a KVP client keeps in flight: a DCTCP-style congestion window, and the pacing of its sends.

The window (in requests, one chunk each) grows as replies come: by one per reply up to `ssthresh` (slow start),
then by one per window of replies (additive increase). It shrinks on three signals:

* **marks** (F_CONGESTED on a reply: the switch's egress queue towards this reader was over its threshold).
  As DCTCP (RFC 8257): per observation round (one window of replies) the fraction F of marked replies feeds
  `alpha = (1 - g) alpha + g F`, and a round that saw a mark cuts the window by `alpha / 2`. Light congestion
  costs a little, persistent congestion halves the window, and readers of one node converge to equal shares;
* **loss** (a request's timer ran out): the window is multiplied by LOSS_BETA (0.7, CUBIC's, RFC 9438: random
  loss on a lossy path costs less than TCP Reno's halving), once per round trip: a loss of a request sent
  before the last cut belongs to the event that caused that cut (as NewReno's recovery);
* **BUSY** (the storage node shed the request): the window halves (once per round trip), the node said so.

A loss cut proved wrong (the request's first reply arrived after all, seen as a duplicate) is undone.

`window_cap` bounds it (the client's `window` option), `minimum` keeps at least one request in flight.

Pacing spreads a window's sends over a round trip (`Pacer`): a reader that resumes after a timeout, or many
readers whose windows open at once, do not burst into the switch's input queue. A few sends may go back to back
(`burst`), so a Python sender is never throttled by its own timer resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

DCTCP_G = 1 / 16
"""Gain of the marked fraction's moving average (RFC 8257's recommended g)."""
LOSS_BETA = 0.7
"""The window after a loss, as a fraction of the window before (CUBIC's multiplicative decrease)."""
BUSY_BETA = 0.5
"""The window after a BUSY, as a fraction of the window before."""


@dataclass(frozen=True, slots=True)
class WindowLimits:
    """Bounds and start of a congestion window, in requests."""

    initial: float = 8.0
    cap: int = 32
    minimum: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.cap or self.initial < 1:
            raise ValueError("a congestion window needs 1 <= minimum <= cap and initial >= 1")


class CongestionWindow:
    """The window of one client towards its storage node: grown by replies, cut by marks, losses and BUSY."""

    def __init__(self, limits: WindowLimits | None = None, adaptive: bool = True) -> None:
        self.limits = limits or WindowLimits()
        self.adaptive = adaptive
        """False: a fixed window of `cap` requests (the behaviour before congestion control; a baseline)."""
        self.cwnd = min(max(self.limits.initial, self.limits.minimum), self.limits.cap) if adaptive else \
            float(self.limits.cap)
        self.ssthresh = float(self.limits.cap)
        self.alpha = 1.0
        """DCTCP's estimate of the marked fraction (starts at 1: the first marked round halves, RFC 8257)."""
        self._round_replies = 0
        self._round_marks = 0
        self._round_size = self.cwnd
        self._last_cut = float("-inf")
        """When the window was last cut by a loss or BUSY (clock seconds)."""
        self._undo: tuple[float, float] | None = None
        """(cwnd, ssthresh) before the last loss cut, until it is undone or a newer cut replaces it."""
        self.marks = 0
        self.cuts = 0
        self.undone = 0
        self.losses = 0
        self.busy = 0

    @property
    def size(self) -> int:
        """Requests that may be in flight now."""
        return max(1, int(self.cwnd))

    def on_reply(self, marked: bool) -> None:
        """A reply came (any status but BUSY); `marked`: it carried F_CONGESTED."""
        self.marks += marked
        if not self.adaptive:
            return
        self._round_replies += 1
        self._round_marks += marked
        if not marked:
            cwnd = self.cwnd
            cwnd += 1.0 if cwnd < self.ssthresh else 1.0 / cwnd
            cap = self.limits.cap
            self.cwnd = cwnd if cwnd <= cap else float(cap)  # (`min` with the cap, without two calls per reply)
        if self._round_replies >= self._round_size:
            self._end_round()

    def _end_round(self) -> None:
        fraction = self._round_marks / self._round_replies
        self.alpha = (1 - DCTCP_G) * self.alpha + DCTCP_G * fraction
        if self._round_marks:
            self.cwnd = max(self.limits.minimum, self.cwnd * (1 - self.alpha / 2))
            self.ssthresh = self.cwnd
            self.cuts += 1
        self._round_replies = self._round_marks = 0
        self._round_size = self.cwnd

    def on_loss(self, sent_at: float, now: float) -> None:
        """A request sent at `sent_at` timed out: cut by LOSS_BETA, unless the window was already cut after it
        was sent."""
        self.losses += 1
        self._cut(LOSS_BETA, sent_at, now)

    def on_busy(self, sent_at: float, now: float) -> None:
        """The storage node shed a request sent at `sent_at` (BUSY): halve, once per round trip as a loss."""
        self.busy += 1
        self._cut(BUSY_BETA, sent_at, now)

    def undo(self) -> None:
        """The last loss cut was spurious (the "lost" request's first reply came after all): restore the window
        it cut, once (as Linux undoes a cut on a DSACK)."""
        if self._undo is None:
            return
        self.cwnd, self.ssthresh = max(self.cwnd, self._undo[0]), max(self.ssthresh, self._undo[1])
        self._undo = None
        self.undone += 1

    def _cut(self, beta: float, sent_at: float, now: float) -> None:
        if not self.adaptive or sent_at <= self._last_cut:
            return
        self._undo = (self.cwnd, self.ssthresh) if beta == LOSS_BETA else None
        self.cwnd = max(self.limits.minimum, self.cwnd * beta)
        self.ssthresh = max(self.cwnd, 2.0)
        self._last_cut = now
        self.cuts += 1
        self._round_replies = self._round_marks = 0
        self._round_size = self.cwnd


PACING_BURST = 8
"""Requests a paced sender may send ahead of its rate at least (a client raises it to its span width)."""


class Pacer:
    """Sends spread at `gain` x cwnd per smoothed round trip, up to `burst` sends ahead of that rate."""

    def __init__(self, burst: int = PACING_BURST) -> None:
        self.burst = burst
        self._next = float("-inf")

    @staticmethod
    def interval(srtt: float, cwnd: float, slow_start: bool) -> float:
        """Seconds between paced sends: 2x the window's rate in slow start, 1.25x after (as Linux paces TCP)."""
        return srtt / (max(cwnd, 1.0) * (2.0 if slow_start else 1.25))

    def delay(self, now: float, interval: float) -> float:
        """Seconds to wait before the next send may go (0: now)."""
        return max(0.0, self._next - now - self.burst * interval)

    def sent(self, now: float, interval: float) -> None:
        self._next = max(self._next, now) + interval
