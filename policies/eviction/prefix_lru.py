"""Prefix-aware, leaf-first LRU: a block is never evicted while a resident child still depends on it.

A prefix block is useless without every block before it, so evicting a parent whose child stays
strands the child. Only *leaves* (resident blocks with no resident child) are candidates, the least
recently used leaf first; when a leaf goes, its parent may become a leaf and competes with its own
last-access time. Blocks without a known parent (`BlockInfo.parent` None) are roots.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim


@dataclass(frozen=True)
class PrefixLRUParams(Params):
    """Leaf-first LRU has no parameters."""


class PrefixLRUEviction:
    """A heap of (last access sequence, key) with lazy deletion; stale or non-leaf entries are skipped."""

    name = "prefix_lru"

    def __init__(self, params: PrefixLRUParams | None = None) -> None:
        self.params = params or PrefixLRUParams()
        self._seq = 0
        self._stamp: dict[CacheKey, int] = {}  # resident key → last access sequence number
        self._parent: dict[CacheKey, CacheKey | None] = {}
        self._children: dict[CacheKey, int] = {}  # resident key → resident children
        self._heap: list[tuple[int, int, CacheKey]] = []  # (stamp, tiebreak, key)

    def _touch(self, key: CacheKey) -> None:
        self._seq += 1
        self._stamp[key] = self._seq
        if not self._children.get(key):
            heapq.heappush(self._heap, (self._seq, self._seq, key))

    def on_insert(self, block: BlockInfo, now: float) -> None:
        key, parent = block.key, block.parent
        self._parent[key] = parent
        self._children.setdefault(key, 0)
        if parent is not None and parent in self._stamp:
            self._children[parent] += 1
        self._touch(key)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._touch(block.key)

    def on_remove(self, key: CacheKey) -> None:
        if key not in self._stamp:
            return
        del self._stamp[key]
        self._children.pop(key, None)
        parent = self._parent.pop(key, None)
        if parent is not None and parent in self._stamp:
            self._children[parent] -= 1
            if self._children[parent] == 0:  # the parent is a leaf again, at its own recency
                self._seq += 1
                heapq.heappush(self._heap, (self._stamp[parent], self._seq, parent))

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        skipped: list[tuple[int, int, CacheKey]] = []
        found: CacheKey | None = None
        while self._heap:
            entry = self._heap[0]
            stamp, _, key = entry
            if self._stamp.get(key) != stamp or self._children.get(key):
                heapq.heappop(self._heap)  # stale: re-read since, removed, or has a child again
                continue
            if key in protected:
                skipped.append(heapq.heappop(self._heap))
                continue
            found = key
            break
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        if found is None:
            raise LookupError("prefix_lru: every evictable leaf is pinned")
        return Victim(found, 0.0, "least recently used leaf of the prefix tree")
