"""Demote an evicted block when what it is still worth clears a threshold, else drop it (the project default).

The victim's residual is in the admission score's unit (for the `value` policies: expected prefill
token-equivalents saved per second per byte), so one threshold says "worth a slot in the tier below".
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import Params, Recycle, Tier, Victim
from policies.recycling.demote import NEXT_TIER_DOWN


@dataclass(frozen=True)
class ResidualParams(Params):
    """The bar for a lower tier."""

    threshold: float = 0.05
    """Minimum residual value to demote rather than drop."""


class ResidualRecycling:
    name = "residual"

    def __init__(self, params: ResidualParams | None = None) -> None:
        self.params = params or ResidualParams()

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle:
        below = NEXT_TIER_DOWN[from_tier]
        if below is Tier.ABSENT or victim.residual < self.params.threshold:
            return Recycle(
                Tier.ABSENT, f"residual {victim.residual:.3g} < {self.params.threshold:g}: dropped"
            )
        return Recycle(below, f"residual {victim.residual:.3g} ≥ {self.params.threshold:g}: to {below.name}")
