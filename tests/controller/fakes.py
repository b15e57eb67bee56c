"""Unit-level stand-ins: a dict-backed data plane, a storage node that records TIER_MOVEs, and tiny policies.

The policies here are deliberately simple and deterministic (count-based admission, lowest-score eviction,
threshold recycling) so the tests can state exactly which chunk must be admitted, evicted, demoted or dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.dataplane import HitCounts, IndexSwap, swap_one_by_one
from controller.pool import Policies
from controller.tiers import StoredChunk
from kvpool.keys import ChunkKey
from policies.base import BlockInfo, Recycle, Tier, Victim


class FakeDataPlane:
    """The switch pool as two dicts; `hits` is the per-slot counter tests bump to simulate switch hits."""

    def __init__(self, capacity: int = 4) -> None:
        self.capacity = capacity
        self.index: dict[ChunkKey, int] = {}
        self.hits: dict[int, int] = {}
        self.writes: list[tuple[int, ChunkKey, int, bytes]] = []
        self.chunk_counts: list[int] = []
        """chunk_count of each SLOT_WRITE in `writes`."""
        self.min_versions: dict[ChunkKey, int] = {}
        self.generations: dict[ChunkKey, int] = {}
        self.installs: list[tuple[ChunkKey, int, int]] = []
        """(key, slot, generation) of every install, in order."""
        self.fail_install = False

    def install(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int = 0) -> None:
        if self.fail_install:
            raise RuntimeError("switch unavailable")
        self.index[key] = slot  # an existing entry is modified, as P4DataPlane.install does
        self.min_versions[key] = min_version
        self.generations[key] = generation
        self.installs.append((key, slot, generation))

    def installed_entries(self) -> dict[ChunkKey, tuple[int, int]]:
        return {key: (slot, self.generations.get(key, 0)) for key, slot in self.index.items()}

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0,
             generation: int = 0) -> IndexSwap:
        return swap_one_by_one(self, victim, key, slot, min_version, generation)

    def remove(self, key: ChunkKey) -> None:
        self.index.pop(key)
        self.generations.pop(key, None)

    def installed(self) -> dict[ChunkKey, int]:
        return dict(self.index)

    def write_slot(self, slot: int, key: ChunkKey, version: int, value: bytes, chunk_count: int) -> None:
        self.writes.append((slot, key, version, value))
        self.chunk_counts.append(chunk_count)

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        wanted = range(self.capacity) if slots is None else slots
        return {s: self.hits.get(s, 0) for s in wanted}

    def hit_counts(self) -> HitCounts:
        return HitCounts(switch=sum(self.hits.values()))

    def hit(self, key: ChunkKey, n: int = 1) -> None:
        slot = self.index[key]
        self.hits[slot] = self.hits.get(slot, 0) + n


@dataclass
class FakeStorage:
    moves: list[tuple[ChunkKey, Tier, float]] = field(default_factory=list)
    accept: bool = True
    stored: dict[ChunkKey, StoredChunk] = field(default_factory=dict)
    """What the storage node holds (what `fetch` returns)."""
    fetches: list[ChunkKey] = field(default_factory=list)

    def fetch(self, key: ChunkKey) -> StoredChunk | None:
        self.fetches.append(key)
        return self.stored.get(key)

    def tier_move(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        self.moves.append((key, tier, residual))
        return self.accept

    def stat(self, key: ChunkKey) -> int | None:
        return 0


class CountAdmission:
    """Admit after `threshold` accesses; score = accesses, in the unit of LowestScoreEviction's residual."""

    name = "count"
    compares_residual = True

    def __init__(self, threshold: int = 3) -> None:
        self.threshold = threshold
        self.counts: dict = {}

    def record(self, block: BlockInfo, now: float) -> None:
        self.counts[block.key] = self.counts.get(block.key, 0) + 1

    def admit(self, block: BlockInfo, now: float) -> bool:
        return self.counts.get(block.key, 0) >= self.threshold

    def score(self, block: BlockInfo, now: float) -> float:
        return float(self.counts.get(block.key, 0))


class LowestScoreEviction:
    """Victim = resident with the fewest hits (ties: earliest inserted); residual = its hits."""

    name = "lowest"

    def __init__(self) -> None:
        self.residents: dict = {}

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self.residents[block.key] = 0

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self.residents[block.key] += 1

    def on_remove(self, key) -> None:
        self.residents.pop(key, None)

    def victim(self, now: float, protected: frozenset = frozenset()) -> Victim:
        choices = [(hits, k) for k, hits in self.residents.items() if k not in protected]
        if not choices:
            raise LookupError("no evictable resident")
        hits, key = min(choices, key=lambda c: c[0])
        return Victim(key, float(hits), f"fewest hits ({hits})")


class ThresholdRecycling:
    """Demote to storage DRAM when residual ≥ `threshold`, else drop."""

    name = "threshold"

    def __init__(self, threshold: float = 2.0) -> None:
        self.threshold = threshold

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle:
        if victim.residual >= self.threshold:
            return Recycle(Tier.STORAGE_DRAM, f"residual {victim.residual} ≥ {self.threshold}")
        return Recycle(Tier.ABSENT, f"residual {victim.residual} < {self.threshold}")


def make_policies(threshold: int = 3, recycle_at: float = 2.0) -> Policies:
    return Policies(CountAdmission(threshold), LowestScoreEviction(), ThresholdRecycling(recycle_at))


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
