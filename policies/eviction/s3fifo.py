"""S3-FIFO (Yang et al., SOSP'23): a small probationary FIFO, a main FIFO with a 2-bit clock, a ghost FIFO.

Follows libCacheSim's `S3FIFO` (S3FIFO.c) step for step, so the differential test can demand equal hit
counts: small = ⌊ratio·capacity⌋ slots, ghost = ⌊0.9·capacity⌋ keys; a block that was read at least
`move_to_main_threshold` times in the small queue moves to main when it reaches the head, others leave
and their key goes to the ghost; a missed block whose key is in the ghost enters main directly; main
reinserts read blocks with their count decremented (capped at 3). Until the first eviction, blocks that
find the small queue full go to main (libCacheSim's "has_evicted" rule).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim


@dataclass(frozen=True)
class S3FIFOParams(Params):
    """Queue sizes as fractions of the pool (libCacheSim's defaults)."""

    small_size_ratio: float = 0.1
    """Share of the slots given to the small (probationary) FIFO."""
    ghost_size_ratio: float = 0.9
    """Ghost FIFO length (keys only, no data) as a share of the slot count."""
    move_to_main_threshold: int = 2
    """Reads in the small FIFO that earn a block a place in main."""


class S3FIFOEviction:
    """Three FIFOs; `victim` may promote blocks (metadata only) before naming the block to drop."""

    name = "s3fifo"

    def __init__(self, capacity_blocks: int, params: S3FIFOParams | None = None) -> None:
        self.params = p = params or S3FIFOParams()
        if capacity_blocks < 1:
            raise ValueError(f"s3fifo: capacity_blocks must be ≥ 1, got {capacity_blocks}")
        if not 0 < p.small_size_ratio < 1 or p.ghost_size_ratio < 0 or p.move_to_main_threshold < 1:
            raise ValueError(f"s3fifo: bad parameters {p}")
        self.small_size = max(1, int(capacity_blocks * p.small_size_ratio))
        self.main_size = capacity_blocks - self.small_size
        self.ghost_size = int(capacity_blocks * p.ghost_size_ratio)
        self._small: OrderedDict[CacheKey, int] = OrderedDict()  # key → reads since insertion
        self._main: OrderedDict[CacheKey, int] = OrderedDict()
        self._ghost: OrderedDict[CacheKey, None] = OrderedDict()
        self._hit_on_ghost = False
        self._has_evicted = False
        self._pending: tuple[CacheKey, bool] | None = None  # (victim, came from small)

    def record(self, block: BlockInfo, now: float) -> None:
        """Every access: a miss whose key is in the ghost will enter main."""
        key = block.key
        self._hit_on_ghost = False
        if key in self._small:
            return
        if self._ghost.pop(key, False) is None:
            self._hit_on_ghost = True

    def on_hit(self, block: BlockInfo, now: float) -> None:
        key = block.key
        if key in self._small:
            self._small[key] += 1
        else:
            self._main[key] += 1

    def on_insert(self, block: BlockInfo, now: float) -> None:
        if self._hit_on_ghost:
            self._hit_on_ghost = False
            self._main[block.key] = 0
        elif not self._has_evicted and len(self._small) >= self.small_size:
            self._main[block.key] = 0
        else:
            self._small[block.key] = 0

    def on_remove(self, key: CacheKey) -> None:
        pending, self._pending = self._pending, None
        if self._small.pop(key, None) is not None:
            if pending == (key, True) and self.ghost_size > 0:
                self._ghost[key] = None
                if len(self._ghost) > self.ghost_size:
                    self._ghost.popitem(last=False)
        else:
            self._main.pop(key, None)

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        self._has_evicted = True
        # Each pass either finds a victim or moves a block (small → main, or main head → main tail);
        # the bound stops a pool whose every block is pinned from spinning forever.
        for _ in range(4 * (len(self._small) + len(self._main)) + 8):
            if len(self._main) > self.main_size or not self._small:
                found = self._from_main(protected)
            else:
                found = self._from_small(protected)
            if found is not None:
                return found
        raise LookupError("s3fifo: every resident block is pinned")

    def _from_small(self, protected: frozenset[CacheKey]) -> Victim | None:
        while self._small:
            key, reads = next(iter(self._small.items()))
            if reads >= self.params.move_to_main_threshold:
                del self._small[key]
                self._main[key] = 0
            elif key in protected:
                self._small.move_to_end(key)
                return None
            else:
                self._pending = (key, True)
                return Victim(key, 0.0, "s3fifo: read too rarely in the small queue")
        return None

    def _from_main(self, protected: frozenset[CacheKey]) -> Victim | None:
        while self._main:
            key, reads = next(iter(self._main.items()))
            if reads >= 1 or key in protected:
                del self._main[key]
                self._main[key] = min(reads, 3) - 1 if reads >= 1 else 0
                if key in protected and reads < 1:
                    return None
                continue
            self._pending = (key, False)
            return Victim(key, 0.0, "s3fifo: not read since its last pass through main")
        return None
