"""The switch pool's decisions: admission, eviction with value recycling, pins, and reconciling after restarts.

`PoolManager` owns the slot map, the tracked chunks (candidates and residents), the pins and the tier map, and
drives three pluggable policies (policies/base.py). It talks to the switch only through the narrow
`DataPlane` protocol and to the storage node through `TierMover`, so the same logic runs against a real switch
and against a dict in unit tests. Every decision is logged with its reason and kept in `decisions`.

Threading: every public method takes `self.lock`; callers are the P4Runtime stream thread (digests,
packet-ins), the API threads and the periodic tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from controller.dataplane import DataPlane
from controller.keys import ChunkKey
from controller.metrics import Metrics
from controller.pins import Pin, PinTable
from controller.slots import PoolFull, SlotMap
from controller.state import StateStore
from controller.tiers import STORAGE_TIERS, TierMap, TierMover
from policies.base import AdmissionPolicy, BlockInfo, EvictionPolicy, RecyclingPolicy, Tier, Victim
from policies.pool import refusal

log = logging.getLogger(__name__)

SLOT_BYTES = 128
"""What one chunk occupies in the switch pool whatever its value_len: one slot of 16 × 64-bit words."""

CONNECTION_LOST = frozenset({"UNAVAILABLE", "CANCELLED"})
"""gRPC codes that mean the switch went away (not that it refused one entry): the next write fails the same way."""


def connection_lost(exc: BaseException) -> bool:
    """True when `exc` is a P4Runtime failure of the connection itself rather than of one update."""
    return getattr(exc, "code", None) in CONNECTION_LOST and not getattr(exc, "updates", ())


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
    value: bytes | None = None
    """The value chunk when a client sent it with INSERT (enables a direct SLOT_WRITE fill)."""
    score: float = 0.0
    first_digest_at: float | None = None
    last_digest_at: float | None = None
    admitted_at: float | None = None
    first_hit_at: float | None = None
    hit_baseline: int = 0
    """Slot counter value when this chunk took the slot (counters are per slot and cumulative)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One logged decision: what, on which chunk, why."""

    at: float
    action: str
    """admit, refuse, evict, demote, drop, pin, unpin, expire, adopt, reinstall."""
    key: ChunkKey
    reason: str
    slot: int | None = None
    score: float | None = None


class SwapOutcome(Protocol):
    """What a batched index change did (controller.p4dataplane.IndexSwap)."""

    @property
    def remove_error(self) -> Exception | None: ...
    @property
    def install_error(self) -> Exception | None: ...
    @property
    def counter_reset(self) -> bool: ...


class IndexSwapper(Protocol):
    """Optional batching capability of a `DataPlane`: evict, reset the slot's counter and admit in one write."""

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0) -> SwapOutcome: ...


class PinError(Exception):
    """A pin or an explicit eviction that cannot be honoured (e.g. every slot is hard-pinned)."""


@dataclass
class Policies:
    """The three policies in force; replaced as a whole by `policy set`."""

    admission: AdmissionPolicy
    eviction: EvictionPolicy
    recycling: RecyclingPolicy
    params: dict[str, dict[str, str]] = field(default_factory=dict)
    """Parameters each was built with, by kind, for `policy show`."""


