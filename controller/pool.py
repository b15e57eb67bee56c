"""The switch pool's driver: turns data-plane signals and operator requests into `SlotPool` decisions and writes.

`PoolManager` decides on a `controller.ledger.SlotLedger` (the chunks it tracks, their tiers, the decision log,
the durable state) and lets `policies.slotpool.SlotPool`, hence `policies.pool.Pool`, decide residency,
victims, the newcomer-versus-victim rule and recycling: the same code the evaluator's replays run. It talks to
the switch only through the `DataPlane` protocol and to the storage node through `TierMover`, so the same logic
runs against a real switch and against a dict in unit tests. Reconciling after restarts (`controller.reconcile`)
and reading hit counters (`controller.hitpoll`) work on the ledger they are given.

Every index entry it installs carries a fresh admission generation (docs/dataplane.md, *Coherence*); the only
bytes it writes into a slot are what the storage node holds (fetched, with the block's real chunk_count and
version), never a client's.

Under incast it does not amplify the load: only a chunk a slot can serve is admitted (a digest or INSERT that
says its chunks are larger is counted under `ignored` and changes nothing; an admission the switch later shows
to be of a larger chunk, `on_over_slot`, is undone and its block never admitted again while `controller.overslot`
remembers it), only a chunk whose slot held its value is recycled, and storage-node calls (recycling, fills) go
to `storage_work` once the lock is released.

Threading: every public method takes the lock through `locked()`; callers are the P4Runtime stream thread
(digests, packet-ins), the API threads, the periodic tick and the storage worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from controller import hitpoll, reconcile
from controller.dataplane import CONNECTION_LOST, DataPlane, connection_lost
from controller.ledger import Decision, PoolOptions, SlotLedger, Tracked
from controller.metrics import Metrics
from controller.overslot import OverSlotBlocks
from controller.state import StateStore
from controller.storagework import InlineStorageWork, StorageJob, StorageWork
from controller.tiers import STORAGE_TIERS, StoredChunk, TierMap, TierMover
from kvpool.constants import KVP_SLOT_SHIFT
from kvpool.keys import SLOT_BYTES, ChunkKey
from policies.base import BlockInfo, Tier
from policies.slotpool import Evicted, GenerationCounter, Pin, PinnedError, PinTable, SlotMap, SlotPool
from policies.spec import PolicySet

log = logging.getLogger(__name__)

Policies = PolicySet
"""The three policies in force (replaced as a whole by `policy set`); the name the controller always used."""

GENERATION_CEILING = "generation_ceiling"
"""StateStore meta key: no admission generation at or above it was handed out (see GenerationCounter)."""


class PinError(Exception):
    """A pin or an explicit eviction that cannot be honoured (e.g. every slot is hard-pinned)."""


class Denied(Exception):
    """A client request the tenant policy refuses (answered with ERR_DENIED)."""


@dataclass(frozen=True, slots=True)
class FillPlan:
    """A slot to fill from the storage node once the pool lock is released (the GET is a network round trip)."""

    key: ChunkKey
    slot: int


class PoolManager:
    """Decides which chunks occupy the switch pool (through `SlotPool`) and applies it to the switch."""

    def __init__(
        self,
        dataplane: DataPlane,
        policies: PolicySet,
        *,
        state: StateStore | None = None,
        mover: TierMover | None = None,
        metrics: Metrics | None = None,
        options: PoolOptions | None = None,
        clock: Callable[[], float] = time.time,
        storage_work: StorageWork | None = None,
    ) -> None:
        tiers = mover.tiers if mover is not None else TierMap()
        self.mover = mover if mover is not None else TierMover(tiers, None)
        metrics = metrics or Metrics()
        self.storage_work: StorageWork = storage_work or InlineStorageWork(metrics)
        """Runs storage-node calls (recycling, fills) once the pool lock is released."""
        generations = GenerationCounter(
            int(state.meta(GENERATION_CEILING, "1") or 1) if state is not None else 1,
            reserve=(lambda ceiling: state.set_meta(GENERATION_CEILING, str(ceiling))) if state is not None else None,
        )
        slotpool: SlotPool[ChunkKey] = SlotPool(dataplane.capacity, policies.admission, policies.eviction,
                                                 policies.recycling, generations)
        self.ledger = ledger = SlotLedger(dataplane, slotpool, state=state, tiers=tiers, metrics=metrics,
                                          options=options or PoolOptions(), clock=clock)
        # The ledger's parts under the names the rest of the controller (and its tests) use.
        self.dataplane, self.state, self.tiers, self.metrics = dataplane, state, tiers, metrics
        self.options, self.clock, self.slotpool = ledger.options, clock, slotpool
        self.tracked, self.decisions, self.lock = ledger.tracked, ledger.decisions, ledger.lock
        self.pending_first_hit = ledger.pending_first_hit
        self._params = dict(policies.params)
        self._trace: dict[str, object] | None = None
        """Stage times of the hot-digest admission in progress (under the lock), see on_hot_key."""
        self._deferred: list[tuple[StorageJob, str]] = []
        """Storage calls decided under the lock, handed to `storage_work` when the outermost holder leaves."""
        self._depth = 0
        self.over_slot_blocks = OverSlotBlocks(self.options.over_slot_blocks)
        """Blocks the switch showed to have chunks larger than a slot (`on_over_slot`): never admitted."""
        self.metrics.capacity = self.slotpool.capacity

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the pool lock; storage calls decided meanwhile are submitted after it is released."""
        with self.lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                jobs: list[tuple[StorageJob, str]] = []
                if self._depth == 0:
                    jobs, self._deferred = self._deferred, []
        for job, what in jobs:
            self.storage_work.submit(job, what)

    def defer(self, job: StorageJob, what: str) -> None:
        """Run the storage call `job` once the pool lock is released (call holding it, through `locked`)."""
        assert self._depth > 0, "defer() outside locked(): the job would wait for the next holder"
        self._deferred.append((job, what))

    # ---- views of the slot pool --------------------------------------------------------------------------

    @property
    def slots(self) -> SlotMap[ChunkKey]:
        """Which chunk holds which slot (read-only for callers: change it through the pool's methods)."""
        return self.slotpool.slots

    @property
    def pins(self) -> PinTable[ChunkKey]:
        return self.slotpool.pins

    @property
    def policies(self) -> PolicySet:
        pool = self.slotpool
        return PolicySet(pool.admission, pool.eviction, pool.recycling, self._params)

    def set_policies(self, policies: PolicySet) -> None:
        """Replace the policies; the new ones are told about every resident chunk (call under the lock)."""
        blocks = {key: entry.info for key, entry in self.tracked.items()}
        self.slotpool.replace_policies(policies.admission, policies.eviction, policies.recycling, blocks,
                                       self.clock())
        self._params = dict(policies.params)

    # ---- bookkeeping -------------------------------------------------------------------------------------

    def log_decision(self, action: str, key: ChunkKey, reason: str, slot: int | None = None,
                     score: float | None = None, now: float | None = None) -> Decision:
        return self.ledger.log_decision(action, key, reason, slot, score, now)

    def track(self, key: ChunkKey, now: float, info: BlockInfo | None = None) -> Tracked:
        return self.ledger.track(key, now, info)

    def access(self, entry: Tracked, now: float, times: int = 1) -> None:
        """Accesses that are not switch hits (digests, INSERTs): the policies record them."""
        self.slotpool.record(entry.info, now, min(times, self.options.hit_weight_cap))
        entry.accesses += times
        entry.score = self.slotpool.admission.score(entry.info, now)

    def sync_occupancy(self) -> None:
        self.ledger.sync_occupancy()

    def over_slot(self, key: ChunkKey, chunk_shift: int | None, signal: str, now: float) -> bool:
        """True (counted under `ignored`, logged) when `chunk_shift` says `key`'s chunks are larger than a slot,
        or the switch showed so for its block before (`on_over_slot`): the pool can never serve such a chunk, so
        tracking or admitting it would only churn (docs/protocol.md, *The value chunk*). None: the signal does
        not say, the chunk is taken to be slot-sized unless its block is remembered."""
        if chunk_shift is not None and chunk_shift != KVP_SLOT_SHIFT:
            self.metrics.count("ignored", f"over-slot {signal}")
            log.debug("ignore %s %s: chunks of %d bytes do not fit a %d-byte slot", signal, key, 1 << chunk_shift,
                      SLOT_BYTES)
            return True
        if chunk_shift is None and self.over_slot_blocks.seen(key.block):
            self.metrics.count("ignored", f"over-slot block {signal}")
            log.debug("ignore %s %s: the switch saw its block's chunks larger than a slot", signal, key)
            return True
        return False

    def deny(self, key: ChunkKey, reason: str, label: str, now: float) -> Denied:
        self.metrics.count("denied", label)
        self.log_decision("deny", key, reason, now=now)
        return Denied(reason)

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
        chunk_shift: int | None = None,
        now: float | None = None,
    ) -> int:
        """INSERT: register the chunk as a candidate, admit it now if its value warrants; returns the tier bitmap.

        The tenant policy may refuse it (`Denied`). A client's `value` is never written into the pool and its
        `version` never bounds the index entry (both are unverified claims): when the INSERT carries a value
        or announces a version newer than the slot's, the controller reads the chunk from the storage node and
        SLOT_WRITEs what it holds; otherwise the storage node's next reply fills the slot. A chunk larger than a
        slot (`chunk_shift`, when the INSERT carries a value) is never admitted: its tiers are reported only.
        """
        tenants = self.options.tenants
        with self.locked():
            now = self.clock() if now is None else now
            if not tenants.may_insert(key.tenant):
                raise self.deny(key, f"tenant {key.tenant} may not INSERT", "insert", now)
            if pin and not tenants.may_pin(key.tenant):
                raise self.deny(key, f"tenant {key.tenant} may not pin", "pin", now)
            if chunk_shift == KVP_SLOT_SHIFT and self.over_slot_blocks.forget(key.block):
                log.info("block %s: an INSERT carries a slot-sized chunk of it, its chunks may be admitted again",
                         key.block)
            if self.over_slot(key, chunk_shift, "INSERT", now):
                if host is not None:
                    self.tiers.report_node(key, host, Tier.NODE_HBM)
                return self.tiers.bitmap(key)
            known = self.tracked.get(key)
            if parent is None and known is not None and isinstance(known.info.parent, ChunkKey):
                parent = known.info.parent  # another client's INSERT may not know the chain
            info = BlockInfo(key, depth=depth, tokens=tokens, size_bytes=SLOT_BYTES, parent=parent)
            entry = self.track(key, now, info)
            newer = version > entry.version  # than what the storage node was seen to hold
            entry.announced = max(entry.announced, version)
            if host is not None:
                self.tiers.report_node(key, host, Tier.NODE_HBM)
            if self.tiers.storage_tier(key) is Tier.ABSENT:
                self.tiers.add(key, Tier.STORAGE_DRAM)  # clients PUT a block to the storage node before announcing it
            self.access(entry, now)
            resident = key in self.slots
            if pin:
                self._pin_locked(key, self.options.client_pin_ttl, now, reason="client asked (F_PIN)", client=True)
            elif not resident and self.slotpool.admission.admit(info, now):
                self.admit_chain(key, now, "admission policy on INSERT", "insert")
            slot = self.slots.slot_of(key)
            if slot is not None and (value is not None or (resident and newer)):
                plan = FillPlan(key, slot)
                self.defer(lambda: self.fill_from_storage(plan), f"fill slot {slot} with {key}")
            return self.tiers.bitmap(key)

    def lookup(self, key: ChunkKey) -> tuple[int, int]:
        """LOOKUP_META: (tier bitmap, newest version known: stored, else announced)."""
        with self.locked():
            entry = self.tracked.get(key)
            return self.tiers.bitmap(key), max(entry.version, entry.announced) if entry else 0

    def fill_from_storage(self, plan: FillPlan) -> bool:
        """Read `plan.key` from the storage node and SLOT_WRITE what it holds under a fresh generation (the
        entry is re-installed first, so no fill of an older admission or older version survives). Runs the GET
        without the pool lock; False when nothing was written (no storage node, nothing stored, or the key left
        its slot meanwhile)."""
        stored = self.mover.fetch(plan.key)
        if stored is None:
            return False
        with self.locked():
            now = self.clock()
            if self.slots.slot_of(plan.key) != plan.slot:
                return False
            return self._write_stored(plan.key, plan.slot, stored, now)

    def _write_stored(self, key: ChunkKey, slot: int, stored: StoredChunk, now: float) -> bool:
        entry = self.track(key, now)
        entry.version = max(entry.version, stored.version)
        entry.chunk_count = stored.chunk_count
        entry.stored = True  # even if the write fails below: the storage node's next reply may fill it
        generation = self.slotpool.regenerate(key)
        try:
            self.dataplane.install(key, slot, min_version=stored.version, generation=generation)
            self.dataplane.write_slot(slot, key, stored.version, stored.value, stored.chunk_count)
        except Exception as exc:  # the storage node's next reply fills it anyway
            log.warning("SLOT_WRITE of %s into slot %d failed: %s", key, slot, exc)
            return False
        if self.state is not None:
            self.state.bind_slot(slot, key, entry.admitted_at or now, stored.version, generation)
        self.log_decision("fill", key, f"SLOT_WRITE of the storage node's version {stored.version} "
                          f"({stored.chunk_count} chunk(s))", slot=slot, now=now)
        return True

    # ---- data-plane signals ------------------------------------------------------------------------------

    def on_hot_key(self, key: ChunkKey, estimate: int = 1, now: float | None = None,
                   received: float | None = None, chunk_shift: int | None = None) -> int | None:
        """A hot-key digest: the data plane saw `estimate` GET misses of `key` this epoch. Returns its slot if admitted.

        `received` (time.monotonic()) is when the digest came off the stream; an admission it causes is traced
        stage by stage (`Metrics.admission_traces`). A digest whose `chunk_shift` says the chunk is larger than a
        slot is counted (`ignored`) and changes nothing: no tracking, no index write, no eviction."""
        if self.over_slot(key, chunk_shift, "digest", self.clock() if now is None else now):
            return None
        with self.locked():
            self._trace = {"key": str(key), "received": received, "locked": time.monotonic()}
            try:
                return self._on_hot_key(key, estimate, now)
            finally:
                trace, self._trace = self._trace, None
                if "write_done" in trace:
                    trace["done"] = time.monotonic()
                    self.metrics.trace(trace)

    def _on_hot_key(self, key: ChunkKey, estimate: int, now: float | None) -> int | None:
        now = self.clock() if now is None else now
        self.metrics.digest(now)
        entry = self.track(key, now)
        if entry.first_digest_at is None:
            entry.first_digest_at = now
        entry.last_digest_at = now
        self.access(entry, now, times=max(1, estimate))
        if key in self.slots:
            return self.slots.slot_of(key)
        if not self.slots.full:
            return self.admit_chain(key, now, f"hot digest (estimate {estimate}), free slot", "hot digest")
        if self.slotpool.admission.admit(entry.info, now):
            return self.admit_chain(key, now, f"hot digest (estimate {estimate}), admission policy", "hot digest")
        self.metrics.count("refusals", "admission policy")
        self.log_decision("refuse", key, f"admission policy declined (score {entry.score:.3f})", score=entry.score,
                          now=now)
        return None

    def on_over_slot(self, key: ChunkKey, chunk_shift: int, generation: int | None = None,
                     now: float | None = None) -> int | None:
        """An over-slot digest: a trusted reply of `key`, indexed under admission `generation`, carried a chunk of
        `1 << chunk_shift` bytes, which no slot can hold. The block is remembered (its chunks are never admitted
        again while it is), and when `key` still holds a slot under that admission (None: whichever it holds),
        the admission is undone: entry deleted, slot freed, nothing recycled (the slot never held the chunk).
        Returns the slot freed, if any. A pinned chunk keeps its slot (an operator's pin is theirs to lift)."""
        with self.locked():
            now = self.clock() if now is None else now
            if self.over_slot_blocks.add(key.block):
                log.info("block %s: its chunks are %d bytes, a slot holds %d: not admitted while remembered",
                         key.block, 1 << chunk_shift, SLOT_BYTES)
            self.metrics.over_slot_blocks = len(self.over_slot_blocks)
            if key not in self.slots:
                self.metrics.count("over_slot", "not resident")  # undone already (a second reply in flight)
                return None
            if generation is not None and self.slotpool.generation_of(key) != generation:
                self.metrics.count("over_slot", "earlier admission")  # the slot is another admission's now
                return None
            if self.pins.get(key, now) is not None:
                self.metrics.count("over_slot", "pinned")
                log.warning("%s is pinned though its chunks are %d bytes (a slot holds %d): unpin it to free its "
                            "slot", key, 1 << chunk_shift, SLOT_BYTES)
                return None
            entry = self.tracked.get(key)
            residual = self.slotpool.admission.score(entry.info, now) if entry is not None else None
            reason = f"chunks of {1 << chunk_shift} bytes do not fit a {SLOT_BYTES}-byte slot"
            evicted = self.slotpool.evict(key, now, reason, residual)
            self._after_eviction(evicted, now, reason, "over-slot", recycle=False)
            self.metrics.count("over_slot", "undone")
            return evicted.slot

    def poll_hits(self, now: float | None = None, only_pending: bool = False) -> int:
        """Read per-slot hit counters and feed the hits to the policies (controller.hitpoll)."""
        return hitpoll.poll(self.ledger, now, only_pending)

    # ---- admission ---------------------------------------------------------------------------------------

    def admit_chain(self, key: ChunkKey, now: float, reason: str, label: str) -> int | None:
        """Admit `key` after its not-yet-resident ancestors (a block is useless without its prefix)."""
        chain: list[ChunkKey] = []
        parent = self.tracked[key].info.parent
        while parent is not None and parent not in self.slots and len(chain) < self.options.max_chain:
            assert isinstance(parent, ChunkKey)
            ancestor = self.tracked.get(parent)
            if ancestor is None:
                break
            chain.append(parent)
            parent = ancestor.info.parent
        held = set(chain)
        for link in reversed(chain):
            if self.admit_one(link, now, f"prefix of {key}", held, label="prefix chain") is None:
                break
        return self.admit_one(key, now, reason, held, label=label)

    def _over_quota(self, key: ChunkKey) -> int | None:
        quota = self.options.tenants.quota_of(key.tenant)
        if quota is None:
            return None
        held = sum(1 for k, _ in self.slots.items() if k.tenant == key.tenant)
        return quota if held >= quota else None

    def admit_one(self, key: ChunkKey, now: float, reason: str, held: set[ChunkKey] | None = None,
                  force: bool = False, label: str = "hot", operator: bool = False) -> int | None:
        """Give `key` a slot (the pool evicts a less valuable unprotected victim when full) and index it under a
        fresh generation. `force` skips the value comparison with the victim (pins); `operator` exempts it from
        the tenant quota; `label` is the metrics label of the reason."""
        entry = self.track(key, now)
        if key in self.slots:
            return self.slots.slot_of(key)
        quota = None if operator else self._over_quota(key)
        if quota is not None:
            self.metrics.count("denied", "quota")
            self.log_decision("deny", key, f"tenant {key.tenant} holds its quota of {quota} slot(s)", now=now)
            return None
        placement = self.slotpool.place(entry.info, now, compare=not force, hold=held or ())
        victim = placement.evicted[0] if placement.evicted else None
        for evicted in placement.evicted:
            self._after_eviction(evicted, now, f"make room for {key}: {evicted.victim.reason}", "capacity",
                                 delete_entry=evicted is not victim or placement.slot is None)
        if placement.slot is None:
            full_of_pins = "pinned" in (placement.refused or "")
            self.metrics.count("refusals", "pool full of pinned chunks" if full_of_pins else "not worth the victim")
            self.log_decision("refuse", key, "pool full and every resident chunk is pinned or protected"
                              if full_of_pins else placement.refused or "refused", score=entry.score, now=now)
            return None
        slot = placement.slot
        trace = self._trace if self._trace is not None and self._trace["key"] == str(key) else None
        if trace is not None:
            trace["write_sent"] = time.monotonic()
        error, counter_reset = self._index(victim.key if victim is not None else None, key, slot, entry.version,
                                           placement.generation)
        if trace is not None and error is None:
            trace["write_done"] = time.monotonic()
        if error is not None:
            self.slotpool.cancel(key)
            self.metrics.count("refusals", "switch write failed")
            self.log_decision("refuse", key, f"index entry write failed: {error}", now=now)
            self.sync_occupancy()
            return None
        if entry.first_digest_at is not None and entry.first_digest_at == entry.last_digest_at:
            self.metrics.latency("hot_to_installed", self.clock() - entry.first_digest_at)
        entry.admitted_at = now
        entry.stored = False
        entry.hit_baseline = 0 if counter_reset else self.slot_counter(slot)
        entry.switch_hits = 0
        entry.first_hit_at = None
        self.pending_first_hit.add(key, now)
        self.tiers.add(key, Tier.SWITCH)
        if self.state is not None:
            self.state.bind_slot(slot, key, now, entry.version, placement.generation)
        self.metrics.count("admissions", label)
        self.log_decision("admit", key, f"{reason} (generation {placement.generation})", slot=slot,
                          score=entry.score, now=now)
        self.sync_occupancy()
        return slot

    def _index(self, victim: ChunkKey | None, key: ChunkKey, slot: int, version: int,
               generation: int) -> tuple[Exception | None, bool]:
        """Index `key` at `slot`, deleting `victim`'s entry first: (why the newcomer failed or None, whether the
        slot's hit counter was zeroed with it). A data plane that can batch does all of it in one write, counter
        reset included, so an admission costs one RPC and no counter read."""
        try:
            outcome = self.dataplane.swap(victim, key, slot, version, generation)
        except Exception as exc:  # e.g. a key that does not fit the table: nothing was written
            if victim is not None:
                self.delete_entry(victim)
            return exc, False
        if outcome.remove_error is not None:
            log.warning("deleting the index entry of %s failed (%s); its slot was freed anyway",
                        victim, outcome.remove_error)
        return outcome.install_error, outcome.counter_reset and outcome.install_error is None

    def delete_entry(self, key: ChunkKey) -> None:
        try:
            self.dataplane.remove(key)
        except Exception as exc:
            log.warning("deleting the index entry of %s failed (%s); freeing its slot anyway", key, exc)

    def slot_counter(self, slot: int) -> int:
        return self.ledger.slot_counter(slot)

    # ---- eviction and recycling --------------------------------------------------------------------------

    def _after_eviction(self, evicted: Evicted, now: float, reason: str, label: str,
                        delete_entry: bool = True, recycle: bool = True) -> Decision:
        """Apply an eviction the slot pool made: the index entry (unless the caller's batched write deletes
        it), tiers, durable state, metrics, and the recycling decision (TIER_MOVE; none when not `recycle`: the
        chunk is dropped)."""
        key = evicted.key
        assert isinstance(key, ChunkKey)
        if delete_entry:
            self.delete_entry(key)
        self.tiers.remove(key, Tier.SWITCH)
        self.pending_first_hit.discard(key)
        if self.state is not None:
            self.state.free_slot(evicted.slot)
        entry = self.track(key, now)
        entry.admitted_at = None
        self.metrics.count("evictions", label)
        decision = self.log_decision("evict", key, reason, slot=evicted.slot, score=evicted.victim.residual, now=now)
        if recycle:
            self._recycle(evicted, entry, now)
        else:
            self.metrics.count("recycled", "ABSENT")
            self.log_decision("drop", key, "never stored in its slot: nothing to recycle", score=evicted.victim.residual,
                              now=now)
        entry.stored = False
        self.sync_occupancy()
        return decision

    def _recycle(self, evicted: Evicted, entry: Tracked, now: float) -> None:
        """The recycling decision on an evicted chunk. Only a chunk whose slot held its value is recycled (an
        entry that never got one has nothing to hand down); a demotion is a storage call, made by the storage
        worker after the lock is released, and logged when the node answers."""
        key, outcome, residual = evicted.key, evicted.recycle, evicted.victim.residual
        assert isinstance(key, ChunkKey)
        if not entry.stored:
            self.metrics.count("recycled", "ABSENT")
            self.log_decision("drop", key, "never stored in its slot: nothing to recycle", score=residual, now=now)
            return
        if outcome.tier not in STORAGE_TIERS:
            self.metrics.count("recycled", "ABSENT")
            self.log_decision("drop", key, outcome.reason, score=residual, now=now)
            return
        tier, reason = outcome.tier, outcome.reason

        def demote() -> None:
            acknowledged = self.mover.ask(key, tier, residual)  # a network round trip: no lock held
            with self.locked():
                moved_at = self.clock()
                if acknowledged:
                    self.tiers.add(key, tier)
                    self.metrics.count("recycled", tier.name)
                    self.log_decision("demote", key, f"to {tier.name}: {reason}", score=residual, now=moved_at)
                    return
                self.metrics.count("recycled", "ABSENT")
                self.log_decision("drop", key, f"demotion to {tier.name} failed; {reason}", score=residual,
                                  now=moved_at)

        self.defer(demote, f"TIER_MOVE {key} → {tier.name}")

    def evict(self, key: ChunkKey, reason: str = "operator request", now: float | None = None) -> Decision:
        """Explicit eviction (CLI `evict`); a pinned chunk must be unpinned first."""
        with self.locked():
            now = self.clock() if now is None else now
            if self.pins.get(key, now) is not None:
                raise PinError(f"{key} is pinned; unpin it first")
            if key not in self.slots:
                raise KeyError(f"{key} is not in the switch pool")
            entry = self.tracked.get(key)
            residual = self.slotpool.admission.score(entry.info, now) if entry is not None else None
            evicted = self.slotpool.evict(key, now, reason, residual)
            return self._after_eviction(evicted, now, reason, "operator")

    # ---- pins --------------------------------------------------------------------------------------------

    def pin(self, key: ChunkKey, ttl: float | None = None, now: float | None = None) -> Pin[ChunkKey]:
        """Pin hard (ttl None) or soft; the chunk is admitted at once (evicting an unpinned victim if needed)."""
        with self.locked():
            now = self.clock() if now is None else now
            return self._pin_locked(key, ttl, now, "operator request")

    def _pin_locked(self, key: ChunkKey, ttl: float | None, now: float, reason: str, client: bool = False) -> Pin[ChunkKey]:
        self.track(key, now)
        if key not in self.slots and self.admit_one(key, now, f"pinned ({reason})", force=True, label="pin",
                                                    operator=not client) is None:
            raise PinError(f"cannot pin {key}: every slot is pinned" if self._over_quota(key) is None or not client
                           else f"cannot pin {key}: tenant {key.tenant} holds its slot quota")
        pin = self.slotpool.pin(key, now, ttl)
        if self.state is not None:
            self.state.save_pin(pin)
        self.log_decision("pin", key, f"{pin.kind} pin" + ("" if ttl is None else f" for {ttl:g} s") + f": {reason}",
                          now=now)
        return pin

    def unpin(self, key: ChunkKey, now: float | None = None) -> bool:
        with self.locked():
            now = self.clock() if now is None else now
            removed = self.slotpool.unpin(key)
            if removed:
                if self.state is not None:
                    self.state.drop_pin(key)
                self.log_decision("unpin", key, "operator request", now=now)
            return removed

    # ---- periodic work -----------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Nothing in the pool: no slot held, no pin (no counter to poll, no pin to expire)."""
        with self.locked():
            return not len(self.slots) and not self.pins.all()

    def tick(self, now: float | None = None, poll: bool = True) -> None:
        """Expire soft pins and (when `poll`) read the slot counters; called every second or so."""
        with self.locked():
            now = self.clock() if now is None else now
            for pin in self.slotpool.expire(now):
                if self.state is not None:
                    self.state.drop_pin(pin.key)
                self.log_decision("expire", pin.key, "soft pin TTL ran out", now=now)
        if poll:
            self.poll_hits(now)  # outside the lock: counter reads are RPCs

    # ---- restart: reconcile with the switch --------------------------------------------------------------

    def restore(self, now: float | None = None) -> dict[str, int]:
        """After a controller (re)start: saved state and the switch's index reconciled (controller.reconcile)."""
        with self.locked():
            counts = reconcile.restore(self.ledger, now)
            now = self.clock() if now is None else now
            for key in list(self.pins.protected(now)):
                if key not in self.slots and not counts["deferred"]:
                    assert isinstance(key, ChunkKey)
                    self.admit_one(key, now, "pinned (restored)", force=True, label="pin", operator=True)
            self.sync_occupancy()
            return counts

    def resync(self, now: float | None = None) -> dict[str, int]:
        """After a reconnect: the switch's index made equal to our slot map (controller.reconcile)."""
        return reconcile.resync(self.ledger, now)

    # ---- views -------------------------------------------------------------------------------------------

    def describe(self, key: ChunkKey, now: float | None = None) -> dict:
        with self.locked():
            now = self.clock() if now is None else now
            entry = self.tracked.get(key)
            if entry is None and key not in self.slots:
                raise KeyError(f"{key} is not tracked")
            pin = self.pins.get(key, now)
            row = {
                "key": str(key),
                "block": str(key.block),
                "tenant": key.tenant,
                "prefix_hash": f"{key.prefix_hash:016x}",
                "chunk": key.chunk,
                "slot": self.slots.slot_of(key),
                "generation": self.slotpool.generation_of(key),
                "hits": entry.switch_hits if entry else 0,
                "accesses": entry.accesses if entry else 0,
                "age": (now - entry.admitted_at) if entry and entry.admitted_at is not None else None,
                "score": round(self.slotpool.admission.score(entry.info, now), 6) if entry else None,
                "tiers": sorted(t.name for t in self.tiers.tiers(key)),
                "tier_bitmap": self.tiers.bitmap(key),
                "pin": None if pin is None else pin.kind,
                "pin_expires_in": None if pin is None or pin.expires_at is None else pin.expires_at - now,
                "version": entry.version if entry else 0,
                "announced_version": entry.announced if entry else 0,
                "chunk_count": entry.chunk_count if entry else 0,
                "depth": entry.info.depth if entry else 0,
                "parent": str(entry.info.parent) if entry and entry.info.parent is not None else None,
            }
            return row

    def residents(self, now: float | None = None, batch: int = 256) -> list[dict]:
        """Rows of every resident chunk, by slot; the lock is taken per batch so a 10k-row `ls` never holds
        up digests and punts for long (a chunk evicted meanwhile is left out)."""
        with self.locked():
            now = self.clock() if now is None else now
            keys = [key for key, _ in sorted(self.slots.items(), key=lambda kv: kv[1])]
        return self.describe_many(keys, now, batch)  # type: ignore[arg-type]

    def describe_many(self, keys: list[ChunkKey], now: float | None = None, batch: int = 256) -> list[dict]:
        now = self.clock() if now is None else now
        rows = []
        for start in range(0, len(keys), batch):
            with self.locked():
                for key in keys[start:start + batch]:
                    if key in self.slots or key in self.tracked:
                        rows.append(self.describe(key, now))
        return rows

    def recent_decisions(self, limit: int = 50) -> list[dict]:
        with self.locked():
            items = list(self.decisions)[-limit:]
        return [{"at": d.at, "action": d.action, "key": str(d.key), "reason": d.reason, "slot": d.slot,
                 "score": d.score} for d in items]


__all__ = ["CONNECTION_LOST", "Decision", "Denied", "FillPlan", "PinError", "PinnedError", "Policies", "PoolManager",
           "PoolOptions", "StoredChunk", "Tracked", "connection_lost"]
