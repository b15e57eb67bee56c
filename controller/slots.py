"""The switch pool's slot map: which chunk occupies which register-array index, and which indices are free."""

from __future__ import annotations

from controller.keys import ChunkKey


class PoolFull(Exception):
    """No free slot: the caller must evict first."""


class SlotMap:
    """A bijection between occupied slots and chunk keys over `0 ≤ slot < capacity`; lowest free slot first."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"pool capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._by_key: dict[ChunkKey, int] = {}
        self._by_slot: dict[int, ChunkKey] = {}
        self._free = list(range(capacity - 1, -1, -1))  # a stack: pop() gives the lowest index

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    @property
    def full(self) -> bool:
        return len(self._by_key) >= self.capacity

    def slot_of(self, key: ChunkKey) -> int | None:
        return self._by_key.get(key)

    def key_at(self, slot: int) -> ChunkKey | None:
        return self._by_slot.get(slot)

    def allocate(self, key: ChunkKey) -> int:
        if key in self._by_key:
            return self._by_key[key]
        if not self._free:
            raise PoolFull(f"all {self.capacity} slots are occupied")
        slot = self._free.pop()
        self._bind(key, slot)
        return slot

    def claim(self, key: ChunkKey, slot: int) -> None:
        """Bind `key` to a given `slot` (reconciling with what the switch holds); the slot must be free."""
        if not 0 <= slot < self.capacity:
            raise ValueError(f"slot {slot} outside the pool (capacity {self.capacity})")
        if self._by_slot.get(slot) not in (None, key) or self._by_key.get(key, slot) != slot:
            raise ValueError(f"slot {slot} or key {key} is already bound elsewhere")
        if slot in self._free:
            self._free.remove(slot)
        self._bind(key, slot)

    def _bind(self, key: ChunkKey, slot: int) -> None:
        self._by_key[key] = slot
        self._by_slot[slot] = key

    def release(self, key: ChunkKey) -> int | None:
        slot = self._by_key.pop(key, None)
        if slot is None:
            return None
        del self._by_slot[slot]
        self._free.append(slot)
        self._free.sort(reverse=True)
        return slot

    def items(self) -> list[tuple[ChunkKey, int]]:
        return list(self._by_key.items())
