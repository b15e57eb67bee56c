"""Least recently used: the baseline every pool is compared with (libCacheSim's `LRU`, exactly)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from policies.base import BlockInfo, CacheKey, Params, Victim


@dataclass(frozen=True)
class LRUParams(Params):
    """LRU has no parameters."""


class LRUEviction:
    """Evicts the block read longest ago; pinned blocks are skipped, not reordered."""

    name = "lru"

    def __init__(self, params: LRUParams | None = None) -> None:
        self.params = params or LRUParams()
        self._order: OrderedDict[CacheKey, None] = OrderedDict()  # first = least recently used

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._order[block.key] = None

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._order.move_to_end(block.key)

    def on_remove(self, key: CacheKey) -> None:
        self._order.pop(key, None)

    def fast_ops(self) -> tuple[Callable[[CacheKey], object], Callable[[CacheKey], object],
                                Callable[[], tuple[CacheKey, object]]]:
        """Key-only operations for `Pool.access_many`, all C-level bound methods: touch, insert (a new key, so
        `setdefault` adds it last), pop the least recent (key, None) pair."""
        order = self._order
        return order.move_to_end, order.setdefault, partial(order.popitem, False)

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        for key in self._order:
            if key not in protected:
                return Victim(key, 0.0, "least recently used")
        raise LookupError("lru: every resident block is pinned")
