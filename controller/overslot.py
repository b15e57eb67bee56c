"""Blocks whose chunks no slot can hold, as their storage node's replies showed (docs/dataplane.md, *Over-slot
replies*).

A GET does not say its block's chunk size (a reader that has not seen the block yet asks chunk 0 slot-sized), so
the data plane's sketch may call such a chunk hot and the controller admit it; the storage node's reply then
passes the switch with the real size, and the switch reports it (`over_slot_digest_t`). The pool drops that
admission and remembers the block here, so hot digests of any of its chunks are ignored from then on.

Bounded: the least recently seen block is forgotten beyond `capacity`; a forgotten block may be admitted again on
its next hot digest, and is remembered again at its next over-slot reply. Thread-safe on its own: the hot-digest
path asks before it takes the pool lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from kvpool.keys import BlockKey

DEFAULT_CAPACITY = 65_536
"""Blocks remembered at most (a few MB): far more than the distinct blocks a pool sees in an epoch of hot keys."""


class OverSlotBlocks:
    """A bounded, least-recently-seen-first set of blocks whose chunks are larger than a slot."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"over-slot block capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._blocks: OrderedDict[BlockKey, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, block: BlockKey) -> bool:
        """Remember `block` (as the most recently seen); True when it was not remembered before."""
        with self._lock:
            known = block in self._blocks
            self._blocks[block] = None
            self._blocks.move_to_end(block)
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)
            return not known

    def seen(self, block: BlockKey) -> bool:
        """True when `block` is remembered; a hit makes it the most recently seen (a block still asked for
        stays remembered)."""
        with self._lock:
            if block not in self._blocks:
                return False
            self._blocks.move_to_end(block)
            return True

    def forget(self, block: BlockKey) -> bool:
        """Drop `block` (its chunks were shown slot-sized since); True when it was remembered."""
        with self._lock:
            if block not in self._blocks:
                return False
            del self._blocks[block]
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._blocks)
