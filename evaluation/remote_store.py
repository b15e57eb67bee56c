"""The remote DRAM pool behind the switch: how it keeps and evicts blocks (unbounded, LRU, or Mooncake Store).

Q2 and Q3 ask what the switch pool adds in front of a remote pool, so the remote pool must evict the way the
one a deployment runs does. Mooncake Store's master evicts as its documentation describes
(kvcache-ai/Mooncake, `doc/en/mooncake-store.md`, sections "Eviction Policy", "Lease" and "Soft Pin"):

* an eviction task starts when space usage passes a **high watermark** (95% by default,
  `-eviction_high_watermark_ratio`) or a `PutStart` fails for want of space, and frees a **portion of the
  objects** (5% by default, `-eviction_ratio`);
* it is an **approximate LRU**: objects are ranked by their lease timeout, which every read pushes to
  now + lease TTL, so older leases are colder;
* an object with an **active lease** (granted on every successful `ExistKey`/`GetReplicaList`, 5 s by
  default) is never evicted;
* **soft-pinned** objects (a flag of `Put`, meant for system prompts) are evicted only when nothing else is
  eligible (`allow_evict_soft_pinned_objects`, default true); a pin lapses after `default_kv_soft_pin_ttl`
  (30 min) without access and comes back on the next access.

The parts the documentation leaves open follow the master's code (`mooncake-store/src/master_service.cpp`,
`EvictionThreadFunc` and `BatchEvict`): the ratio actually asked for is max(ratio, usage − watermark + ratio)
with a floor of max(half of it, usage − watermark); the first pass walks the 1,024 metadata shards from a
random one and evicts, per shard, its own oldest objects up to the running quota (the "approximate" in
approximate LRU: a shard's oldest is not the pool's oldest, and with few objects per shard it is far from
it); a second pass evicts the pool-wide oldest
unpinned objects, then the oldest soft-pinned ones, until the floor is met. A block is one object; blocks are
the same size, so usage is objects / capacity.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from policies.base import BlockInfo, CacheKey
from policies.pool import Pool

REMOTE_TIERS = ("mooncake", "lru", "infinite")
"""How the remote DRAM pool evicts: as Mooncake Store's master, exact LRU, or never (keeps every block)."""


@dataclass(frozen=True)
class MooncakeEviction:
    """Mooncake Store master's eviction settings; defaults are its documented ones."""

    high_watermark: float = 0.95
    """`eviction_high_watermark_ratio`: usage above which the eviction task runs."""
    ratio: float = 0.05
    """`eviction_ratio`: share of the objects one eviction task frees."""
    lease_ttl_s: float = 5.0
    """`default_kv_lease_ttl` (5,000 ms): a read protects the object from eviction for this long."""
    soft_pin_ttl_s: float = 30 * 60.0
    """`default_kv_soft_pin_ttl` (30 min): a soft pin lapses after this long without access."""
    allow_evict_soft_pinned: bool = True
    """`allow_evict_soft_pinned_objects`: soft-pinned objects may go when nothing else can."""
    soft_pin_depth: int = 0
    """Blocks at prompt depth < this are put with soft pin (the system-prompt use the docs name); 0 = none,
    as `ReplicateConfig.with_soft_pin` defaults to false."""
    shards: int = 1024
    """`kNumShards` of the master's metadata; the first eviction pass works shard by shard."""
    seed: int = 0
    """Seeds the random first shard of each eviction task (`rand() % shards` in the master)."""

    def __post_init__(self) -> None:
        if not (0 < self.high_watermark <= 1 and 0 < self.ratio <= 1):
            raise ValueError("high_watermark and ratio must be in (0, 1]")
        if self.lease_ttl_s < 0 or self.soft_pin_ttl_s < 0 or self.soft_pin_depth < 0 or self.shards < 1:
            raise ValueError("lease/soft-pin TTLs and soft_pin_depth must be ≥ 0, shards ≥ 1")


