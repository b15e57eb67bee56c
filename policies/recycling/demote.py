"""Demote every evicted block one tier down (switch → storage DRAM → storage disk → gone)."""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import Params, Recycle, Tier, Victim

NEXT_TIER_DOWN: dict[Tier, Tier] = {
    Tier.NODE_HBM: Tier.NODE_DRAM,
    Tier.NODE_DRAM: Tier.STORAGE_DRAM,
    Tier.SWITCH: Tier.STORAGE_DRAM,
    Tier.STORAGE_DRAM: Tier.STORAGE_DISK,
    Tier.STORAGE_DISK: Tier.ABSENT,
    Tier.ABSENT: Tier.ABSENT,
}
"""The tier below each tier: the inference node's memories spill to the pool, the pool to disk."""


@dataclass(frozen=True)
class DemoteParams(Params):
    """No parameters."""


class DemoteRecycling:
    name = "demote"

    def __init__(self, params: DemoteParams | None = None) -> None:
        self.params = params or DemoteParams()

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle:
        below = NEXT_TIER_DOWN[from_tier]
        if below is Tier.ABSENT:
            return Recycle(Tier.ABSENT, f"demote: nothing below {from_tier.name}")
        return Recycle(below, f"demote: {from_tier.name} → {below.name}")
