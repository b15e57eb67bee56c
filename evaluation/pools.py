"""The one place the evaluator builds pools: by policy name through `policies.registry`, driven by
`policies.pool.Pool`. Nothing here decides anything; the policies do.

A policy spec on the command line is `admission+eviction+recycling` (e.g. `always+lru+drop`); a bare
eviction name means the default admission and recycling. Parameters follow as `name:key=value;key=value`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies import registry
from policies.base import Tier
from policies.pool import Pool, PoolEvent

DEFAULT_ADMISSION = "always"
DEFAULT_RECYCLING = "drop"


def _split_params(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, rest.split(";")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"policy parameter {item!r} is not key=value")
        params[key.strip()] = value.strip()
    return name.strip(), params


@dataclass(frozen=True)
class PolicySpec:
    """Names (and parameters) of the three parts of one pool policy."""

    admission: str = DEFAULT_ADMISSION
    eviction: str = "lru"
    recycling: str = DEFAULT_RECYCLING
    admission_params: dict[str, str] = field(default_factory=dict, hash=False)
    eviction_params: dict[str, str] = field(default_factory=dict, hash=False)
    recycling_params: dict[str, str] = field(default_factory=dict, hash=False)
    label: str = ""

    @classmethod
    def parse(cls, text: str) -> PolicySpec:
        """`lru`, `tinylfu+lru`, `always+lru+demote`, `freq:threshold=2+lru` → a spec; bad text → ValueError."""
        parts = [p for p in text.split("+")]
        if not text.strip() or any(not p.strip() for p in parts) or len(parts) > 3:
            raise ValueError(f"policy {text!r}: expected EVICTION, ADMISSION+EVICTION or ADMISSION+EVICTION+RECYCLING")
        if len(parts) == 1:
            parts = [DEFAULT_ADMISSION, parts[0], DEFAULT_RECYCLING]
        elif len(parts) == 2:
            parts = [*parts, DEFAULT_RECYCLING]
        (a, ap), (e, ep), (r, rp) = (_split_params(p) for p in parts)
        return cls(a, e, r, ap, ep, rp, text.strip())

    @property
    def name(self) -> str:
        return self.label or f"{self.admission}+{self.eviction}+{self.recycling}"

    def build(self, capacity_blocks: int, tier: Tier = Tier.SWITCH, log: bool = False) -> Pool:
        """A fresh pool of `capacity_blocks` slots running this policy; `log` keeps its events for `drain_events`."""
        return registry.make_pool(
            capacity_blocks, self.admission, self.eviction, self.recycling,
            admission_params=self.admission_params, eviction_params=self.eviction_params,
            recycling_params=self.recycling_params, tier=tier, log_limit=None if log else 0,
        )

    def check(self) -> None:
        """Build a one-slot pool so unknown names or parameters fail before a long replay starts."""
        self.build(1)


def parse_policies(text: str) -> list[PolicySpec]:
    """A comma-separated list of policy specs."""
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
