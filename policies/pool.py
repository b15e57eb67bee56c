"""The one implementation of pool bookkeeping that the controller and the evaluator both drive.

`Pool` keeps the resident set of one tier with a fixed number of slots and asks its three policies the
three questions in order: is this a hit; if not, does admission let the block in; if the pool is full,
which block leaves (eviction), is the newcomer worth more than that victim (only for admission policies
that say they compare: `compares_residual` when their score is in the unit of `Victim.residual`,
`compares_victim` when they rank newcomer and victim by their own score), and where the victim goes
(recycling). What happened is kept as counters and as a bounded log of `PoolEvent`s that the
controller turns into table writes and the evaluator into statistics.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol, runtime_checkable

from policies.base import (
    AccessObserver,
    AdmissionPolicy,
    BlockInfo,
    CacheKey,
    EvictionPolicy,
    Recycle,
    RecyclingPolicy,
    Tier,
    Victim,
)


class PoolEvent(NamedTuple):
    """One change of the resident set: `kind` is admitted, bypassed, evicted, demoted, dropped or prefetched."""

    kind: str
    key: CacheKey
    reason: str
    tier: Tier = Tier.ABSENT
    """For `demoted`: the tier the block goes to."""


@runtime_checkable
class FastOrder(Protocol):
    """Optional extra of an eviction policy whose whole state is one recency-like order of keys (LRU).

    `fast_ops()` returns (touch, insert, pop_victim) working on keys only (pop_victim returns the victim's key
    first in a pair, so that all three can be C-level bound methods): `Pool.access_many` drives them
    directly when nothing else needs to see an access (no-op admission, drop recycling, no log, no pins),
    which is what makes a replay of LRU as fast as libCacheSim's own Python loop.
    """

    def fast_ops(self) -> tuple[Callable[[CacheKey], object], Callable[[CacheKey], object],
                                Callable[[], tuple[CacheKey, object]]]: ...


class Adoption(NamedTuple):
    """A change of the resident set at once: evict `drop` (pinned blocks stay), then prefetch `fetch` while there
    is room (what is already resident, and the block being read now, are skipped)."""

    drop: list[CacheKey]
    fetch: list[BlockInfo]


@runtime_checkable
class Retargeting(Protocol):
    """Optional extra of an eviction policy that may ask the pool to change its resident set at once.

    `target()` is asked after every access is recorded; None means carry on, an `Adoption` means: evict its
    `drop` keys and fill its `fetch` blocks as prefetches from the storage node (counted in `stats["prefetched"]`,
    logged as `prefetched` events). The adaptive pool uses it to adopt (some of) a new leader's cache.
    """

    def target(self) -> Adoption | None: ...


def refusal(
    admission: AdmissionPolicy, score: float, victim: Victim, victim_block: BlockInfo | None, now: float
) -> str | None:
    """Why a newcomer whose admission score is `score` may not displace `victim`, or None if it may.

    The rule `Pool` applies, for drivers that keep their own slots (the controller): an admission
    policy with `compares_residual` (its score is in the unit of `Victim.residual`) needs score ≥
    residual; one with `compares_victim` (TinyLFU) needs a score strictly above the victim's own score
    (`victim_block` is the victim's BlockInfo). Other admission policies never refuse here.
    """
    if getattr(admission, "compares_residual", False) and score < victim.residual:
        return f"worth {score:.3g}, less than victim {victim.key!r} ({victim.residual:.3g})"
    if getattr(admission, "compares_victim", False) and victim_block is not None:
        rival = admission.score(victim_block, now)
        if score <= rival:
            return f"not more popular ({score:g}) than {victim.key!r} ({rival:g})"
    return None


class Pool:
    """A tier's slots: `access` per block reference, `pin`/`unpin` around in-flight reads, `evict` on demand."""

    def __init__(
        self,
        capacity_blocks: int,
        admission: AdmissionPolicy,
        eviction: EvictionPolicy,
        recycling: RecyclingPolicy,
        tier: Tier = Tier.SWITCH,
        log_limit: int | None = 100_000,
    ) -> None:
        """`log_limit` bounds the event log (oldest events fall off); 0 keeps no log, None keeps all."""
        if capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be ≥ 1, got {capacity_blocks}")
        self.capacity = capacity_blocks
        self.admission = admission
        self.eviction = eviction
        self.recycling = recycling
        self.tier = tier
        self.events: deque[PoolEvent] = deque(maxlen=log_limit)
        self._log = log_limit != 0
        self.stats: Counter[str] = Counter()
        self._resident: dict[CacheKey, BlockInfo] = {}
        self._pins: Counter[CacheKey] = Counter()
        self._pinned: frozenset[CacheKey] = frozenset()  # snapshot of the pinned keys, rebuilt on change
        observer = eviction if isinstance(eviction, AccessObserver) else None
        self._observe = observer.record if observer is not None else None
        self._target = eviction.target if isinstance(eviction, Retargeting) else None
        # Optional flags of an admission policy: its score is in the unit of `Victim.residual` (the value
        # policies), or it ranks the newcomer against the victim by its own score (TinyLFU).
        self._compares_residual = bool(getattr(admission, "compares_residual", False))
        self._compares_victim = bool(getattr(admission, "compares_victim", False))
        # The key-only fast path of `access_many`: only when no policy needs to see the blocks themselves.
        self._fast = (
            isinstance(eviction, FastOrder)
            and observer is None
            and getattr(admission, "passive", False)
            and getattr(recycling, "passive", False)
            and not self._log
        )
        # Bound once: a runtime Protocol check and three closures per call cost more than a request's loop.
        self._fast_ops = eviction.fast_ops() if self._fast and isinstance(eviction, FastOrder) else None

    def access_many(self, blocks: Iterable[BlockInfo], now: float) -> list[bool]:
        """`[self.access(b, now) for b in blocks]`, with the same outcome, faster where the policies allow.

        With a `FastOrder` eviction (LRU), a passive admission (`always`) and recycling (`drop`) and no log
        or pins, the loop works on keys and the eviction's order directly; stats are added in bulk.
        """
        if not self._fast or self._pins:
            access = self.access
            return [access(b, now) for b in blocks]
        assert self._fast_ops is not None
        touch, insert, pop_victim = self._fast_ops
        resident = self._resident
        capacity = self.capacity
        hits: list[bool] = []
        append = hits.append
        evicted = 0
        for block in blocks:
            key = block.key
            if key in resident:
                resident[key] = block
                touch(key)
                append(True)
                continue
            if len(resident) >= capacity:
                del resident[pop_victim()[0]]
                evicted += 1
            resident[key] = block
            insert(key)
            append(False)
        stats = self.stats
        hit_count = hits.count(True)
        stats["hits"] += hit_count
        stats["misses"] += len(hits) - hit_count
        stats["admitted"] += len(hits) - hit_count
        stats["evicted"] += evicted
        stats["dropped"] += evicted
        return hits

    # ---------------------------------------------------------------- reads
    def access(self, block: BlockInfo, now: float) -> bool:
        """One reference to `block` at `now` (seconds). Returns True on a hit; a miss may admit the block."""
        self.admission.record(block, now)
        if self._observe is not None:
            self._observe(block, now)
        if self._target is not None:
            wanted = self._target()
            if wanted is not None:
                self._adopt(wanted, now, block.key)
        key = block.key
        if key in self._resident:
            self._resident[key] = block
            self.eviction.on_hit(block, now)
            self.stats["hits"] += 1
            return True
        self.stats["misses"] += 1
        if not self.admission.admit(block, now):
            self._bypass(key, "admission refused")
            return False
        self.place(block, now)
        return False

    def place(self, block: BlockInfo, now: float, compare: bool = True) -> bool:
        """Give a block that is not resident a slot now, evicting (and recycling) victims when full; True if it
        got one. The miss half of `access` once admission said yes, without recording an access: for drivers
        that ask admission themselves (the controller admits into a free slot, and pins). `compare=False` skips
        the newcomer-versus-victim rule (a pin displaces any unpinned victim)."""
        key = block.key
        if len(self._resident) >= self.capacity:
            compares = compare and (self._compares_residual or self._compares_victim)
            score = self.admission.score(block, now) if compares else 0.0
            while len(self._resident) >= self.capacity:
                try:
                    victim = self.eviction.victim(now, self._pinned)
                except LookupError:
                    self._bypass(key, "every resident block is pinned")
                    return False
                if compares:
                    why = refusal(self.admission, score, victim, self._resident[victim.key], now)
                    if why is not None:
                        self._bypass(key, why)
                        return False
                self._remove(victim.key, victim.reason)
                recycle = self.recycling.decide(victim, self.tier, now)
                self._recycled(victim.key, recycle)
        self._resident[key] = block
        self.eviction.on_insert(block, now)
        self.stats["admitted"] += 1
        if self._log:
            self.events.append(PoolEvent("admitted", key, "missed and admitted"))
        return True

    def __contains__(self, key: CacheKey) -> bool:
        return key in self._resident

    def __len__(self) -> int:
        return len(self._resident)

    def resident(self) -> frozenset[CacheKey]:
        """Keys of the blocks now in the pool."""
        return frozenset(self._resident)

    def resident_blocks(self) -> list[BlockInfo]:
        """The blocks now in the pool (as last read), in the order they entered or were last hit."""
        return list(self._resident.values())

    # ---------------------------------------------------------------- control
    def pin(self, key: CacheKey) -> None:
        """Keep a resident block from eviction (e.g. while a read is in flight); pins nest."""
        if key not in self._resident:
            raise KeyError(f"cannot pin {key!r}: not resident")
        self._pins[key] += 1
        self._pinned = frozenset(self._pins)

    def unpin(self, key: CacheKey) -> None:
        """Undo one `pin`."""
        if self._pins[key] <= 0:
            del self._pins[key]
            raise KeyError(f"cannot unpin {key!r}: not pinned")
        self._pins[key] -= 1
        if not self._pins[key]:
            del self._pins[key]
            self._pinned = frozenset(self._pins)

    def pinned(self) -> frozenset[CacheKey]:
        return self._pinned

    def evict(self, key: CacheKey, reason: str = "explicit") -> bool:
        """Remove a block now (invalidation, operator); no recycling. False if it was not resident."""
        if key not in self._resident:
            return False
        if self._pins.get(key):
            raise ValueError(f"cannot evict {key!r}: pinned")
        self._remove(key, reason)
        return True

    # ---------------------------------------------------------------- internals
    def _remove(self, key: CacheKey, reason: str) -> None:
        del self._resident[key]
        self.eviction.on_remove(key)
        self.stats["evicted"] += 1
        if self._log:
            self.events.append(PoolEvent("evicted", key, reason))

    def _adopt(self, adoption: Adoption, now: float, current: CacheKey) -> None:
        """Evict `adoption.drop` (but pins), prefetch `adoption.fetch` while there is room except `current`, the
        block being read now (a prefetch cannot serve the read that triggered it)."""
        for key in adoption.drop:
            if key in self._resident and not self._pins.get(key):
                self._remove(key, "not in the adopted set")
                self.stats["dropped"] += 1
        for block in adoption.fetch:
            if len(self._resident) >= self.capacity:
                break
            if block.key not in self._resident and block.key != current:
                self._resident[block.key] = block
                self.eviction.on_insert(block, now)
                self.stats["prefetched"] += 1
                if self._log:
                    self.events.append(PoolEvent("prefetched", block.key, "adopted set"))

    def _recycled(self, key: CacheKey, recycle: Recycle) -> None:
        kind = "dropped" if recycle.tier is Tier.ABSENT else "demoted"
        self.stats[kind] += 1
        if self._log:
            self.events.append(PoolEvent(kind, key, recycle.reason, recycle.tier))

    def _bypass(self, key: CacheKey, reason: str) -> None:
        self.stats["bypassed"] += 1
        if self._log:
            self.events.append(PoolEvent("bypassed", key, reason))
