"""ARC (Megiddo & Modha, FAST'03): recency list T1 and frequency list T2, ghosts B1/B2 steering a target p.

Follows libCacheSim's `ARC` (ARC.c) so the differential test can demand equal hit counts: p is a float
(delta = max(|B2|/|B1|, 1) on a B1 ghost hit, max(|B1|/|B2|, 1) on a B2 ghost hit); a ghost hit enters
T2 and REPLACE runs only if the pool is full; on a plain miss with |T1|+|B1| ≥ c, B1's oldest key is
forgotten (or, with B1 empty, T1's oldest block leaves without a ghost); otherwise, with the whole
directory at 2c, B2's oldest key is forgotten before REPLACE.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim


@dataclass(frozen=True)
class ARCParams(Params):
    """ARC adapts itself; no parameters."""


class ARCEviction:
    """Lists are OrderedDicts with the least recent entry first."""

    name = "arc"

    def __init__(self, capacity_blocks: int, params: ARCParams | None = None) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"arc: capacity_blocks must be ≥ 1, got {capacity_blocks}")
        self.params = params or ARCParams()
        self.c = capacity_blocks
        self.p = 0.0
        self._t1: OrderedDict[CacheKey, None] = OrderedDict()
        self._t2: OrderedDict[CacheKey, None] = OrderedDict()
        self._b1: OrderedDict[CacheKey, None] = OrderedDict()
        self._b2: OrderedDict[CacheKey, None] = OrderedDict()
        self._ghost_hit = 0  # 0 none, 1 in B1, 2 in B2, for the access being served
        self._pending: tuple[CacheKey, int] | None = None  # (victim, ghost list it joins: 0, 1 or 2)

    def record(self, block: BlockInfo, now: float) -> None:
        """Every access: a miss whose key is a ghost adapts p and will enter T2."""
        key = block.key
        self._ghost_hit = 0
        if key in self._b1:
            self.p = min(self.p + max(len(self._b2) / len(self._b1), 1.0), float(self.c))
            del self._b1[key]
            self._ghost_hit = 1
        elif key in self._b2:
            self.p = max(self.p - max(len(self._b1) / len(self._b2), 1.0), 0.0)
            del self._b2[key]
            self._ghost_hit = 2

    def on_hit(self, block: BlockInfo, now: float) -> None:
        key = block.key
        if key in self._t1:
            del self._t1[key]
            self._t2[key] = None
        else:
            self._t2.move_to_end(key)

    def on_insert(self, block: BlockInfo, now: float) -> None:
        (self._t2 if self._ghost_hit else self._t1)[block.key] = None
        self._ghost_hit = 0

    def on_remove(self, key: CacheKey) -> None:
        pending, self._pending = self._pending, None
        ghost = pending[1] if pending is not None and pending[0] == key else 0
        if self._t1.pop(key, False) is None:
            if ghost == 1:
                self._b1[key] = None
        elif self._t2.pop(key, False) is None and ghost == 2:
            self._b2[key] = None

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        if self._ghost_hit:
            return self._replace(protected)
        if len(self._t1) + len(self._b1) + 1 > self.c:
            if self._b1:
                self._b1.popitem(last=False)
                return self._replace(protected)
            key = self._oldest(self._t1, protected)
            if key is None:
                return self._replace(protected)
            self._pending = (key, 0)
            return Victim(key, 0.0, "arc: T1 holds the whole pool, oldest leaves without a ghost")
        if len(self._t1) + len(self._b1) + len(self._t2) + len(self._b2) >= 2 * self.c and self._b2:
            self._b2.popitem(last=False)
        return self._replace(protected)

    def _replace(self, protected: frozenset[CacheKey]) -> Victim:
        t1 = len(self._t1)
        from_t1 = (t1 > 0 and (t1 > self.p or (t1 == self.p and self._ghost_hit == 2))) or not self._t2
        order = ((self._t1, 1), (self._t2, 2)) if from_t1 else ((self._t2, 2), (self._t1, 1))
        for queue, ghost in order:
            key = self._oldest(queue, protected)
            if key is not None:
                self._pending = (key, ghost)
                return Victim(key, 0.0, f"arc: oldest of T{ghost} (p={self.p:.1f})")
        raise LookupError("arc: every resident block is pinned")

    @staticmethod
    def _oldest(queue: OrderedDict[CacheKey, None], protected: frozenset[CacheKey]) -> CacheKey | None:
        for key in queue:
            if key not in protected:
                return key
        return None
