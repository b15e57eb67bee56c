"""Least recently used: the baseline every pool is compared with (libCacheSim's `LRU`, exactly)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from policies.base import BlockInfo, BlockKey, Params, Victim


@dataclass(frozen=True)
class LRUParams(Params):
    """LRU has no parameters."""


class LRUEviction:
    """Evicts the block read longest ago; pinned blocks are skipped, not reordered."""

    name = "lru"

    def __init__(self, params: LRUParams | None = None) -> None:
        self.params = params or LRUParams()
        self._order: OrderedDict[BlockKey, None] = OrderedDict()  # first = least recently used

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._order[block.key] = None

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._order.move_to_end(block.key)

    def on_remove(self, key: BlockKey) -> None:
        self._order.pop(key, None)

    def fast_ops(self) -> tuple[Callable[[BlockKey], None], Callable[[BlockKey], None], Callable[[], BlockKey]]:
        """Key-only operations for `Pool.access_many`: touch, insert, pop the least recent key."""
        order = self._order

        def insert(key: BlockKey) -> None:
            order[key] = None

        def pop_victim() -> BlockKey:
            return order.popitem(last=False)[0]

        return order.move_to_end, insert, pop_victim

    def victim(self, now: float, protected: frozenset[BlockKey] = frozenset()) -> Victim:
        for key in self._order:
            if key not in protected:
                return Victim(key, 0.0, "least recently used")
        raise LookupError("lru: every resident block is pinned")
