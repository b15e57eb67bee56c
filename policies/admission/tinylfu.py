"""TinyLFU admission (Einziger, Friedman & Manes, ACM ToS 2017): a newcomer must be more popular than its victim.

Popularity is estimated in little memory: a count-min sketch of 4-bit-style counters, halved every
`sample_size` recorded reads so that it follows the recent past, in front of which a doorkeeper Bloom
filter absorbs the first read of each block (most blocks are read once and never reach the sketch).
The estimate is doorkeeper bit + sketch minimum. The pool compares the newcomer's estimate with the
victim's (`compares_victim`) and admits only a strictly more popular newcomer, as TinyLFU does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params


@dataclass(frozen=True)
class TinyLFUParams(Params):
    """Sketch geometry and ageing."""

    width: int = 4096
    """Counters per sketch row."""
    depth: int = 4
    """Sketch rows (independent hashes)."""
    sample_size: int = 40_960
    """Recorded reads between halvings (the 'W' of the paper, 10× the width by default)."""
    counter_max: int = 15
    """Counter ceiling (4-bit counters in the paper)."""
    doorkeeper_bits: int = 1 << 16
    """Bits of the doorkeeper Bloom filter (cleared at each halving)."""
    seed: int = 0
    """Hash seed, so runs are reproducible."""


class TinyLFUAdmission:
    """Count-min sketch with periodic halving, behind a doorkeeper."""

    name = "tinylfu"
    compares_victim = True

    def __init__(self, params: TinyLFUParams | None = None) -> None:
        self.params = p = params or TinyLFUParams()
        if p.width < 1 or p.depth < 1 or p.sample_size < 1 or p.counter_max < 1 or p.doorkeeper_bits < 8:
            raise ValueError(f"tinylfu: bad parameters {p}")
        self._rows = [[0] * p.width for _ in range(p.depth)]
        self._door = bytearray(p.doorkeeper_bits // 8 + 1)
        self._recorded = 0
        self._key = p.seed.to_bytes(8, "little", signed=True)
        self._slots_of: dict[CacheKey, tuple[tuple[int, ...], int, int]] = {}
        """Memo of `_slots` per key: hashing (blake2b of the key's repr) was most of a replay's time."""

    def _hashes(self, key: CacheKey) -> list[int]:
        digest = hashlib.blake2b(
            repr(key).encode(), digest_size=8 * (self.params.depth + 2), key=self._key
        ).digest()
        return [int.from_bytes(digest[i : i + 8], "little") for i in range(0, len(digest), 8)]

    def _door_bits(self, hashes: list[int]) -> tuple[int, int]:
        bits = self.params.doorkeeper_bits
        return hashes[-2] % bits, hashes[-1] % bits

    def _slots(self, key: CacheKey) -> tuple[tuple[int, ...], int, int]:
        """(counter index in each sketch row, doorkeeper bit a, bit b) of `key`; computed once per key."""
        found = self._slots_of.get(key)
        if found is None:
            hashes = self._hashes(key)
            width = self.params.width
            a, b = self._door_bits(hashes)
            found = (tuple(h % width for h in hashes[: len(self._rows)]), a, b)
            self._slots_of[key] = found
        return found

    def estimate(self, key: CacheKey) -> int:
        """Estimated recent reads of `key`."""
        index, a, b = self._slots(key)
        sketch = min(map(list.__getitem__, self._rows, index))
        door = self._door
        in_door = door[a >> 3] >> (a & 7) & 1 and door[b >> 3] >> (b & 7) & 1
        return sketch + (1 if in_door else 0)

    def record(self, block: BlockInfo, now: float) -> None:
        index, a, b = self._slots(block.key)
        door = self._door
        if door[a >> 3] >> (a & 7) & 1 and door[b >> 3] >> (b & 7) & 1:
            ceiling = self.params.counter_max
            for row, i in zip(self._rows, index, strict=True):
                if row[i] < ceiling:
                    row[i] += 1
        else:
            self._door[a >> 3] |= 1 << (a & 7)
            self._door[b >> 3] |= 1 << (b & 7)
        self._recorded += 1
        if self._recorded >= self.params.sample_size:
            self._age()

    def _age(self) -> None:
        """Halve every counter and clear the doorkeeper: the sketch forgets the distant past."""
        self._recorded = 0
        for row in self._rows:
            row[:] = [c >> 1 for c in row]
        self._door = bytearray(len(self._door))

    def score(self, block: BlockInfo, now: float) -> float:
        return float(self.estimate(block.key))

    def admit(self, block: BlockInfo, now: float) -> bool:
        return True
