"""Admit every missed block: the classic cache, and the setting libCacheSim's policies assume."""

from __future__ import annotations

from dataclasses import dataclass

from policies.base import BlockInfo, Params


@dataclass(frozen=True)
class AlwaysParams(Params):
    """No parameters."""


class AlwaysAdmission:
    """Never refuses; its score (0) is not compared with victims."""

    name = "always"
    passive = True
    """Nothing to record or decide per block: `Pool.access_many` may skip it."""

    def __init__(self, params: AlwaysParams | None = None) -> None:
        self.params = params or AlwaysParams()

    def record(self, block: BlockInfo, now: float) -> None:
        pass

    def admit(self, block: BlockInfo, now: float) -> bool:
        return True

    def score(self, block: BlockInfo, now: float) -> float:
        return 0.0
