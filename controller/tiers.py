"""Where each tracked block chunk lives: switch pool, storage DRAM or disk, inference nodes' HBM or DRAM.

The switch tier follows the slot map; storage tiers change only through TIER_MOVE acknowledged by the storage
node (demote DRAM → disk, promote disk → DRAM, or "keep in DRAM with this residual score"); node tiers are
what clients report (INSERT from a node means that node holds the chunk in HBM).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Protocol

from kvpool.keys import ChunkKey
from policies.base import Tier

log = logging.getLogger(__name__)

STORAGE_TIERS = frozenset({Tier.STORAGE_DRAM, Tier.STORAGE_DISK})
NODE_TIERS = frozenset({Tier.NODE_HBM, Tier.NODE_DRAM})


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as the storage node holds it (its GET_REPLY): the only bytes the controller writes into a slot."""

    version: int
    chunk_count: int
    """Chunks of the whole block (a whole-block read of the slot's copy needs the real count)."""
    value: bytes
    """The meaningful bytes (value_len of them)."""


class StorageNode(Protocol):
    """What the controller asks of a storage node (kvpool/server.py answers these over UDP)."""

    def tier_move(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        """Move/keep the chunk in `tier` (DRAM or disk) with `residual` score; True when acknowledged OK."""
        ...

    def stat(self, key: ChunkKey) -> int | None:
        """GETs the node served for the chunk, None when it did not answer."""
        ...

    def fetch(self, key: ChunkKey) -> StoredChunk | None:
        """GET the chunk from the storage node: what it holds, None when it has nothing or did not answer."""
        ...


def bitmap(tiers: frozenset[Tier] | set[Tier]) -> int:
    """The wire tier bitmap (bit t set for tier t), as INSERT_ACK and LOOKUP_META_REPLY carry it."""
    return sum(1 << int(t) for t in tiers if t != Tier.ABSENT)


class TierMap:
    """Tier placement per chunk; node tiers remember which hosts reported them."""

    def __init__(self) -> None:
        self._tiers: dict[ChunkKey, set[Tier]] = defaultdict(set)
        self._holders: dict[tuple[ChunkKey, Tier], set[str]] = defaultdict(set)

    def tiers(self, key: ChunkKey) -> frozenset[Tier]:
        return frozenset(self._tiers.get(key, ()))

    def bitmap(self, key: ChunkKey) -> int:
        return bitmap(self.tiers(key))

    def add(self, key: ChunkKey, tier: Tier) -> None:
        if tier in STORAGE_TIERS:  # a storage node keeps one copy, in DRAM or on disk
            self._tiers[key] -= STORAGE_TIERS
        self._tiers[key].add(tier)

    def remove(self, key: ChunkKey, tier: Tier) -> None:
        self._tiers.get(key, set()).discard(tier)

    def report_node(self, key: ChunkKey, host: str, tier: Tier) -> None:
        """Host `host` holds the chunk in its HBM or DRAM."""
        if tier not in NODE_TIERS:
            raise ValueError(f"{tier.name} is not a node tier")
        self._holders[(key, tier)].add(host)
        self._tiers[key].add(tier)

    def holders(self, key: ChunkKey, tier: Tier) -> frozenset[str]:
        return frozenset(self._holders.get((key, tier), ()))

    def storage_tier(self, key: ChunkKey) -> Tier:
        found = self._tiers.get(key, set()) & STORAGE_TIERS
        return next(iter(found)) if found else Tier.ABSENT

    def forget(self, key: ChunkKey) -> None:
        self._tiers.pop(key, None)
        for tier in NODE_TIERS:
            self._holders.pop((key, tier), None)

    def counts(self) -> dict[str, int]:
        """Chunks per tier, for metrics."""
        totals = {t.name: 0 for t in Tier if t != Tier.ABSENT}
        for tiers in self._tiers.values():
            for tier in tiers:
                totals[tier.name] += 1
        return totals


class TierMover:
    """Moves chunks between the storage node's DRAM and disk through TIER_MOVE, keeping the TierMap true."""

    def __init__(self, tiers: TierMap, storage: StorageNode | None) -> None:
        self.tiers = tiers
        self.storage = storage

    def ask(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        """TIER_MOVE only (a network round trip; the TierMap is left to the caller): True when acknowledged."""
        if tier not in STORAGE_TIERS:
            raise ValueError(f"TIER_MOVE targets storage DRAM or disk, not {tier.name}")
        if self.storage is None:
            log.warning("no storage node configured: %s stays where it is", key)
            return False
        if not self.storage.tier_move(key, tier, residual):
            log.warning("storage node refused or did not answer TIER_MOVE %s → %s", key, tier.name)
            return False
        return True

    def move(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        """Ask the storage node to hold `key` in `tier`; the map changes only when the node acknowledges."""
        if not self.ask(key, tier, residual):
            return False
        self.tiers.add(key, tier)
        return True

    def demote(self, key: ChunkKey, residual: float) -> bool:
        """Keep an evicted chunk in storage DRAM with its residual value (recycling's 'demote')."""
        return self.move(key, Tier.STORAGE_DRAM, residual)

    def to_disk(self, key: ChunkKey) -> bool:
        return self.move(key, Tier.STORAGE_DISK)

    def fetch(self, key: ChunkKey) -> StoredChunk | None:
        """What the storage node holds for `key` (None without a storage node, or when it has nothing)."""
        return None if self.storage is None else self.storage.fetch(key)

    def promote(self, key: ChunkKey) -> bool:
        """Bring a chunk back from storage disk to DRAM (before admitting it to the switch, for instance)."""
        return self.move(key, Tier.STORAGE_DRAM)
