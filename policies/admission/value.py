"""Admit a block when its expected value beats a floor; the pool also makes it beat the victim it displaces.

The score is the same quantity the `value` eviction ranks by (`policies.reuse`): expected reads per
second of the block's class × prefill token-equivalents a hit saves ÷ slot cost. Most blocks of a chat
trace are read once, so most newcomers score below the resident they would replace and are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import BlockInfo, Params
from policies.eviction.value import block_value
from policies.reuse import ReuseModel, ReuseParams


@dataclass(frozen=True)
class ValueAdmissionParams(Params):
    """Floor and weights of the admission score."""

    threshold: float = 0.0
    """Minimum score (token-equivalents per second per byte) to be admitted even into a pool with room."""
    depth_weight: float = 0.01
    """As in the `value` eviction: extra prefill cost per block of prefix in front."""


class ValueAdmission:
    """Feeds the reuse model with every access and scores blocks at age 0."""

    name = "value"
    compares_residual = True

    def __init__(
        self,
        params: ValueAdmissionParams | None = None,
        model: ReuseModel | None = None,
        model_params: ReuseParams | None = None,
    ) -> None:
        self.params = params or ValueAdmissionParams()
        self.model = model if model is not None else ReuseModel(model_params)

    def record(self, block: BlockInfo, now: float) -> None:
        self.model.observe(block, now)

    def score(self, block: BlockInfo, now: float) -> float:
        last = self.model.last(block.key)
        if last is None:
            cls, age = self.model.classify(block, 0), 0.0
        else:
            cls, age = last[0], now - last[1]
        return block_value(self.model, block, cls, age, self.params.depth_weight)

    def admit(self, block: BlockInfo, now: float) -> bool:
        return self.score(block, now) >= self.params.threshold
