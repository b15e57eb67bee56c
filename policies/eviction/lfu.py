"""Least frequently used, counting hits while resident, FIFO among equal counts.

This is libCacheSim's `LFU` rule (its LFU.c): a block enters with count 1 and forgets its count when it
leaves; among blocks of the lowest count the one that reached that count first leaves first. Matching
that tie-break is what lets the differential test demand the same hit count exactly.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from policies.base import BlockInfo, BlockKey, Params, Victim


@dataclass(frozen=True)
class LFUParams(Params):
    """LFU has no parameters."""


class LFUEviction:
    """Frequency buckets, each an insertion-ordered set; the lowest non-empty bucket gives the victim."""

    name = "lfu"

    def __init__(self, params: LFUParams | None = None) -> None:
        self.params = params or LFUParams()
        self._count: dict[BlockKey, int] = {}
        self._buckets: dict[int, OrderedDict[BlockKey, None]] = {}

    def _put(self, key: BlockKey, count: int) -> None:
        self._count[key] = count
        self._buckets.setdefault(count, OrderedDict())[key] = None

    def _take(self, key: BlockKey) -> int:
        count = self._count.pop(key)
        bucket = self._buckets[count]
        del bucket[key]
        if not bucket:
            del self._buckets[count]
        return count

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._put(block.key, 1)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._put(block.key, self._take(block.key) + 1)

    def on_remove(self, key: BlockKey) -> None:
        if key in self._count:
            self._take(key)

    def victim(self, now: float, protected: frozenset[BlockKey] = frozenset()) -> Victim:
        for count in sorted(self._buckets):
            for key in self._buckets[count]:
                if key not in protected:
                    return Victim(key, 0.0, f"least frequently used ({count} reads while resident)")
        raise LookupError("lfu: every resident block is pinned")