@dataclass
class RemoteStats:
    """What the remote pool did besides serving reads."""

    puts: int = 0
    evictions: int = 0
    eviction_tasks: int = 0
    rejected_puts: int = 0
    """Puts that found no space (every object leased or pinned): the block is not stored."""


class RemoteTier(Protocol):
    """The remote DRAM pool as the cluster replay sees it."""

    enabled: bool
    stats: RemoteStats

    def read_or_write(self, block: BlockInfo, now: float) -> bool:
        """Read `block`; on a miss it will be prefilled and written here, so it is put."""
        ...

    def refresh(self, block: BlockInfo, now: float) -> bool:
        """A block recycled down from the switch; True if it was not stored any more and is now."""
        ...


class DisabledRemote:
    """No remote pool: every read misses, nothing is stored."""

    enabled = False

    def __init__(self) -> None:
        self.stats = RemoteStats()

    def read_or_write(self, block: BlockInfo, now: float) -> bool:
        return False

    def refresh(self, block: BlockInfo, now: float) -> bool:
        return False


class InfiniteRemote:
    """Keeps every block ever computed (Mooncake's design goal with enough DRAM and SSD)."""

    enabled = True

    def __init__(self) -> None:
        self.stats = RemoteStats()
        self._keys: set = set()

    def read_or_write(self, block: BlockInfo, now: float) -> bool:
        if block.key in self._keys:
            return True
        self._keys.add(block.key)
        self.stats.puts += 1
        return False

    def refresh(self, block: BlockInfo, now: float) -> bool:
        if block.key in self._keys:
            return False
        self._keys.add(block.key)
        self.stats.puts += 1
        return True


class LruRemote:
    """A bounded pool evicting the least recently used block, one at a time (the textbook baseline)."""

    enabled = True

    def __init__(self, capacity: int, build: Callable[[int], Pool]) -> None:
        self.stats = RemoteStats()
        self._pool = build(capacity)

    def read_or_write(self, block: BlockInfo, now: float) -> bool:
        return not self._put_if_missing(block, now)

    def refresh(self, block: BlockInfo, now: float) -> bool:
        return self._put_if_missing(block, now)

    def _put_if_missing(self, block: BlockInfo, now: float) -> bool:
        """Touch `block`; True if it was missing (and is now put, evicting one block when full)."""
        before = len(self._pool)
        if self._pool.access(block, now):
            return False
        self.stats.puts += 1
        if len(self._pool) == before:
            self.stats.evictions += 1
        return True


@dataclass
class _Object:
    lease_until: float
    """Lease timeout: the eviction rank (older = colder) and, while in the future, protection."""
    pinned: bool = False
    pin_until: float = 0.0


