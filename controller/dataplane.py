"""What the pool's decisions need from a switch, as a small Protocol, independent of P4Runtime.

`controller.p4dataplane.P4RuntimeDataPlane` implements it over P4Runtime with the names of docs/naming.md;
unit tests implement it with a dict. Keeping the seam this narrow is what lets the decision logic
(`controller.pool`) be tested in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kvpool.keys import ChunkKey
from p4rt.errors import P4RuntimeError

CONNECTION_LOST = frozenset({"UNAVAILABLE", "CANCELLED"})
"""gRPC codes that mean the switch went away (not that it refused one entry): the next write fails the same way."""


def connection_lost(exc: BaseException) -> bool:
    """True when `exc`, raised by a data-plane call, is a failure of the connection itself rather than of one
    update: a `P4RuntimeError` whose call ended in a CONNECTION_LOST status with no per-update errors."""
    return isinstance(exc, P4RuntimeError) and exc.status in CONNECTION_LOST and not exc.updates


@dataclass(frozen=True, slots=True)
class SlotContents:
    """A slot as SLOT_READ_REPLY reports it."""

    slot: int
    key: ChunkKey
    valid: bool
    version: int
    value: bytes
    """The meaningful value bytes (value_len of them)."""


@dataclass(frozen=True, slots=True)
class HitCounts:
    """Cumulative GET outcomes the data plane counted (packets)."""

    switch: int = 0
    """GETs the switch answered from its pool."""
    server: int = 0
    """GETs forwarded to the storage node (missed the switch pool)."""
    fills: int = 0
    """Storage replies that filled a slot."""
    digests: int = 0
    """Hot-key digests the data plane sent."""


@dataclass(frozen=True, slots=True)
class IndexSwap:
    """What one batched index change (`DataPlane.swap`) did, update by update."""

    remove_error: Exception | None = None
    """Why the victim's entry could not be deleted (None: deleted, already gone, or no victim)."""
    install_error: Exception | None = None
    """Why the newcomer could not be indexed (None: its entry is on the switch)."""
    counter_reset: bool = False
    """The slot's hit counter was zeroed in the same write: the newcomer's hits count from 0."""


class DataPlane(Protocol):
    """The switch pool seen from the controller: an index (key → slot) and slot contents."""

    capacity: int
    """Number of slots in the pool."""

    def install(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int = 0) -> None:
        """Index `key` at `slot` under admission `generation`; the next storage reply for `key` (version ≥
        min_version) fills the slot, which is served only while the entry carries that generation."""
        ...

    def remove(self, key: ChunkKey) -> None:
        """Drop the index entry of `key`; its slot stops being served at once."""
        ...

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0,
             generation: int = 0) -> IndexSwap:
        """Delete `victim`'s entry (if any) and index `key` at `slot` under `generation`, as one write where the
        target can batch (then the slot's hit counter is zeroed with it); each part fails on its own. Raises
        only when nothing was written (e.g. a key that does not fit the table)."""
        ...

    def installed(self) -> dict[ChunkKey, int]:
        """The index entries the switch holds now (read back), key → slot."""
        ...

    def installed_entries(self) -> dict[ChunkKey, tuple[int, int]]:
        """The index read back with generations: key → (slot, generation)."""
        ...

    def write_slot(self, slot: int, key: ChunkKey, version: int, value: bytes, chunk_count: int) -> None:
        """Fill `slot` directly (SLOT_WRITE packet-out) with what the storage node holds: its version and value
        and the block's real chunk_count; the switch fills under the generation of `key`'s index entry."""
        ...

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        """Cumulative switch hits per slot (indirect counter), for the given slots or all."""
        ...

    def hit_counts(self) -> HitCounts:
        ...


def swap_one_by_one(dataplane: DataPlane, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0,
                    generation: int = 0) -> IndexSwap:
    """`DataPlane.swap` for a data plane that cannot batch: remove, then install; the counter is not reset."""
    removed: Exception | None = None
    if victim is not None:
        try:
            dataplane.remove(victim)
        except Exception as exc:
            removed = exc
    try:
        dataplane.install(key, slot, min_version=min_version, generation=generation)
    except Exception as exc:
        return IndexSwap(removed, exc, False)
    return IndexSwap(removed, None, False)


class MemoryDataPlane:
    """A switch pool in memory: the decision logic without a switch (dry runs, benchmarks' baseline)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.index: dict[ChunkKey, int] = {}
        self.generations: dict[ChunkKey, int] = {}
        self.values: dict[int, tuple[ChunkKey, int, bytes]] = {}

    def install(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int = 0) -> None:
        self.index[key] = slot
        self.generations[key] = generation

    def remove(self, key: ChunkKey) -> None:
        self.index.pop(key, None)
        self.generations.pop(key, None)

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0,
             generation: int = 0) -> IndexSwap:
        return swap_one_by_one(self, victim, key, slot, min_version, generation)

    def installed(self) -> dict[ChunkKey, int]:
        return dict(self.index)

    def installed_entries(self) -> dict[ChunkKey, tuple[int, int]]:
        return {key: (slot, self.generations.get(key, 0)) for key, slot in self.index.items()}

    def write_slot(self, slot: int, key: ChunkKey, version: int, value: bytes, chunk_count: int) -> None:
        self.values[slot] = (key, version, value)

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        return {} if slots is None else dict.fromkeys(slots, 0)

    def hit_counts(self) -> HitCounts:
        return HitCounts()
