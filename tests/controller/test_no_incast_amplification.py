"""The control plane does not amplify incast: it admits only chunks a slot can serve, recycles only what a slot
held, makes no storage call under the pool lock or on the thread that serves digests, and says when no port may
fill the pool."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.pool import PoolManager
from controller.service import Controller, ServeOptions
from controller.storagework import StorageWorker
from controller.tiers import StoredChunk, TierMap, TierMover
from kvpool.constants import KVP_MAX_CHUNK_SHIFT, KVP_SLOT_SHIFT
from kvpool.keys import ChunkKey
from p4rt.bytestrings import encode
from p4rt.p4info import P4Info
from policies.base import Tier
from tests.controller.fake_p4rt import controller_on_fake_switch
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies
from tests.controller.test_p4runtime import P4INFO_PATH, wait_for
from tests.controller.test_service import index_of

K = [ChunkKey(1, 0x2000 + i, 0) for i in range(4)]
PATIENCE = 60.0
"""Seconds a wait for the worker thread may take: far beyond what any load delays it by."""


@dataclass
class WatchedStorage(FakeStorage):
    """A storage node that records, for each call, on which thread it ran and whether the pool lock was free."""

    pool: PoolManager | None = None
    calls: list[tuple[str, threading.Thread, bool]] = field(default_factory=list)

    def _watch(self, what: str) -> None:
        assert self.pool is not None
        free = self.pool.lock.acquire(blocking=False)
        if free:
            self.pool.lock.release()
        self.calls.append((what, threading.current_thread(), free and not self.pool.lock._is_owned()))  # type: ignore[attr-defined]

    def fetch(self, key: ChunkKey) -> StoredChunk | None:
        self._watch("fetch")
        return super().fetch(key)

    def tier_move(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        self._watch("tier_move")
        return super().tier_move(key, tier, residual)


def make_pool(capacity: int = 1, worker: StorageWorker | None = None, threshold: int = 1, recycle_at: float = 2.0):
    dataplane, storage = FakeDataPlane(capacity), WatchedStorage()
    pool = PoolManager(dataplane, make_policies(threshold, recycle_at), mover=TierMover(TierMap(), storage),
                       clock=Clock(), storage_work=worker)
    storage.pool = pool
    return pool, dataplane, storage


# ---- only chunks a slot can serve -------------------------------------------------------------------------------


def test_a_digest_of_an_over_slot_chunk_is_counted_and_writes_nothing():
    pool, dataplane, storage = make_pool(capacity=1)
    pool.on_hot_key(K[0], estimate=5)
    assert pool.on_hot_key(K[1], estimate=500, chunk_shift=KVP_MAX_CHUNK_SHIFT) is None
    assert dataplane.index == {K[0]: 0} and [k for k, *_ in dataplane.installs] == [K[0]]
    assert K[1] not in pool.tracked and pool.metrics.ignored == {"over-slot digest": 1}
    assert [d.action for d in pool.decisions] == ["admit"] and storage.calls == []
    assert pool.on_hot_key(K[2], estimate=500, chunk_shift=KVP_SLOT_SHIFT) == 0  # a slot-sized one still is


def test_an_insert_with_an_over_slot_value_is_never_admitted_nor_fetched():
    pool, dataplane, storage = make_pool(capacity=4)
    bitmap = pool.offer(K[0], value=b"x" * 8192, version=3, chunk_shift=13, host="10.0.0.1", pin=True)
    assert dataplane.index == {} and storage.fetches == [] and pool.metrics.ignored == {"over-slot INSERT": 1}
    assert bitmap == 1 << Tier.NODE_HBM


def with_p4info_digest_chunk_shift(tmp_path) -> str:
    """A copy of the test P4Info whose hot-key digest also carries `chunk_shift` (bit<8>)."""
    info = P4Info.load(P4INFO_PATH)
    message = p4info_pb2.P4Info()
    message.CopyFrom(info.message)
    struct = message.type_info.structs["hot_key_digest_t"]
    member = struct.members.add(name="chunk_shift")
    member.type_spec.bitstring.bit.bitwidth = 8
    path = tmp_path / "with_chunk_shift.p4info.txtpb"
    path.write_text(text_format.MessageToString(message))
    return str(path)


def digest_with_shift(info: P4Info, key: ChunkKey, chunk_shift: int) -> p4runtime_pb2.StreamMessageResponse:
    response = p4runtime_pb2.StreamMessageResponse()
    response.digest.digest_id = info.digest_id("hot_key_digest_t")
    response.digest.list_id = 1
    member = response.digest.data.add().struct
    for value, width in ((key.tenant, 16), (key.prefix_hash, 64), (key.chunk, 8), (500, 32), (chunk_shift, 8)):
        member.members.add().bitstring = encode(value, width)
    return response


def test_the_switch_table_gets_no_entry_for_an_over_slot_digest(tmp_path):
    p4info = with_p4info_digest_chunk_shift(tmp_path)
    info = P4Info.load(p4info)
    with controller_on_fake_switch(tmp_path, p4info, PATIENCE) as (controller, switch):
        switch.push(digest_with_shift(info, K[0], KVP_MAX_CHUNK_SHIFT))
        switch.push(digest_with_shift(info, K[1], KVP_SLOT_SHIFT))
        # the stream thread handles digests in order: once K[1] is indexed, K[0]'s digest was handled
        assert wait_for(lambda: K[1] in index_of(switch), PATIENCE)
        assert index_of(switch) == {K[1]: 0}
        assert controller.metrics.snapshot()["ignored"] == {"over-slot digest": 1}


# ---- recycling only what a slot held ----------------------------------------------------------------------------


def test_an_evicted_chunk_whose_slot_never_held_it_is_not_recycled():
    pool, dataplane, storage = make_pool(capacity=1, recycle_at=0.0)  # the policy would demote any victim
    pool.on_hot_key(K[0], estimate=10)  # no hit, no fill: never stored
    pool.on_hot_key(K[1], estimate=50)
    assert dataplane.index == {K[1]: 0}
    assert storage.moves == [] and pool.metrics.recycled == {"ABSENT": 1}
    assert pool.recent_decisions()[-2]["reason"] == "never stored in its slot: nothing to recycle"


def test_an_evicted_chunk_the_controller_filled_is_demoted():
    pool, dataplane, storage = make_pool(capacity=1, recycle_at=0.0)  # the policy would demote any victim
    storage.stored[K[0]] = StoredChunk(1, 1, b"v")
    pool.offer(K[0], value=b"v")
    assert dataplane.writes  # filled with the storage node's copy
    pool.on_hot_key(K[1], estimate=50)
    assert [m[:2] for m in storage.moves] == [(K[0], Tier.STORAGE_DRAM)]
    assert pool.tiers.storage_tier(K[0]) is Tier.STORAGE_DRAM


# ---- no storage call under the pool lock or on the stream thread ------------------------------------------------


def test_recycling_runs_on_the_storage_worker_with_the_pool_lock_free():
    worker = StorageWorker(max_queued=8).start()
    pool, dataplane, storage = make_pool(capacity=1, worker=worker)
    try:
        pool.on_hot_key(K[0], estimate=10)
        dataplane.hit(K[0], 5)
        pool.poll_hits()  # a switch hit: the slot held the value
        pool.on_hot_key(K[1], estimate=50)  # this thread plays the P4Runtime stream thread
        worker.join()
    finally:
        worker.close()
    assert [(what, thread, free) for what, thread, free in storage.calls] == [("tier_move", worker.thread, True)]
    assert threading.current_thread() is not worker.thread
    assert [d.action for d in pool.decisions][-2:] == ["admit", "demote"]


def test_an_insert_fill_runs_on_the_storage_worker_with_the_pool_lock_free():
    worker = StorageWorker(max_queued=8).start()
    pool, dataplane, storage = make_pool(capacity=2, worker=worker)
    storage.stored[K[0]] = StoredChunk(4, 2, b"stored")
    try:
        pool.offer(K[0], value=b"planted")
        worker.join()
    finally:
        worker.close()
    assert storage.calls == [("fetch", worker.thread, True)]
    assert dataplane.writes == [(0, K[0], 4, b"stored")]


def test_a_full_storage_queue_drops_the_job_and_counts_it():
    worker = StorageWorker(max_queued=1)  # not started: nothing drains it
    ran = []
    assert worker.submit(lambda: ran.append(1), "first")
    assert not worker.submit(lambda: ran.append(2), "second")
    assert worker.metrics.storage_jobs == {"queued": 1, "dropped": 1}
    worker.start()
    worker.join()
    worker.close()
    assert ran == [1] and worker.metrics.storage_jobs["done"] == 1


# ---- a topology where no port may fill the pool -----------------------------------------------------------------


def plan(tmp_path, role: str) -> ServeOptions:
    hosts = tmp_path / f"hosts-{role or 'none'}.json"
    hosts.write_text(json.dumps([{"name": "h1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1},
                                 {"name": "st", "ip": "10.0.0.100", "mac": "02:00:00:00:00:64", "port": 2,
                                  "role": role}]))
    device_config = tmp_path / "kvswitch.json"
    device_config.write_bytes(b"{}")
    return ServeOptions(switch="127.0.0.1:1", p4info=P4INFO_PATH, device_config=device_config,
                        state=tmp_path / f"state-{role or 'none'}.sqlite", hosts_file=hosts)


def test_a_plan_without_a_storage_port_is_warned_about_and_shown_in_status(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="controller.service")
    controller = Controller(plan(tmp_path, ""))
    try:
        assert any("no switch port has the storage role" in r.getMessage() for r in caplog.records)
        status = controller.status()
        assert status["storage_ports"] == [] and "storage role" in status["warnings"][0]
        assert controller.metrics.snapshot()["storage_ports"] == 0
    finally:
        controller.stop()


def test_a_plan_with_a_storage_port_raises_no_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="controller.service")
    controller = Controller(plan(tmp_path, "storage"))
    try:
        assert not any("storage role" in r.getMessage() for r in caplog.records)
        assert controller.status()["storage_ports"] == [2] and controller.status()["warnings"] == []
    finally:
        controller.stop()
