"""A circuit breaker: after a failure, stop calling the pool for a while, and try again with back-off.

An engine must serve every request whether the pool is up or not. A down pool costs a client call its whole
timeout (every retry of it); an engine calling it per request would add that to every time to first token. The
breaker turns the first failure into an open circuit: calls are skipped (the caller answers "not in the pool" at
once) until the back-off has passed, then one call tries again. A success closes the circuit and resets the
back-off; another failure doubles it, up to a maximum. The first failure of an outage is logged as a warning,
later ones only at debug level, and the recovery once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BreakerOptions:
    """How long a failed pool is left alone."""

    backoff_s: float = 1.0
    """First pause after a failure, in seconds."""
    max_backoff_s: float = 30.0
    """Longest pause: a pool back after an outage is used again within this time."""


class CircuitBreaker:
    """Closed (calls go through) or open until a deadline; thread-safe."""

    def __init__(self, what: str, options: BreakerOptions = BreakerOptions(), logger: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if options.backoff_s <= 0 or options.max_backoff_s < options.backoff_s:
            raise ValueError("backoff_s must be > 0 and max_backoff_s >= backoff_s")
        self.what = what
        """What is behind the breaker, for log lines ("pool 10.0.0.200:7420")."""
        self.options = options
        self.log = logger or logging.getLogger(__name__)
        self.clock = clock
        self._lock = threading.Lock()
        self._open_until: float | None = None
        self._backoff = options.backoff_s
        self.trips = 0
        """Failures that opened (or re-opened) the circuit."""
        self.outages = 0
        """Outages seen: runs of failures between two successes."""

    @property
    def is_open(self) -> bool:
        """Whether calls are being skipped now."""
        with self._lock:
            return self._open_until is not None and self.clock() < self._open_until

    def allow(self) -> bool:
        """Whether a call may go to the pool now (closed, or the back-off has passed: one try)."""
        with self._lock:
            if self._open_until is None:
                return True
            if self.clock() < self._open_until:
                return False
            # half open: let this call try; until it reports, others wait one more back-off period
            self._open_until = self.clock() + self._backoff
            return True

    def failure(self, error: BaseException) -> None:
        """A call failed as a down or slow pool fails (timeout, socket error): open the circuit."""
        with self._lock:
            first = self._open_until is None
            if first:
                self.outages += 1
                self._backoff = self.options.backoff_s
            else:
                self._backoff = min(self._backoff * 2, self.options.max_backoff_s)
            self._open_until = self.clock() + self._backoff
            self.trips += 1
            backoff = self._backoff
        if first:
            self.log.warning("%s unreachable (%s): serving without it, trying again with back-off up to %.0f s",
                             self.what, error, self.options.max_backoff_s)
        else:
            self.log.debug("%s still unreachable (%s): next try in %.1f s", self.what, error, backoff)

    def success(self) -> None:
        """A call got its answer: close the circuit."""
        with self._lock:
            was_open = self._open_until is not None
            self._open_until = None
            self._backoff = self.options.backoff_s
        if was_open:
            self.log.info("%s reachable again", self.what)