@dataclass
class MooncakeRemote:
    """A bounded pool that evicts as Mooncake Store's master does (see the module docstring)."""

    capacity: int
    settings: MooncakeEviction = field(default_factory=MooncakeEviction)
    enabled: bool = True
    stats: RemoteStats = field(default_factory=RemoteStats)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("a Mooncake pool needs capacity ≥ 1 block")
        self._shards: list[dict[CacheKey, _Object]] = [{} for _ in range(self.settings.shards)]
        self._count = 0
        self._random = random.Random(self.settings.seed)

    # -- client operations ------------------------------------------------------------------------
    def __contains__(self, key: CacheKey) -> bool:
        return key in self._shard(key)

    def __len__(self) -> int:
        return self._count

    def read_or_write(self, block: BlockInfo, now: float) -> bool:
        obj = self._shard(block.key).get(block.key)
        if obj is not None:
            self._grant_lease(obj, now)
            return True
        self._put(block, now)
        return False

    def refresh(self, block: BlockInfo, now: float) -> bool:
        if block.key in self._shard(block.key):
            return False  # Put of an existing key changes nothing (OBJECT_ALREADY_EXISTS)
        return self._put(block, now)

    def leased(self, key: CacheKey, now: float) -> bool:
        obj = self._shard(key).get(key)
        return obj is not None and obj.lease_until > now

    # -- internals --------------------------------------------------------------------------------
    def _shard(self, key: CacheKey) -> dict[CacheKey, _Object]:
        return self._shards[hash(key) % len(self._shards)]

    def _grant_lease(self, obj: _Object, now: float) -> None:
        obj.lease_until = max(obj.lease_until, now + self.settings.lease_ttl_s)
        if obj.pinned:
            obj.pin_until = max(obj.pin_until, now + self.settings.soft_pin_ttl_s)

    def _put(self, block: BlockInfo, now: float) -> bool:
        """PutStart/PutEnd of one block. A full pool fails the put and starts an eviction task (as a failed
        `PutStart` does); the eviction thread's watermark check runs after every put (a 64 MiB put takes
        about as long as the thread's 10 ms tick)."""
        if self._count >= self.capacity:
            self.stats.rejected_puts += 1
            self._evict_if_needed(now, allocation_failed=True)
            return False
        pinned = block.depth < self.settings.soft_pin_depth
        # PutEnd grants no lease (timeout = now): a new object ranks by its write time and is not protected.
        self._shard(block.key)[block.key] = _Object(
            now, pinned, now + self.settings.soft_pin_ttl_s if pinned else 0.0)
        self._count += 1
        self.stats.puts += 1
        self._evict_if_needed(now, allocation_failed=False)
        return True

    def _evict_if_needed(self, now: float, allocation_failed: bool) -> None:
        """`EvictionThreadFunc`: above the watermark, or after a failed allocation, run one eviction task."""
        settings = self.settings
        used = self._count / self.capacity
        if used <= settings.high_watermark and not allocation_failed:
            return
        target = max(settings.ratio, used - settings.high_watermark + settings.ratio)
        floor = max(target * 0.5, used - settings.high_watermark)
        self.batch_evict(target, floor, now)

    def batch_evict(self, target: float, floor: float, now: float) -> int:
        """One eviction task: evict ≈ `target` of the objects, at least `floor` if eligible ones exist."""
        self.stats.eviction_tasks += 1
        settings = self.settings
        n = len(self._shards)
        start = self._random.randrange(n)
        seen = evicted = 0
        unpinned_rest: list[tuple[float, CacheKey]] = []
        pinned_rest: list[tuple[float, CacheKey]] = []
        for i in range(n):
            shard = self._shards[(start + i) % n]
            seen += len(shard)
            quota = math.ceil(seen * target) - evicted
            candidates = []
            for key, obj in shard.items():
                if obj.lease_until > now:
                    continue  # leased: being read
                if obj.pinned and obj.pin_until >= now:
                    if settings.allow_evict_soft_pinned:
                        pinned_rest.append((obj.lease_until, key))
                    continue
                candidates.append((obj.lease_until, key))
            if quota <= 0 or not candidates:
                unpinned_rest += candidates
                continue
            cutoff = sorted(t for t, _ in candidates)[min(quota, len(candidates)) - 1]
            for t, key in candidates:
                if t <= cutoff:
                    del shard[key]
                    evicted += 1
                else:
                    unpinned_rest.append((t, key))
        wanted = min(math.ceil(seen * floor) - evicted, len(unpinned_rest) + len(pinned_rest))
        if wanted > 0:
            unpinned_rest.sort()
            pinned_rest.sort()
            for _, key in (unpinned_rest + pinned_rest)[:wanted]:
                del self._shard(key)[key]
                evicted += 1
        self._count -= evicted
        self.stats.evictions += evicted
        return evicted


def build_remote(kind: str, capacity: int | None, build_lru: Callable[[int], Pool],
                 mooncake: MooncakeEviction | None = None) -> RemoteTier:
    """The remote pool of a cluster: `capacity` None keeps everything, 0 disables it, else `kind` evicts."""
    if capacity == 0:
        return DisabledRemote()
    if capacity is None or kind == "infinite":
        return InfiniteRemote()
    if kind == "lru":
        return LruRemote(capacity, build_lru)
    if kind == "mooncake":
        return MooncakeRemote(capacity, mooncake or MooncakeEviction())
    raise ValueError(f"remote tier must be one of {', '.join(REMOTE_TIERS)}, got {kind!r}")

