"""A `Pool` with what a real switch pool adds: slot numbers, admission generations and pins with a TTL.

`policies.pool.Pool` decides (admission, victim choice, newcomer-versus-victim, recycling) for the controller as
for the evaluator; `SlotPool` drives it and keeps, beside it, the facts a switch needs:

* **slots**: which register index each resident key occupies (a bijection, lowest free index first), so a
  newcomer takes its victim's slot and the index entry is swapped in one write;
* **generations**: every placement of a key in a slot gets a fresh, strictly increasing, nonzero 32-bit number
  (docs/dataplane.md, *Coherence*: a slot is served only under the generation it was filled for, so an old admission's bytes can
  never be served to a new one); `GenerationCounter` makes them durable through a reserve callback;
* **pins** hard or soft (TTL), which the pool's eviction may never choose, plus short holds (a prefix chain's
  ancestors while its block is placed).

Keys are any hashable (the controller's `kvpool.keys.ChunkKey`); time is seconds, given by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from policies.base import (
    AccessObserver,
    AdmissionPolicy,
    BlockInfo,
    EvictionPolicy,
    Recycle,
    RecyclingPolicy,
    Tier,
    Victim,
)
from policies.pool import Pool

K = TypeVar("K", bound=Hashable)
"""The key type a pool is keyed by (the controller: `kvpool.keys.ChunkKey`)."""

GENERATION_BITS = 32
"""Width of `set_slot`'s `generation` (bit<32> in the P4 program)."""


# ---- slots -----------------------------------------------------------------------------------------------

class PoolFull(Exception):
    """No free slot: the caller must evict first."""


