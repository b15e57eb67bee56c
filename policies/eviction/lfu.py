"""Least frequently used, counting hits while resident, FIFO among equal counts.

This is libCacheSim's `LFU` rule (its LFU.c): a block enters with count 1 and forgets its count when it
leaves; among blocks of the lowest count the one that reached that count first leaves first. Matching
that tie-break is what lets the differential test demand the same hit count exactly.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim


@dataclass(frozen=True)
class LFUParams(Params):
    """LFU has no parameters."""


class LFUEviction:
    """Frequency buckets, each an insertion-ordered set; the lowest non-empty bucket gives the victim."""

    name = "lfu"

    def __init__(self, params: LFUParams | None = None) -> None:
        self.params = params or LFUParams()
        self._count: dict[CacheKey, int] = {}
        self._buckets: dict[int, OrderedDict[CacheKey, None]] = {}
        self._min = 1  # the lowest count with a non-empty bucket (when any block is resident)

    def _put(self, key: CacheKey, count: int) -> None:
        self._count[key] = count
        self._buckets.setdefault(count, OrderedDict())[key] = None

    def _take(self, key: CacheKey) -> int:
        count = self._count.pop(key)
        bucket = self._buckets[count]
        del bucket[key]
        if not bucket:
            del self._buckets[count]
            if count == self._min and self._buckets:
                self._min = min(self._buckets)
        return count

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._put(block.key, 1)
        self._min = 1

    def on_hit(self, block: BlockInfo, now: float) -> None:
        count = self._take(block.key) + 1
        self._put(block.key, count)
        self._min = min(self._min, count) if self._min in self._buckets else count

    def on_remove(self, key: CacheKey) -> None:
        if key in self._count:
            self._take(key)

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        if not protected and self._min in self._buckets:
            key = next(iter(self._buckets[self._min]))
            return Victim(key, 0.0, f"least frequently used ({self._min} reads while resident)")
        for count in sorted(self._buckets):
            for key in self._buckets[count]:
                if key not in protected:
                    return Victim(key, 0.0, f"least frequently used ({count} reads while resident)")
        raise LookupError("lfu: every resident block is pinned")
