"""Admit a block only if its conversation's expected hit density beats the block it would displace.

LRB's "Belady boundary" in conversation form: a block whose conversation is not expected back within
what the pool can hold is worth less than the resident victim and is refused. The score is the
`policies.conversation` hit density at age 0 of the request reading the block (or a shared block's
read rate), in the unit of the `conversation` eviction's residuals, so the pool compares the two.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import BlockInfo, Params
from policies.conversation import ReturnModel, ReturnParams

TIE_MARGIN = 1e-9
"""A newcomer must beat its victim, not tie it: ties (blocks of one request, or of requests of the same
class arriving together) would only swap blocks of equal worth."""


@dataclass(frozen=True)
class ConversationAdmissionParams(Params):
    """Floor of the admission score."""

    threshold: float = 0.0
    """Minimum hit density (reads per slot-second) to be admitted even into a pool with room."""


class ConversationAdmission:
    """Scores with the `conversation` eviction's model when given it (that eviction feeds it)."""

    name = "conversation"
    compares_residual = True

    def __init__(
        self,
        params: ConversationAdmissionParams | None = None,
        model: ReturnModel | None = None,
        model_params: ReturnParams | None = None,
    ) -> None:
        self.params = params or ConversationAdmissionParams()
        self._owns_model = model is None
        self.model = model if model is not None else ReturnModel(model_params)

    def record(self, block: BlockInfo, now: float) -> None:
        if self._owns_model:
            self.model.observe(block, now)

    def score(self, block: BlockInfo, now: float) -> float:
        return self.model.block_value(block, block.request, now) * (1.0 - TIE_MARGIN)

    def admit(self, block: BlockInfo, now: float) -> bool:
        return self.score(block, now) > self.params.threshold