class SlotMap(Generic[K]):
    """A bijection between occupied slots and keys over `0 ≤ slot < capacity`; lowest free slot first."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"pool capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._by_key: dict[K, int] = {}
        self._by_slot: dict[int, K] = {}
        self._free = list(range(capacity - 1, -1, -1))  # a stack: pop() gives the lowest index

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    @property
    def full(self) -> bool:
        return len(self._by_key) >= self.capacity

    def slot_of(self, key: K) -> int | None:
        return self._by_key.get(key)

    def key_at(self, slot: int) -> K | None:
        return self._by_slot.get(slot)

    def allocate(self, key: K) -> int:
        if key in self._by_key:
            return self._by_key[key]
        if not self._free:
            raise PoolFull(f"all {self.capacity} slots are occupied")
        slot = self._free.pop()
        self._bind(key, slot)
        return slot

    def claim(self, key: K, slot: int) -> None:
        """Bind `key` to a given `slot` (reconciling with what a switch holds); the slot must be free."""
        if not 0 <= slot < self.capacity:
            raise ValueError(f"slot {slot} outside the pool (capacity {self.capacity})")
        if self._by_slot.get(slot) not in (None, key) or self._by_key.get(key, slot) != slot:
            raise ValueError(f"slot {slot} or key {key} is already bound elsewhere")
        if slot in self._free:
            self._free.remove(slot)
        self._bind(key, slot)

    def _bind(self, key: K, slot: int) -> None:
        self._by_key[key] = slot
        self._by_slot[slot] = key

    def release(self, key: K) -> int | None:
        slot = self._by_key.pop(key, None)
        if slot is None:
            return None
        del self._by_slot[slot]
        self._free.append(slot)
        self._free.sort(reverse=True)
        return slot

    def items(self) -> list[tuple[K, int]]:
        return list(self._by_key.items())


# ---- pins ------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Pin(Generic[K]):
    key: K
    expires_at: float | None = None
    """When a soft pin lapses (the caller's clock, seconds); None for a hard pin."""

    @property
    def kind(self) -> str:
        return "hard" if self.expires_at is None else "soft"

    def active(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at


class PinTable(Generic[K]):
    """The current pins by key: a hard pin lasts until unpinned, a soft pin until its TTL runs out."""

    def __init__(self) -> None:
        self._pins: dict[K, Pin[K]] = {}

    def pin(self, key: K, now: float, ttl: float | None = None) -> Pin[K]:
        """Pin `key` hard (ttl None) or soft for `ttl` seconds; a hard pin is never weakened by a soft one."""
        if ttl is not None and ttl <= 0:
            raise ValueError(f"a soft pin needs a positive TTL, got {ttl}")
        current = self._pins.get(key)
        if current is not None and current.expires_at is None and ttl is not None:
            return current
        pin = Pin(key, None if ttl is None else now + ttl)
        self._pins[key] = pin
        return pin

    def restore(self, pin: Pin[K]) -> None:
        self._pins[pin.key] = pin

    def unpin(self, key: K) -> bool:
        return self._pins.pop(key, None) is not None

    def get(self, key: K, now: float) -> Pin[K] | None:
        pin = self._pins.get(key)
        return pin if pin is not None and pin.active(now) else None

    def expire(self, now: float) -> list[Pin[K]]:
        """Drop the soft pins whose TTL ran out and return them."""
        lapsed = [p for p in self._pins.values() if not p.active(now)]
        for pin in lapsed:
            del self._pins[pin.key]
        return lapsed

    def protected(self, now: float) -> frozenset[K]:
        return frozenset(k for k, p in self._pins.items() if p.active(now))

    def all(self) -> list[Pin[K]]:
        return list(self._pins.values())


# ---- generations -----------------------------------------------------------------------------------------

class GenerationCounter:
    """Strictly increasing nonzero admission generations that stay increasing across restarts.

    Numbers are handed out from blocks: before the first number of a block is used, `reserve(ceiling)` is
    called with the block's end, and the caller persists it; a restarted driver starts at the persisted
    ceiling, so no number is ever given twice even after a crash (at most a block is skipped).
    """

    def __init__(self, start: int = 1, reserve: Callable[[int], None] | None = None, block: int = 1024) -> None:
        if not 0 < start < 1 << GENERATION_BITS:
            raise ValueError(f"generation start {start} outside 1..2^{GENERATION_BITS}-1")
        self._next = start
        self._ceiling = start
        self._reserve = reserve
        self._block = block

    @property
    def peek(self) -> int:
        """The number `next()` will return."""
        return self._next

    def next(self) -> int:
        generation = self._next
        if generation >= 1 << GENERATION_BITS:
            raise OverflowError("admission generations exhausted (2^32 admissions): reset the switch and the state")
        if generation >= self._ceiling:
            self._ceiling = min(generation + self._block, 1 << GENERATION_BITS)
            if self._reserve is not None:
                self._reserve(self._ceiling)
        self._next = generation + 1
        return generation

    def above(self, seen: int) -> None:
        """Never hand out `seen` or anything below it again (a generation found on a switch)."""
        if seen >= self._next:
            self._next = seen + 1


# ---- the pool --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Evicted(Generic[K]):
    """A key that left its slot, with the eviction's reason and residual and the recycling decision."""

    key: K
    slot: int
    victim: Victim
    recycle: Recycle


@dataclass(frozen=True, slots=True)
class Placement(Generic[K]):
    """What `SlotPool.place` did: the newcomer's slot and generation (None: refused, see `refused`) and the
    keys that made room for it."""

    key: K
    slot: int | None
    generation: int
    evicted: tuple[Evicted[K], ...] = ()
    refused: str | None = None


class PinnedError(Exception):
    """An explicit eviction of a pinned key, or a placement every slot of which is pinned."""


class _RecordingRecycler:
    """Passes `decide` through to the recycling policy and keeps each (victim, outcome) for `SlotPool`."""

    def __init__(self, inner: RecyclingPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.decided: list[tuple[Victim, Recycle]] = []

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle:
        outcome = self.inner.decide(victim, from_tier, now)
        self.decided.append((victim, outcome))
        return outcome


def _key_of(block: BlockInfo) -> K:  # type: ignore[type-var]
    """A block's key in the pool's key type (Pool and the policies see it as a plain hashable)."""
    return block.key  # type: ignore[return-value]


class SlotPool(Generic[K]):
    """One switch pool: `Pool`'s decisions over numbered slots, with generations and pins."""

    def __init__(self, capacity: int, admission: AdmissionPolicy, eviction: EvictionPolicy,
                 recycling: RecyclingPolicy, generations: GenerationCounter | None = None,
                 tier: Tier = Tier.SWITCH) -> None:
        self.slots: SlotMap[K] = SlotMap(capacity)
        self.pins: PinTable[K] = PinTable()
        self.generations = generations or GenerationCounter()
        self.tier = tier
        self._generation: dict[K, int] = {}
        self._held: set[K] = set()
        """Keys pinned in `pool` on behalf of `pins` (a Pool pin needs a resident key)."""
        self.pool = self._new_pool(admission, eviction, recycling)

    def _new_pool(self, admission: AdmissionPolicy, eviction: EvictionPolicy, recycling: RecyclingPolicy) -> Pool:
        self._recycler = _RecordingRecycler(recycling)
        self._observe = eviction.record if isinstance(eviction, AccessObserver) else None  # checked once: slow
        return Pool(self.slots.capacity, admission, eviction, self._recycler, tier=self.tier, log_limit=64)

    # ---- views
    @property
    def capacity(self) -> int:
        return self.slots.capacity

    @property
    def admission(self) -> AdmissionPolicy:
        return self.pool.admission

    @property
    def eviction(self) -> EvictionPolicy:
        return self.pool.eviction

    @property
    def recycling(self) -> RecyclingPolicy:
        return self._recycler.inner

    @property
    def full(self) -> bool:
        return self.slots.full

    def __contains__(self, key: object) -> bool:
        return key in self.slots

    def __len__(self) -> int:
        return len(self.slots)

    def generation_of(self, key: K) -> int | None:
        return self._generation.get(key)

    # ---- accesses
    def record(self, block: BlockInfo, now: float, times: int = 1) -> None:
        """Accesses that are not pool reads (a hot-key digest, a client's INSERT): the admission policy and an
        observing eviction policy see them; nothing is placed."""
        observe, record = self._observe, self.pool.admission.record
        for _ in range(max(1, times)):
            record(block, now)
            if observe is not None:
                observe(block, now)

    def hit(self, block: BlockInfo, now: float, times: int = 1) -> None:
        """`times` reads of a resident block served from its slot (the switch's hit counter grew)."""
        for _ in range(max(1, times)):
            if not self.pool.access(block, now):
                raise KeyError(f"{block.key!r} is not resident")

    # ---- placement
    def place(self, block: BlockInfo, now: float, compare: bool = True,
              hold: Iterable[K] = ()) -> Placement[K]:
        """Give `block` a slot and a fresh generation, evicting `Pool`'s victim when full (the caller asked
        admission already). `compare=False` lets it displace any unpinned victim (a pin); `hold` are resident
        keys that may not be the victim this time (its prefix chain)."""
        key: K = _key_of(block)
        if key in self.slots:
            slot = self.slots.slot_of(key)
            assert slot is not None
            return Placement(key, slot, self._generation[key])
        self.expire(now)
        held = [k for k in hold if k in self.pool and k != key]
        for k in held:
            self.pool.pin(k)
        bypassed = self.pool.stats["bypassed"]
        self._recycler.decided.clear()
        try:
            placed = self.pool.place(block, now, compare)
        finally:
            for k in held:
                self.pool.unpin(k)
        evicted = tuple(self._release(victim, outcome) for victim, outcome in self._recycler.decided)
        self._recycler.decided.clear()
        if not placed:
            why = "refused"
            if self.pool.stats["bypassed"] > bypassed and self.pool.events:
                why = self.pool.events[-1].reason
            return Placement(key, None, 0, evicted, why)
        slot = self.slots.allocate(key)
        generation = self.generations.next()
        self._generation[key] = generation
        self._hold_if_pinned(key, now)
        return Placement(key, slot, generation, evicted)

    def regenerate(self, key: K) -> int:
        """A fresh generation for a resident key whose entry is re-installed (its slot's bytes become unservable
        until refilled under the new one)."""
        if key not in self.slots:
            raise KeyError(f"{key!r} is not resident")
        generation = self.generations.next()
        self._generation[key] = generation
        return generation

    def claim(self, block: BlockInfo, slot: int, generation: int, now: float) -> None:
        """Take `block` at a given `slot` with the generation its index entry carries (restore after a restart)."""
        key: K = _key_of(block)
        self.slots.claim(key, slot)
        if key not in self.pool and not self.pool.place(block, now, compare=False):
            self.slots.release(key)
            raise PinnedError(f"cannot claim {key!r}: the pool is full of pinned keys")
        self._recycler.decided.clear()
        self._generation[key] = generation
        self.generations.above(generation)
        self._hold_if_pinned(key, now)

    def cancel(self, key: K) -> None:
        """Undo a placement whose index write failed: the key leaves without recycling."""
        self._unhold(key)
        self.pool.evict(key, "index write failed")
        self.slots.release(key)
        self._generation.pop(key, None)

    def evict(self, key: K, now: float, reason: str, residual: float | None = None) -> Evicted[K]:
        """An explicit eviction (operator, invalidation), recycled; pinned keys must be unpinned first."""
        if key not in self.slots:
            raise KeyError(f"{key!r} is not in the pool")
        self.expire(now)
        if self.pins.get(key, now) is not None:
            raise PinnedError(f"{key!r} is pinned; unpin it first")
        if residual is None:
            residual = self.pool.admission.score(BlockInfo(key), now)
        self.pool.evict(key, reason)
        victim = Victim(key, residual, reason)
        return self._release(victim, self.recycling.decide(victim, self.tier, now))

    def _release(self, victim: Victim, outcome: Recycle) -> Evicted[K]:
        key: K = victim.key  # type: ignore[assignment]  # Pool names its residents, all of type K
        self._unhold(key)
        slot = self.slots.release(key)
        assert slot is not None, f"the pool evicted {key!r}, which had no slot"
        self._generation.pop(key, None)
        return Evicted(key, slot, victim, outcome)

    # ---- pins
    def pin(self, key: K, now: float, ttl: float | None = None) -> Pin[K]:
        """Pin a resident key hard (ttl None) or soft; place it first (`place(..., compare=False)`)."""
        if key not in self.slots:
            raise KeyError(f"cannot pin {key!r}: not resident")
        pin = self.pins.pin(key, now, ttl)
        self._hold_if_pinned(key, now)
        return pin

    def restore_pin(self, pin: Pin[K]) -> None:
        """A pin saved before a restart; it protects its key once the key is resident again."""
        self.pins.restore(pin)
        if pin.key in self.pool:
            self._hold(pin.key)

    def unpin(self, key: K) -> bool:
        self._unhold(key)
        return self.pins.unpin(key)

    def expire(self, now: float) -> list[Pin[K]]:
        """Drop the soft pins whose TTL ran out; their keys become evictable."""
        lapsed = self.pins.expire(now)
        for pin in lapsed:
            self._unhold(pin.key)
        return lapsed

    def _hold_if_pinned(self, key: K, now: float) -> None:
        if self.pins.get(key, now) is not None:
            self._hold(key)

    def _hold(self, key: K) -> None:
        if key not in self._held and key in self.pool:
            self.pool.pin(key)
            self._held.add(key)

    def _unhold(self, key: K) -> None:
        if key in self._held:
            self._held.discard(key)
            self.pool.unpin(key)

    # ---- policies
    def replace_policies(self, admission: AdmissionPolicy, eviction: EvictionPolicy, recycling: RecyclingPolicy,
                         blocks: Mapping[K, BlockInfo], now: float) -> None:
        """Run new policies over the same residents (told about each, in slot order) and the same pins."""
        pool = self._new_pool(admission, eviction, recycling)
        for key, _ in sorted(self.slots.items(), key=lambda kv: kv[1]):
            block = blocks.get(key) or BlockInfo(key)
            admission.record(block, now)
            pool.place(block, now, compare=False)
        self.pool = pool
        held, self._held = self._held, set()
        for key in held:
            self._hold_if_pinned(key, now)
