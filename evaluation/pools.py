"""The one place the evaluator builds pools: by policy name through `policies.registry`, driven by
`policies.pool.Pool`. Nothing here decides anything; the policies do.

A policy spec on the command line is `admission+eviction+recycling` (e.g. `always+lru+drop`); a bare
eviction name means the default admission and recycling. Parameters follow as `name:key=value;key=value`.
"""

from __future__ import annotations

from policies.pool import Pool, PoolEvent
from policies.spec import PolicySpec

__all__ = ["PolicySpec", "drain_events", "parse_policies"]
"""`PolicySpec` is the one policy-spec type (`policies.spec`), shared with the controller."""


def parse_policies(text: str) -> list[PolicySpec]:
    """A comma-separated list of policy specs (each `EVICTION`, `ADMISSION+EVICTION` or
    `ADMISSION+EVICTION+RECYCLING`; a bare eviction name means always-admit and drop)."""
    specs = [PolicySpec.parse(item) for item in text.split(",") if item.strip()]
    if not specs:
        raise ValueError("no policy given")
    for spec in specs:
        spec.check()
    return specs


def drain_events(pool: Pool) -> list[PoolEvent]:
    """The events a logging pool recorded since the last call (the log is emptied, as a controller would)."""
    events = list(pool.events)
    pool.events.clear()
    return events
