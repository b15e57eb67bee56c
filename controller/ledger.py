"""The controller's slot ledger: what it knows of the chunks it tracks and the slots they hold, behind one lock.

`SlotLedger` is the state `controller.pool.PoolManager` decides on and `controller.hitpoll` and
`controller.reconcile` read and update: the slot pool (`policies.slotpool.SlotPool`), the tracked chunks, their
tiers, the durable state, the decision log, and the data plane they are applied to. Keeping it a separate object
lets the counter poll and the restart reconciliation work on the ledger they are given, not on the PoolManager.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from controller.dataplane import DataPlane, connection_lost
from controller.metrics import Metrics
from controller.overslot import DEFAULT_CAPACITY as OVER_SLOT_CAPACITY
from controller.state import StateStore
from controller.tenants import TenantPolicy
from controller.tiers import TierMap
from kvpool.keys import SLOT_BYTES, ChunkKey
from policies.base import BlockInfo
from policies.slotpool import PinTable, SlotMap, SlotPool

log = logging.getLogger("controller.pool")


@dataclass(frozen=True)
class PoolOptions:
    """Knobs of the decision logic (policies have their own parameters)."""

    max_tracked: int = 200_000
    """Candidates remembered at most; the coldest non-resident ones are forgotten beyond this."""
    client_pin_ttl: float = 60.0
    """Seconds of the soft pin granted to an INSERT with F_PIN."""
    max_chain: int = 64
    """How many ancestors of a block are admitted with it at most (prefix chain)."""
    hit_weight_cap: int = 64
    """At most this many accesses are reported to the policies per slot per counter poll."""
    first_hit_window: float = 1.0
    """Seconds after its admission during which a chunk's slot is in the fast first-hit poll; a later first hit
    is seen by the regular poll instead. Without this bound every admitted chunk never hit stayed in the fast
    poll (every few ms), whose counter Read then grew with the pool and starved INSERT answers."""
    first_hit_max_slots: int = 32
    """At most this many slots, the most recently admitted, per fast first-hit poll (bounds one poll's Read)."""
    tenants: TenantPolicy = field(default_factory=TenantPolicy)
    """Who may INSERT and pin, and the slot quota per tenant."""
    over_slot_blocks: int = OVER_SLOT_CAPACITY
    """Blocks remembered at most as having chunks larger than a slot (controller.overslot: least recently seen
    forgotten first); their chunks are never admitted on a hot digest or an INSERT."""


@dataclass
class Tracked:
    """Soft state of one chunk the controller knows about (a candidate or a resident)."""

    key: ChunkKey
    info: BlockInfo
    first_seen: float
    last_seen: float
    accesses: int = 0
    """Accesses the controller learnt of: digests, INSERTs, switch hits."""
    switch_hits: int = 0
    version: int = 0
    """The newest version the storage node is known to hold (read from it): what the CLI shows."""
    announced: int = 0
    """The newest version a client announced (INSERT): unverified, never used as a bound."""
    chunk_count: int = 0
    """Chunks of its block as the storage node reported them; 0 = not known."""
    score: float = 0.0
    first_digest_at: float | None = None
    last_digest_at: float | None = None
    admitted_at: float | None = None
    first_hit_at: float | None = None
    hit_baseline: int = 0
    """Slot counter value when this chunk took the slot (counters are per slot and cumulative)."""
    stored: bool = False
    """Its current slot is known to have held its value (a switch hit was counted, or the controller filled
    it): only such a chunk is recycled when evicted; an entry that never got a value has nothing to recycle."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One logged decision: what, on which chunk, why."""

    at: float
    action: str
    """admit, refuse, deny, evict, demote, drop, pin, unpin, expire, adopt, reinstall, fill."""
    key: ChunkKey
    reason: str
    slot: int | None = None
    score: float | None = None


FIRST_HIT_SLOWEST_POLL_S = 0.064
"""The fast first-hit poll's longest period (`PendingFirstHits.poll_interval`)."""


class PendingFirstHits:
    """Chunks admitted recently whose first switch hit is not seen yet, and a way to sleep while there are none:
    the fast first-hit poll runs every couple of milliseconds only while this holds something, so an idle
    controller does not wake 500 times a second for nothing (nor at all: a sleeper is woken by an admission or
    by `wake`). Changed under the ledger's lock."""

    def __init__(self) -> None:
        self._keys: set[ChunkKey] = set()
        self._changed = threading.Condition()
        self._woken = False
        self.newest_at: float | None = None
        """When the newest pending chunk was admitted (the ledger's clock)."""

    def add(self, key: ChunkKey, admitted_at: float) -> None:
        with self._changed:
            self._keys.add(key)
            self.newest_at = admitted_at
            self._changed.notify_all()

    def poll_interval(self, now: float, fastest: float) -> float:
        """How long to wait before the next fast poll: `fastest` just after an admission, then a sixteenth of the
        newest pending chunk's age (a first hit is timed to within about 6% of when it came), at most
        `FIRST_HIT_SLOWEST_POLL_S`: a chunk admitted and not read again costs some tens of counter Reads over its
        window, not one every `fastest` seconds."""
        age = 0.0 if self.newest_at is None else max(0.0, now - self.newest_at)
        return min(FIRST_HIT_SLOWEST_POLL_S, max(fastest, age / 16))

    def discard(self, key: ChunkKey) -> None:
        with self._changed:
            self._keys.discard(key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[ChunkKey]:
        with self._changed:
            return iter(list(self._keys))

    def __len__(self) -> int:
        return len(self._keys)

    def wait(self, timeout: float | None) -> bool:
        """Block until a chunk is pending (True at once if one is), at most `timeout` seconds (None: no bound);
        `wake` ends every wait at once from then on (False unless a chunk is pending)."""
        with self._changed:
            self._changed.wait_for(lambda: self._keys or self._woken, timeout)
            return bool(self._keys)

    def wake(self) -> None:
        """End every wait, now and later (the service stops)."""
        with self._changed:
            self._woken = True
            self._changed.notify_all()


class SlotLedger:
    """Tracked chunks, the slot pool and their bookkeeping; every change is made holding `lock`."""

    def __init__(self, dataplane: DataPlane, slotpool: SlotPool[ChunkKey], *, state: StateStore | None,
                 tiers: TierMap, metrics: Metrics, options: PoolOptions, clock: Callable[[], float]) -> None:
        self.dataplane = dataplane
        self.slotpool = slotpool
        self.state = state
        self.tiers = tiers
        self.metrics = metrics
        self.options = options
        self.clock = clock
        self.tracked: dict[ChunkKey, Tracked] = {}
        self.decisions: deque[Decision] = deque(maxlen=10_000)
        self.lock = threading.RLock()
        self.pending_first_hit = PendingFirstHits()
        """Chunks admitted recently whose first switch hit is not seen yet (the fast first-hit poll)."""

    @property
    def slots(self) -> SlotMap[ChunkKey]:
        """Which chunk holds which slot (read-only for callers: change it through the slot pool)."""
        return self.slotpool.slots

    @property
    def pins(self) -> PinTable[ChunkKey]:
        return self.slotpool.pins

    def log_decision(self, action: str, key: ChunkKey, reason: str, slot: int | None = None,
                     score: float | None = None, now: float | None = None) -> Decision:
        decision = Decision(self.clock() if now is None else now, action, key, reason, slot, score)
        self.decisions.append(decision)
        log.info("%s %s%s: %s", action, key, "" if slot is None else f" slot {slot}", reason)
        return decision

    def track(self, key: ChunkKey, now: float, info: BlockInfo | None = None) -> Tracked:
        """The tracked entry of `key` (created as a candidate when new); its last_seen becomes `now`."""
        entry = self.tracked.get(key)
        if entry is None:
            entry = Tracked(key, info or BlockInfo(key, size_bytes=SLOT_BYTES), now, now)
            self.tracked[key] = entry
            if len(self.tracked) > self.options.max_tracked:
                self._forget_coldest()
        elif info is not None:
            entry.info = info
        entry.last_seen = now
        return entry

    def _forget_coldest(self) -> None:
        keep = self.slots
        candidates = [t for t in self.tracked.values() if t.key not in keep and t.key not in self.pending_first_hit]
        candidates.sort(key=lambda t: (t.score, t.last_seen))
        for stale in candidates[: max(1, len(candidates) // 10)]:
            del self.tracked[stale.key]

    def slot_counter(self, slot: int) -> int:
        """The cumulative hit counter of `slot` (0 when it cannot be read: that only blurs hit attribution)."""
        try:
            return self.dataplane.slot_hits([slot]).get(slot, 0)
        except Exception as exc:
            if connection_lost(exc):  # the switch connection reports the outage itself, once
                log.debug("reading slot %d's hit counter failed: %s", slot, exc)
            else:
                log.exception("reading slot %d's hit counter failed", slot)
            return 0

    def sync_occupancy(self) -> None:
        self.metrics.occupancy = len(self.slots)


__all__ = ["Decision", "PoolOptions", "SlotLedger", "Tracked"]