class PoolManager:
    """Decides which chunks occupy the switch pool."""

    def __init__(
        self,
        dataplane: DataPlane,
        policies: Policies,
        *,
        state: StateStore | None = None,
        mover: TierMover | None = None,
        metrics: Metrics | None = None,
        options: PoolOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dataplane = dataplane
        self.policies = policies
        self.state = state
        self.tiers = mover.tiers if mover is not None else TierMap()
        self.mover = mover if mover is not None else TierMover(self.tiers, None)
        self.metrics = metrics or Metrics()
        self.options = options or PoolOptions()
        self.clock = clock
        self.slots = SlotMap(dataplane.capacity)
        self.pins = PinTable()
        self.tracked: dict[ChunkKey, Tracked] = {}
        self.decisions: deque[Decision] = deque(maxlen=10_000)
        self.lock = threading.RLock()
        self._pending_first_hit: set[ChunkKey] = set()
        self.metrics.capacity = self.slots.capacity

    # ---- bookkeeping -------------------------------------------------------------------------------------

    def _log(self, action: str, key: ChunkKey, reason: str, slot: int | None = None, score: float | None = None,
             now: float | None = None) -> Decision:
        decision = Decision(self.clock() if now is None else now, action, key, reason, slot, score)
        self.decisions.append(decision)
        log.info("%s %s%s: %s", action, key, "" if slot is None else f" slot {slot}", reason)
        return decision

    def _track(self, key: ChunkKey, now: float, info: BlockInfo | None = None) -> Tracked:
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
        candidates = [t for t in self.tracked.values() if t.key not in keep and t.key not in self._pending_first_hit]
        candidates.sort(key=lambda t: (t.score, t.last_seen))
        for stale in candidates[: max(1, len(candidates) // 10)]:
            del self.tracked[stale.key]

    def _access(self, entry: Tracked, now: float, times: int = 1) -> None:
        observe = getattr(self.policies.eviction, "record", None)  # AccessObserver: ARC/S3-FIFO ghosts
        for _ in range(max(1, min(times, self.options.hit_weight_cap))):
            self.policies.admission.record(entry.info, now)
            if observe is not None:
                observe(entry.info, now)
        entry.accesses += times
        entry.score = self.policies.admission.score(entry.info, now)

    def _sync_occupancy(self) -> None:
        self.metrics.occupancy = len(self.slots)

    # ---- client-facing (INSERT, LOOKUP_META) -------------------------------------------------------------

    def offer(
        self,
        key: ChunkKey,
        *,
        depth: int = 0,
        tokens: int = 512,
        parent: ChunkKey | None = None,
        value: bytes | None = None,
        version: int = 0,
        pin: bool = False,
        host: str | None = None,
        now: float | None = None,
    ) -> int:
        """INSERT: register the chunk as a candidate, admit it now if its value warrants; returns the tier bitmap."""
        with self.lock:
            now = self.clock() if now is None else now
            known = self.tracked.get(key)
            if parent is None and known is not None:
                parent = known.info.parent  # another client's INSERT may not know the chain
            info = BlockInfo(key, depth=depth, tokens=tokens, size_bytes=SLOT_BYTES, parent=parent)
            entry = self._track(key, now, info)
            if value is not None and version >= entry.version:
                entry.value = value
            if version > entry.version:
                entry.version = version
                self._bound_version(entry)
            if host is not None:
                self.tiers.report_node(key, host, Tier.NODE_HBM)
            if self.tiers.storage_tier(key) is Tier.ABSENT:
                self.tiers.add(key, Tier.STORAGE_DRAM)  # clients PUT a block to the storage node before announcing it
            self._access(entry, now)
            if pin:
                self._pin_locked(key, self.options.client_pin_ttl, now, reason="client asked (F_PIN)")
            elif key not in self.slots and self.policies.admission.admit(info, now):
                self._admit_chain(key, now, "admission policy on INSERT", "insert")
            elif key in self.slots and entry.value is not None:
                self._fill_directly(entry)
            # An announced value is known current only while its INSERT is handled: a later PUT may pass the
            # switch unseen (key not indexed yet, or a switch restart since), so a kept copy could be stale.
            # Later admissions and a restarted switch are filled by the storage node's next reply instead.
            entry.value = None
            return self.tiers.bitmap(key)

    def lookup(self, key: ChunkKey) -> tuple[int, int]:
        """LOOKUP_META: (tier bitmap, newest known version)."""
        with self.lock:
            entry = self.tracked.get(key)
            return self.tiers.bitmap(key), entry.version if entry else 0

    # ---- data-plane signals ------------------------------------------------------------------------------

    def on_hot_key(self, key: ChunkKey, estimate: int = 1, now: float | None = None) -> int | None:
        """A hot-key digest: the data plane saw `estimate` GET misses of `key` this epoch. Returns its slot if admitted."""
        with self.lock:
            now = self.clock() if now is None else now
            self.metrics.digest(now)
            entry = self._track(key, now)
            if entry.first_digest_at is None:
                entry.first_digest_at = now
            entry.last_digest_at = now
            self._access(entry, now, times=max(1, estimate))
            if key in self.slots:
                return self.slots.slot_of(key)
            if not self.slots.full:
                return self._admit_chain(key, now, f"hot digest (estimate {estimate}), free slot", "hot digest")
            if self.policies.admission.admit(entry.info, now):
                return self._admit_chain(key, now, f"hot digest (estimate {estimate}), admission policy", "hot digest")
            self.metrics.count("refusals", "admission policy")
            self._log("refuse", key, f"admission policy declined (score {entry.score:.3f})", score=entry.score, now=now)
            return None

    def poll_hits(self, now: float | None = None, only_pending: bool = False) -> int:
        """Read per-slot hit counters; feed hits to the policies; time first hits. Returns slots with new hits.

        The counter reads (P4Runtime RPCs) run without the pool lock, so digests and punts are never held up
        by a poll; a slot whose owner changed meanwhile is skipped (its counts may be the old owner's).
        """
        with self.lock:
            if only_pending:
                owners = self._fast_poll_owners(self.clock() if now is None else now)
                if not owners:
                    return 0
            else:
                owners = {s: (k, self.tracked[k].admitted_at) for k, s in self.slots.items() if k in self.tracked}
        counts = self.dataplane.slot_hits(sorted(owners))
        totals = None if only_pending else self.dataplane.hit_counts()
        with self.lock:
            now = self.clock() if now is None else now
            changed = 0
            for slot, total in counts.items():
                key = self.slots.key_at(slot)
                if key is None or slot not in owners or owners[slot][0] != key:
                    continue
                entry = self._track(key, now)
                if entry.admitted_at != owners[slot][1]:
                    continue  # evicted and re-admitted while we were reading
                if total < entry.hit_baseline + entry.switch_hits:  # the switch's counters restarted from zero
                    entry.hit_baseline = -entry.switch_hits
                delta = total - entry.hit_baseline - entry.switch_hits
                if delta <= 0:
                    continue
                changed += 1
                entry.switch_hits += delta
                self._access(entry, now, delta)
                for _ in range(min(delta, self.options.hit_weight_cap)):
                    self.policies.eviction.on_hit(entry.info, now)
                if entry.first_hit_at is None:
                    entry.first_hit_at = now
                    self._pending_first_hit.discard(key)
                    if entry.first_digest_at is not None:
                        self.metrics.latency("hot_to_first_hit", now - entry.first_digest_at)
            if totals is not None:
                self.metrics.hits = totals
            return changed

    def _fast_poll_owners(self, now: float) -> dict[int, tuple[ChunkKey, float | None]]:
        """{slot: (key, admitted_at)} of the fast first-hit poll: chunks admitted within `first_hit_window`,
        the newest `first_hit_max_slots` of them; older ones leave the fast poll for good."""
        horizon = now - self.options.first_hit_window
        recent = []
        for key in list(self._pending_first_hit):
            entry, slot = self.tracked.get(key), self.slots.slot_of(key)
            if entry is None or slot is None or entry.admitted_at is None or entry.admitted_at < horizon:
                self._pending_first_hit.discard(key)  # the regular poll still records its first hit
                continue
            recent.append((entry.admitted_at, slot, key))
        recent.sort(reverse=True)
        return {slot: (key, admitted) for admitted, slot, key in recent[: self.options.first_hit_max_slots]}

    # ---- admission ---------------------------------------------------------------------------------------

    def _admit_chain(self, key: ChunkKey, now: float, reason: str, label: str) -> int | None:
        """Admit `key` after its not-yet-resident ancestors (a block is useless without its prefix)."""
        chain = []
        parent = self.tracked[key].info.parent
        while parent is not None and parent not in self.slots and len(chain) < self.options.max_chain:
            ancestor = self.tracked.get(parent)
            if ancestor is None:
                break
            chain.append(parent)
            parent = ancestor.info.parent
        protected = set(chain) | {key}
        for ancestor in reversed(chain):
            if self._admit_one(ancestor, now, f"prefix of {key}", protected, label="prefix chain") is None:
                break
        return self._admit_one(key, now, reason, protected, label=label)

    def _admit_one(self, key: ChunkKey, now: float, reason: str, protected: set[ChunkKey] | None = None,
                   force: bool = False, label: str = "hot") -> int | None:
        """Give `key` a slot (evicting a less valuable unprotected victim when full) and index it.

        `force` skips the value comparison with the victim (pins); `label` is the metrics label of the reason.
        """
        entry = self._track(key, now)
        if key in self.slots:
            return self.slots.slot_of(key)
        victim = None
        if self.slots.full:
            victim = self._choose_victim(now, frozenset(protected or ()) | self.pins.protected(now))
            if victim is None:
                self.metrics.count("refusals", "pool full of pinned chunks")
                self._log("refuse", key, "pool full and every resident chunk is pinned or protected", now=now)
                return None
            why = None if force else self._refusal(entry, victim, now)
            if why is not None:
                self.metrics.count("refusals", "not worth the victim")
                self._log("refuse", key, why, score=entry.score, now=now)
                return None
            self._evict_locked(victim.key, now, f"make room for {key}: {victim.reason}", victim, label="capacity",
                               delete_entry=False)
        try:
            slot = self.slots.allocate(key)
        except PoolFull:
            if victim is not None:
                self._delete_entry(victim.key)
            return None
        error, counter_reset = self._index(victim.key if victim is not None else None, key, slot, entry.version)
        if error is not None:
            self.slots.release(key)
            self.metrics.count("refusals", "switch write failed")
            self._log("refuse", key, f"index entry write failed: {error}", now=now)
            return None
        if entry.first_digest_at is not None and entry.first_digest_at == entry.last_digest_at:
            self.metrics.latency("hot_to_installed", self.clock() - entry.first_digest_at)
        entry.admitted_at = now
        entry.hit_baseline = 0 if counter_reset else self._slot_counter(slot)
        entry.switch_hits = 0
        entry.first_hit_at = None
        self._pending_first_hit.add(key)
        self.policies.eviction.on_insert(entry.info, now)
        self.tiers.add(key, Tier.SWITCH)
        if self.state is not None:
            self.state.bind_slot(slot, key, now, entry.version)
        self.metrics.count("admissions", label)
        self._log("admit", key, reason, slot=slot, score=entry.score, now=now)
        if entry.value is not None:
            self._fill_directly(entry)
        self._sync_occupancy()
        return slot

    def _refusal(self, entry: Tracked, victim: Victim, now: float) -> str | None:
        """Why the newcomer may not displace `victim` (None: it may): policies.pool's rule, so the controller
        and the evaluator decide alike."""
        victim_entry = self.tracked.get(victim.key)
        victim_block = victim_entry.info if victim_entry is not None else None
        return refusal(self.policies.admission, entry.score, victim, victim_block, now)

    def _index(self, victim: ChunkKey | None, key: ChunkKey, slot: int, version: int) -> tuple[Exception | None, bool]:
        """Index `key` at `slot`, deleting `victim`'s entry first: (why the newcomer failed or None, whether the
        slot's hit counter was zeroed with it). A data plane that can batch (`IndexSwapper`) does all of it in
        one write, counter reset included, so an admission costs one RPC and no counter read."""
        swap = getattr(self.dataplane, "swap", None)
        if swap is None:
            if victim is not None:
                self._delete_entry(victim)
            try:
                self.dataplane.install(key, slot, min_version=version)
            except Exception as exc:
                return exc, False
            return None, False
        try:
            outcome: SwapOutcome = swap(victim, key, slot, version)
        except Exception as exc:  # e.g. a key that does not fit the table: nothing was written
            if victim is not None:
                self._delete_entry(victim)
            return exc, False
        if outcome.remove_error is not None:
            log.warning("deleting the index entry of %s failed (%s); its slot was freed anyway",
                        victim, outcome.remove_error)
        return outcome.install_error, outcome.counter_reset and outcome.install_error is None

    def _delete_entry(self, key: ChunkKey) -> None:
        try:
            self.dataplane.remove(key)
        except Exception as exc:
            log.warning("deleting the index entry of %s failed (%s); freeing its slot anyway", key, exc)

    def _slot_counter(self, slot: int) -> int:
        try:
            return self.dataplane.slot_hits([slot]).get(slot, 0)
        except Exception as exc:  # a counter we cannot read only blurs hit attribution
            if connection_lost(exc):  # the switch connection reports the outage itself, once
                log.debug("reading slot %d's hit counter failed: %s", slot, exc)
            else:
                log.exception("reading slot %d's hit counter failed", slot)
            return 0

    def _bound_version(self, entry: Tracked) -> None:
        """A newer version was announced: raise the index entry's min_version so the switch stops serving an
        older copy (a PUT may have bypassed it: another leaf, or before the key was indexed) and lets the
        storage node's next reply replace it."""
        slot = self.slots.slot_of(entry.key)
        if slot is None:
            return
        try:
            self.dataplane.install(entry.key, slot, min_version=entry.version)
        except Exception as exc:  # the entry keeps its old bound; the next INSERT or resync tries again
            log.warning("raising min_version of %s to %d failed: %s", entry.key, entry.version, exc)

    def _fill_directly(self, entry: Tracked) -> None:
        slot = self.slots.slot_of(entry.key)
        if slot is None or entry.value is None:
            return
        try:
            self.dataplane.write_slot(slot, entry.key, entry.version, entry.value)
        except Exception as exc:  # the next storage reply fills it anyway
            log.warning("SLOT_WRITE of %s into slot %d failed: %s", entry.key, slot, exc)

    def _choose_victim(self, now: float, protected: frozenset[ChunkKey]) -> Victim | None:
        for _ in range(8):  # a policy that names a chunk we no longer hold is re-synchronised and asked again
            try:
                victim = self.policies.eviction.victim(now, protected)
            except (LookupError, ValueError, RuntimeError):
                return None
            if victim is None or victim.key in protected:
                if victim is not None:
                    log.error("eviction policy %s named protected chunk %s", self.policies.eviction.name, victim.key)
                return None
            if victim.key in self.slots:
                return victim
            self.policies.eviction.on_remove(victim.key)
        return None

    # ---- eviction and recycling --------------------------------------------------------------------------

    def _evict_locked(self, key: ChunkKey, now: float, reason: str, victim: Victim | None = None,
                      label: str = "operator", delete_entry: bool = True) -> Decision:
        """Free `key`'s slot; `delete_entry=False` leaves deleting its index entry to the caller's batched
        write (an eviction that makes room for a newcomer)."""
        slot = self.slots.slot_of(key)
        if slot is None:
            raise KeyError(f"{key} is not in the switch pool")
        if delete_entry:
            self._delete_entry(key)
        self.slots.release(key)
        self.policies.eviction.on_remove(key)
        self.tiers.remove(key, Tier.SWITCH)
        self._pending_first_hit.discard(key)
        if self.state is not None:
            self.state.free_slot(slot)
        entry = self._track(key, now)
        entry.admitted_at = None
        residual = victim.residual if victim is not None else self.policies.admission.score(entry.info, now)
        victim = victim or Victim(key, residual, reason)
        self.metrics.count("evictions", label)
        decision = self._log("evict", key, reason, slot=slot, score=residual, now=now)
        self._recycle(victim, now)
        self._sync_occupancy()
        return decision

    def _recycle(self, victim: Victim, now: float) -> None:
        outcome = self.policies.recycling.decide(victim, Tier.SWITCH, now)
        if outcome.tier in STORAGE_TIERS and self.mover.move(victim.key, outcome.tier, victim.residual):
            self.metrics.count("recycled", outcome.tier.name)
            self._log("demote", victim.key, f"to {outcome.tier.name}: {outcome.reason}", score=victim.residual, now=now)
            return
        if outcome.tier in STORAGE_TIERS:
            self.metrics.count("recycled", "ABSENT")
            self._log("drop", victim.key, f"demotion to {outcome.tier.name} failed; {outcome.reason}",
                      score=victim.residual, now=now)
            return
        self.metrics.count("recycled", "ABSENT")
        self._log("drop", victim.key, outcome.reason, score=victim.residual, now=now)

    def evict(self, key: ChunkKey, reason: str = "operator request", now: float | None = None) -> Decision:
        """Explicit eviction (CLI `evict`); a pinned chunk must be unpinned first."""
        with self.lock:
            now = self.clock() if now is None else now
            if self.pins.get(key, now) is not None:
                raise PinError(f"{key} is pinned; unpin it first")
            if key not in self.slots:
                raise KeyError(f"{key} is not in the switch pool")
            return self._evict_locked(key, now, reason)

    # ---- pins --------------------------------------------------------------------------------------------

    def pin(self, key: ChunkKey, ttl: float | None = None, now: float | None = None) -> Pin:
        """Pin hard (ttl None) or soft; the chunk is admitted at once (evicting an unpinned victim if needed)."""
        with self.lock:
            now = self.clock() if now is None else now
            return self._pin_locked(key, ttl, now, "operator request")

    def _pin_locked(self, key: ChunkKey, ttl: float | None, now: float, reason: str) -> Pin:
        self._track(key, now)
        if key not in self.slots and self._admit_one(key, now, f"pinned ({reason})", {key}, force=True, label="pin") is None:
            raise PinError(f"cannot pin {key}: every slot is pinned")
        pin = self.pins.pin(key, now, ttl)
        if self.state is not None:
            self.state.save_pin(pin)
        self._log("pin", key, f"{pin.kind} pin" + ("" if ttl is None else f" for {ttl:g} s") + f": {reason}", now=now)
        return pin

    def unpin(self, key: ChunkKey, now: float | None = None) -> bool:
        with self.lock:
            now = self.clock() if now is None else now
            removed = self.pins.unpin(key)
            if removed:
                if self.state is not None:
                    self.state.drop_pin(key)
                self._log("unpin", key, "operator request", now=now)
            return removed

    # ---- periodic work -----------------------------------------------------------------------------------

    def tick(self, now: float | None = None, poll: bool = True) -> None:
        """Expire soft pins and (when `poll`) read the slot counters; called every second or so."""
        with self.lock:
            now = self.clock() if now is None else now
            for pin in self.pins.expire(now):
                if self.state is not None:
                    self.state.drop_pin(pin.key)
                self._log("expire", pin.key, "soft pin TTL ran out", now=now)
        if poll:
            self.poll_hits(now)  # outside the lock: counter reads are RPCs

    # ---- restart: reconcile with the switch --------------------------------------------------------------

    def restore(self, now: float | None = None) -> dict[str, int]:
        """Load pins and the slot map from SQLite, then reconcile them with the index the switch still holds.

        * in both, same slot: kept (a controller restart changes nothing on the switch);
        * on the switch only: adopted (we learn the slot from the entry);
        * in SQLite only (switch restarted or entry lost): re-installed; the next storage reply refills it;
        * on both with different slots: the switch's entry is replaced by ours.
        """
        with self.lock:
            now = self.clock() if now is None else now
            counts = {"kept": 0, "adopted": 0, "reinstalled": 0, "pins": 0, "dropped": 0, "deferred": 0}
            if self.state is not None:
                for pin in self.state.pins():
                    if pin.active(now):
                        self.pins.restore(pin)
                        counts["pins"] += 1
                    else:
                        self.state.drop_pin(pin.key)
                saved = self.state.slots()
            else:
                saved = {}
            on_switch = self.dataplane.installed()
            wanted = {key: (slot, admitted, version) for slot, (key, admitted, version) in saved.items()}
            lost = False  # the switch went away mid-run: the rest is bound in our map only, for the next resync
            for key, (slot, admitted, _version) in sorted(wanted.items(), key=lambda kv: kv[1][0]):
                have = on_switch.get(key)
                if have == slot:
                    self._bind_existing(key, slot, admitted, now, read_counter=not lost)
                    counts["kept"] += 1
                    continue
                if lost:
                    self._bind_existing(key, slot, admitted, now, read_counter=False)
                    counts["deferred"] += 1
                    continue
                try:
                    if have is not None:
                        self.dataplane.remove(key)
                    self.dataplane.install(key, slot)
                except Exception as exc:
                    if connection_lost(exc):
                        log.warning("switch went away while restoring the index (%s); the remaining entries wait "
                                    "for the next reconnect's resync", exc)
                        lost = True
                        self._bind_existing(key, slot, admitted, now, read_counter=False)
                        counts["deferred"] += 1
                        continue
                    log.warning("re-installing %s at slot %d failed: %s", key, slot, exc)
                    if self.state is not None:
                        self.state.free_slot(slot)
                    counts["dropped"] += 1
                    continue
                self._bind_existing(key, slot, admitted, now)
                self._log("reinstall", key, "in saved state, missing on the switch", slot=slot, now=now)
                counts["reinstalled"] += 1
            for key, slot in on_switch.items():
                if key in wanted or lost:  # adopting needs the switch; the resync removes what we did not adopt
                    continue
                if self.slots.key_at(slot) is not None or not 0 <= slot < self.slots.capacity:
                    self.dataplane.remove(key)  # conflicts with our map: ours wins
                    counts["dropped"] += 1
                    continue
                self._bind_existing(key, slot, now, now)
                if self.state is not None:
                    self.state.bind_slot(slot, key, now)
                self._log("adopt", key, "found on the switch, not in saved state", slot=slot, now=now)
                counts["adopted"] += 1
            for key in list(self.pins.protected(now)):
                if key not in self.slots and not lost:
                    self._admit_one(key, now, "pinned (restored)", {key}, force=True, label="pin")
            self._sync_occupancy()
            return counts

    def _bind_existing(self, key: ChunkKey, slot: int, admitted: float, now: float, read_counter: bool = True) -> None:
        """Take `key` at `slot` in our map; its hit baseline is the slot counter now (0 when not read: a resync
        re-installing it reads it then)."""
        self.slots.claim(key, slot)
        entry = self._track(key, now)
        entry.admitted_at = admitted
        entry.hit_baseline = self._slot_counter(slot) if read_counter else 0
        entry.switch_hits = 0
        self.policies.eviction.on_insert(entry.info, now)
        self.tiers.add(key, Tier.SWITCH)

    def resync(self, now: float | None = None) -> dict[str, int]:
        """After a reconnect: make the switch's index equal to our slot map (a restarted switch gets it all back)."""
        with self.lock:
            now = self.clock() if now is None else now
            on_switch = self.dataplane.installed()
            counts = {"kept": 0, "reinstalled": 0, "removed": 0, "deferred": 0}
            mine = sorted(self.slots.items(), key=lambda kv: kv[1])
            for done, (key, slot) in enumerate(mine):
                have = on_switch.get(key)
                if have == slot:
                    counts["kept"] += 1
                    continue
                entry = self._track(key, now)
                try:
                    if have is not None:
                        self.dataplane.remove(key)
                    self.dataplane.install(key, slot, min_version=entry.version)
                except Exception as exc:
                    if connection_lost(exc):
                        counts["deferred"] = len(mine) - done
                        log.warning("switch went away during the resync (%s); %d entries wait for the next "
                                    "reconnect's resync", exc, counts["deferred"])
                        return counts
                    log.warning("re-installing %s failed: %s", key, exc)
                    continue
                entry.hit_baseline, entry.switch_hits = self._slot_counter(slot), 0
                counts["reinstalled"] += 1
            for key in on_switch:
                if key in self.slots:
                    continue
                try:
                    self.dataplane.remove(key)
                except Exception as exc:
                    if connection_lost(exc):
                        log.warning("switch went away during the resync (%s); stale entries wait for the next "
                                    "reconnect's resync", exc)
                        return counts
                    log.warning("removing the stale index entry of %s failed: %s", key, exc)
                    continue
                counts["removed"] += 1
            if counts["reinstalled"] or counts["removed"]:
                log.info("resynchronised the switch's index: %s", counts)
            return counts

    # ---- views -------------------------------------------------------------------------------------------

    def describe(self, key: ChunkKey, now: float | None = None) -> dict:
        with self.lock:
            now = self.clock() if now is None else now
            entry = self.tracked.get(key)
            if entry is None and key not in self.slots:
                raise KeyError(f"{key} is not tracked")
            pin = self.pins.get(key, now)
            row = {
                "key": str(key),
                "tenant": key.tenant,
                "prefix_hash": f"{key.prefix_hash:016x}",
                "chunk": key.chunk,
                "slot": self.slots.slot_of(key),
                "hits": entry.switch_hits if entry else 0,
                "accesses": entry.accesses if entry else 0,
                "age": (now - entry.admitted_at) if entry and entry.admitted_at is not None else None,
                "score": round(self.policies.admission.score(entry.info, now), 6) if entry else None,
                "tiers": sorted(t.name for t in self.tiers.tiers(key)),
                "tier_bitmap": self.tiers.bitmap(key),
                "pin": None if pin is None else pin.kind,
                "pin_expires_in": None if pin is None or pin.expires_at is None else pin.expires_at - now,
                "version": entry.version if entry else 0,
                "depth": entry.info.depth if entry else 0,
                "parent": str(entry.info.parent) if entry and entry.info.parent is not None else None,
            }
            return row

    def residents(self, now: float | None = None, batch: int = 256) -> list[dict]:
        """Rows of every resident chunk, by slot; the lock is taken per batch so a 10k-row `ls` never holds
        up digests and punts for long (a chunk evicted meanwhile is left out)."""
        with self.lock:
            now = self.clock() if now is None else now
            keys = [key for key, _ in sorted(self.slots.items(), key=lambda kv: kv[1])]
        return self.describe_many(keys, now, batch)

    def describe_many(self, keys: list[ChunkKey], now: float | None = None, batch: int = 256) -> list[dict]:
        now = self.clock() if now is None else now
        rows = []
        for start in range(0, len(keys), batch):
            with self.lock:
                for key in keys[start:start + batch]:
                    if key in self.slots or key in self.tracked:
                        rows.append(self.describe(key, now))
        return rows

    def recent_decisions(self, limit: int = 50) -> list[dict]:
        with self.lock:
            items = list(self.decisions)[-limit:]
        return [{"at": d.at, "action": d.action, "key": str(d.key), "reason": d.reason, "slot": d.slot,
                 "score": d.score} for d in items]
