"""The retransmission timeout of a KVP client, from the round trips it measures (RFC 6298).

SRTT and RTTVAR follow RFC 6298 section 2 (alpha 1/8, beta 1/4, RTO = SRTT + 4 RTTVAR), with two changes for
a data-centre path: the bounds are the caller's (`min_rto`, by default 20 ms, not 1 s: round trips here are
tens of microseconds to tens of milliseconds), and backoff is per request (`backoff`: the RTO doubled per try
already sent, up to `max_rto`), because a window keeps one timer per request rather than one per connection.
Karn's rule is the caller's: only a request answered after its first and only send is a sample
(`kvpool.window`), so a late reply to a resent request never shrinks the timer. A timeout proved spurious
(both sends of a request were answered) raises the RTO's floor for a while (`spurious`).
"""

from __future__ import annotations

from dataclasses import dataclass

ALPHA = 1 / 8
"""Gain of SRTT (RFC 6298)."""
BETA = 1 / 4
"""Gain of RTTVAR (RFC 6298)."""
K = 4
"""RTO = SRTT + K x RTTVAR (RFC 6298)."""
_KEEP_SRTT, _KEEP_RTTVAR = 1 - ALPHA, 1 - BETA
"""1 - ALPHA and 1 - BETA, computed once (a sample is taken per reply)."""
FLOOR_DECAY = 0.999
"""Per RTT sample, how a raised RTO floor returns towards the minimum (about 700 samples to halve: a few
hundred ms of a busy reader, so a stall that recurs every few hundred ms keeps the floor up)."""
SPURIOUS_MARGIN = 1.25
"""A spurious timeout raises the RTO's floor to this many times the wait the late reply proved (`spurious`)."""


@dataclass(frozen=True, slots=True)
class RtoBounds:
    """Where the timer starts and the range it stays in (seconds)."""

    initial: float = 0.5
    """The RTO before the first sample (RFC 6298 says 1 s; the client's `timeout`)."""
    minimum: float = 0.02
    """Lowest RTO: above a loaded 2-core machine's scheduling hiccups, far below RFC 6298's 1 s."""
    maximum: float = 4.0
    """Highest RTO, backoff included: a request is tried at least every 4 s however long the silence lasts."""

    def __post_init__(self) -> None:
        if not 0 < self.minimum <= self.maximum or self.initial <= 0:
            raise ValueError("RTO bounds need 0 < minimum <= maximum and initial > 0")


class RtoEstimator:
    """SRTT, RTTVAR and the RTO they give; one per client, shared by its windows (the path is the same)."""

    def __init__(self, bounds: RtoBounds | None = None) -> None:
        self.bounds = bounds or RtoBounds()
        self.srtt: float | None = None
        """Smoothed round trip (seconds); None before the first sample."""
        self.rttvar = 0.0
        self.samples = 0
        self.floor = self.bounds.minimum
        """The lowest RTO now: `minimum`, raised by each spurious timeout (`spurious`), decaying back per sample."""
        self.spurious_timeouts = 0

    def sample(self, rtt: float) -> None:
        """One measured round trip of a request sent once (Karn's rule: the caller never passes a resend's)."""
        if rtt < 0.0:
            rtt = 0.0
        srtt = self.srtt
        if srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = _KEEP_RTTVAR * self.rttvar + BETA * abs(srtt - rtt)
            self.srtt = _KEEP_SRTT * srtt + ALPHA * rtt
        self.samples += 1
        if self.floor > self.bounds.minimum:
            self.floor = max(self.bounds.minimum, self.floor * FLOOR_DECAY)

    def spurious(self, took: float | None = None) -> None:
        """A timer ran out for a request whose first reply came after all (its duplicate proved it): the path
        stalls for longer than the RTO says (a loaded machine's scheduling, not the network), so the RTO's floor
        rises, up to a quarter of `maximum`, and decays back as samples come (as Eifel's response, RFC 4015, makes
        the timer more conservative after a spurious timeout). `took`: how long the request waited for its first
        reply (from its first send), which the late reply proved the path may take: the floor rises to
        `SPURIOUS_MARGIN` times that, and at most doubles per timeout. Without it, the floor doubles. Only what
        was seen, not a doubling per timeout: a reader with a small window recovers most losses by its timer,
        and stalls of one length recurring (a few a second) doubled its floor to ten times that length."""
        self.spurious_timeouts += 1
        doubled = max(self.floor * 2, self.bounds.minimum)
        raised = doubled if took is None else min(doubled, max(self.floor, SPURIOUS_MARGIN * took))
        self.floor = min(raised, self.bounds.maximum / 4)

    @property
    def rto(self) -> float:
        """The timeout of a request's first send."""
        if self.srtt is None:
            return min(max(self.bounds.initial, self.bounds.minimum), self.bounds.maximum)
        return min(max(self.srtt + K * self.rttvar, self.floor), self.bounds.maximum)

    def backoff(self, sends: int) -> float:
        """The timeout after a request's `sends`-th send: the RTO doubled per earlier send, at most `maximum`."""
        return min(self.rto * (1 << min(max(sends - 1, 0), 16)), self.bounds.maximum)

    @property
    def smoothed(self) -> float:
        """SRTT, or the initial RTO while nothing was measured (for pacing and once-per-round-trip rules)."""
        return self.srtt if self.srtt is not None else self.bounds.initial
