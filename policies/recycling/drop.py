"""Drop every evicted block: the storage node still has it, so nothing is lost but the fast copy."""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import Params, Recycle, Tier, Victim


@dataclass(frozen=True)
class DropParams(Params):
    """No parameters."""


class DropRecycling:
    name = "drop"
    passive = True
    """Nothing to record or decide per block: `Pool.access_many` may skip it."""

    def __init__(self, params: DropParams | None = None) -> None:
        self.params = params or DropParams()

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle:
        return Recycle(Tier.ABSENT, "drop: recycling disabled")
