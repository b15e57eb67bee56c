"""Decision logic of the switch pool against a dict-backed data plane: admission, eviction, recycling, pins."""

from __future__ import annotations

import pytest

from controller.pool import PinError, PoolManager
from controller.state import StateStore
from controller.tiers import StoredChunk, TierMap, TierMover
from kvpool.keys import ChunkKey
from policies.base import Tier
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

K = [ChunkKey(1, 0x1000 + i, 0) for i in range(10)]


def make_pool(capacity=2, state=None, threshold=3, recycle_at=2.0, dataplane=None, clock=None):
    dataplane = dataplane or FakeDataPlane(capacity)
    storage = FakeStorage()
    pool = PoolManager(dataplane, make_policies(threshold, recycle_at), state=state,
                       mover=TierMover(TierMap(), storage), clock=clock or Clock())
    return pool, dataplane, storage


def actions(pool, key=None):
    return [d.action for d in pool.decisions if key is None or d.key == key]


def test_hot_digest_with_free_slot_installs_index_entry():
    pool, dp, _ = make_pool()
    slot = pool.on_hot_key(K[0], estimate=5)
    assert slot == 0
    assert dp.index == {K[0]: 0}
    assert Tier.SWITCH.name in pool.describe(K[0])["tiers"]
    assert pool.metrics.admissions["hot digest"] == 1


def test_insert_below_threshold_stays_candidate_until_it_warrants_admission():
    pool, dp, _ = make_pool(threshold=3)
    for _ in range(2):
        pool.offer(K[0])
    assert dp.index == {}
    bitmap = pool.offer(K[0])
    assert dp.index == {K[0]: 0}
    assert bitmap & (1 << Tier.SWITCH)


def test_insert_with_value_fills_the_slot_with_the_storage_nodes_copy_not_the_clients():
    """Coherence: client bytes never enter the pool unchecked; the SLOT_WRITE carries what the storage node holds,
    with the block's real chunk_count, under a fresh generation installed first."""
    pool, dp, storage = make_pool(threshold=1)
    storage.stored[K[0]] = StoredChunk(version=6, chunk_count=3, value=b"stored")
    pool.offer(K[0], value=b"planted", version=7)
    assert dp.writes == [(0, K[0], 6, b"stored")] and dp.chunk_counts == [3]
    admitted, refilled = [g for k, _, g in dp.installs if k == K[0]]
    assert 0 < admitted < refilled == dp.generations[K[0]]
    assert dp.min_versions[K[0]] == 6


def test_insert_with_value_of_a_chunk_the_storage_node_lacks_writes_nothing():
    pool, dp, storage = make_pool(threshold=1)
    pool.offer(K[0], value=b"planted", version=7)
    assert K[0] in dp.index and dp.writes == [] and storage.fetches == [K[0]]


def test_insert_reports_node_and_storage_tiers():
    pool, _, _ = make_pool(threshold=99)
    bitmap = pool.offer(K[0], host="10.0.0.1")
    assert bitmap == (1 << Tier.STORAGE_DRAM) | (1 << Tier.NODE_HBM)
    assert pool.lookup(K[0]) == (bitmap, 0)
    assert pool.lookup(K[5]) == (0, 0)


@pytest.mark.parametrize(
    ("victim_hits", "expected_action", "expected_moves"),
    [(3, "demote", 1), (0, "drop", 0)],
    ids=["valuable-victim-is-demoted", "worthless-victim-is-dropped"],
)
def test_full_pool_evicts_lowest_victim_and_recycles_by_residual(victim_hits, expected_action, expected_moves):
    pool, dp, storage = make_pool(capacity=2, recycle_at=2.0)
    pool.on_hot_key(K[0])
    pool.on_hot_key(K[1])
    dp.hit(K[0], victim_hits)
    dp.hit(K[1], 10)
    pool.poll_hits()
    slot = pool.on_hot_key(K[2], estimate=50)  # score 50 beats either resident
    assert slot == 0 and K[0] not in dp.index and dp.index[K[2]] == 0
    assert actions(pool, K[0])[-2:] == ["evict", expected_action]
    assert len(storage.moves) == expected_moves
    if expected_moves:
        assert storage.moves[0][:2] == (K[0], Tier.STORAGE_DRAM)
        assert pool.tiers.storage_tier(K[0]) is Tier.STORAGE_DRAM
    assert Tier.SWITCH not in pool.tiers.tiers(K[0])


def test_candidate_worth_less_than_the_victim_is_refused():
    pool, dp, storage = make_pool(capacity=1, threshold=1)
    pool.on_hot_key(K[0])
    dp.hit(K[0], 20)
    pool.poll_hits()
    assert pool.on_hot_key(K[1], estimate=2) is None
    assert dp.index == {K[0]: 0}
    assert actions(pool, K[1]) == ["refuse"]
    assert storage.moves == []


def test_pinned_chunk_is_never_evicted():
    pool, dp, _ = make_pool(capacity=2)
    pool.pin(K[0])
    pool.on_hot_key(K[1])
    dp.hit(K[1], 5)  # K[0] has fewer hits, but is pinned
    pool.poll_hits()
    pool.on_hot_key(K[2], estimate=100)
    assert K[0] in dp.index and K[2] in dp.index and K[1] not in dp.index


def test_pool_full_of_pins_refuses_admission_and_pins():
    pool, dp, _ = make_pool(capacity=1)
    pool.pin(K[0])
    assert pool.on_hot_key(K[1], estimate=100) is None
    assert dp.index == {K[0]: 0}
    with pytest.raises(PinError):
        pool.pin(K[1])


def test_explicit_evict_of_a_pinned_chunk_is_refused_until_unpinned():
    pool, dp, _ = make_pool()
    pool.pin(K[0])
    with pytest.raises(PinError):
        pool.evict(K[0])
    assert pool.unpin(K[0])
    decision = pool.evict(K[0])
    assert decision.action == "evict" and dp.index == {}
    with pytest.raises(KeyError):
        pool.evict(K[0])


def test_soft_pin_expires_after_its_ttl():
    clock = Clock()
    pool, _, _ = make_pool(clock=clock)
    pool.pin(K[0], ttl=5)
    assert pool.describe(K[0])["pin"] == "soft"
    clock.now += 6
    pool.tick()
    assert pool.describe(K[0])["pin"] is None
    assert "expire" in actions(pool, K[0])


def test_client_pin_flag_pins_softly():
    pool, dp, _ = make_pool(threshold=99)
    pool.offer(K[0], pin=True)
    assert K[0] in dp.index
    assert pool.describe(K[0])["pin"] == "soft"


def test_first_switch_hit_after_digest_records_latency():
    clock = Clock()
    pool, dp, _ = make_pool(clock=clock)
    pool.on_hot_key(K[0])
    clock.now += 0.02
    dp.hit(K[0])
    assert pool.poll_hits(only_pending=True) == 1
    summary = pool.metrics.snapshot()["hot_to_first_hit"]
    assert summary["count"] == 1 and summary["max_ms"] == pytest.approx(20, abs=1e-6)
    assert pool.poll_hits(only_pending=True) == 0  # no longer pending


def test_hits_on_a_reused_slot_are_not_credited_to_its_new_owner():
    pool, dp, _ = make_pool(capacity=1, threshold=1)
    pool.on_hot_key(K[0])
    dp.hit(K[0], 7)
    pool.poll_hits()
    pool.evict(K[0])
    pool.on_hot_key(K[1])
    pool.poll_hits()
    assert pool.describe(K[1])["hits"] == 0
    dp.hit(K[1], 2)
    pool.poll_hits()
    assert pool.describe(K[1])["hits"] == 2


def test_prefix_chain_admits_the_parent_before_the_child():
    pool, dp, _ = make_pool(capacity=4, threshold=99)
    pool.offer(K[0], depth=0)
    pool.offer(K[1], depth=1, parent=K[0])
    pool.on_hot_key(K[1])
    assert dp.index == {K[0]: 0, K[1]: 1}
    assert pool.metrics.admissions["prefix chain"] == 1


def test_failed_index_write_frees_the_slot():
    pool, dp, _ = make_pool()
    dp.fail_install = True
    assert pool.on_hot_key(K[0]) is None
    assert len(pool.slots) == 0
    dp.fail_install = False
    assert pool.on_hot_key(K[1]) == 0


def test_controller_restart_reconciles_with_the_switch(tmp_path):
    db = tmp_path / "state.sqlite"
    pool, dp, _ = make_pool(capacity=4, state=StateStore(db))
    pool.on_hot_key(K[0])
    pool.on_hot_key(K[1])
    pool.pin(K[2], ttl=None)
    # while the controller is down: the switch loses K[1]'s entry and someone installs K[3] at slot 3
    del dp.index[K[1]]
    dp.index[K[3]] = 3
    restarted, _, _ = make_pool(capacity=4, state=StateStore(db), dataplane=dp)
    counts = restarted.restore()
    assert counts == {"kept": 2, "adopted": 1, "reinstalled": 1, "pins": 1, "dropped": 0, "deferred": 0}
    assert dp.index == {K[0]: 0, K[1]: 1, K[2]: 2, K[3]: 3}
    assert restarted.slots.slot_of(K[1]) == 1
    assert restarted.describe(K[2])["pin"] == "hard"
    with pytest.raises(PinError):
        restarted.evict(K[2])


def test_restarted_switch_gets_its_index_back_and_stray_entries_go():
    pool, dp, _ = make_pool(capacity=4, threshold=1)
    pool.offer(K[0], value=b"v", version=3)
    pool.on_hot_key(K[1])
    dp.index.clear()
    dp.writes.clear()
    dp.index[K[7]] = 2  # an entry we never made
    assert pool.resync() == {"kept": 0, "reinstalled": 2, "removed": 1, "deferred": 0}
    assert dp.index == {K[0]: 0, K[1]: 1}
    # The value announced before the restart is not written back: a PUT may have passed since, unseen by the
    # restarted switch; the storage node's next reply refills the slot with the current version.
    assert dp.writes == []


def test_value_announced_before_admission_is_never_written_later():
    """A chunk announced with its value but not admitted then may be PUT anew before it turns hot: the later
    admission must leave the fill to the storage node's reply, never SLOT_WRITE the old announced copy."""
    pool, dp, _ = make_pool(capacity=4, threshold=5)
    assert pool.offer(K[0], value=b"old", version=1) is not None
    assert K[0] not in dp.index
    pool.on_hot_key(K[0], estimate=50)
    assert K[0] in dp.index
    assert dp.writes == []


def test_switch_counter_reset_does_not_hide_later_hits():
    pool, dp, _ = make_pool(capacity=2)
    pool.on_hot_key(K[0])
    dp.hit(K[0], 5)
    pool.poll_hits()
    dp.hits.clear()  # switch restarted: counters back to zero
    dp.hit(K[0], 2)
    pool.poll_hits()
    dp.hit(K[0], 1)
    pool.poll_hits()
    assert pool.describe(K[0])["hits"] == 8


def test_every_eviction_is_logged_with_a_reason():
    pool, _dp, _ = make_pool(capacity=1)
    pool.on_hot_key(K[0])
    pool.on_hot_key(K[1], estimate=10)
    evict = next(d for d in pool.decisions if d.action == "evict")
    assert evict.key == K[0] and "make room for" in evict.reason and "fewest hits" in evict.reason
    assert pool.metrics.evictions["capacity"] == 1


def test_default_value_policies_drive_the_pool_end_to_end():
    """The project default (value admission + value eviction sharing one reuse model, residual recycling)."""
    from controller.policy import PolicySpec, build_policies

    clock = Clock()
    dp, storage = FakeDataPlane(2), FakeStorage()
    pool = PoolManager(dp, build_policies(PolicySpec(), dp.capacity), mover=TierMover(TierMap(), storage), clock=clock)
    pool.on_hot_key(K[0], estimate=3)
    pool.on_hot_key(K[1], estimate=3)
    for _ in range(5):  # K[0] keeps being read from the switch
        clock.now += 1
        dp.hit(K[0], 4)
        pool.poll_hits()
    clock.now += 1
    for _ in range(4):
        pool.on_hot_key(K[2], estimate=50)
    assert dp.index == {K[0]: 0, K[2]: 1}  # the busy chunk stays, the idle one made room for the hot newcomer
    assert actions(pool, K[1]) == ["admit", "evict", "drop"]  # residual below residual's 0.05: dropped
    assert "lowest value" in next(d.reason for d in pool.decisions if d.action == "evict")
    assert storage.moves == []


def test_insert_announcing_a_newer_version_never_raises_min_version_by_itself():
    """Coherence (deliberate change): an announced version is an unverified claim (a PUT the storage node may
    refuse), so it never bounds the index entry; the controller checks the storage node and refills from it."""
    pool, dp, storage = make_pool(capacity=4, threshold=1)
    pool.offer(K[0], version=1)
    assert K[0] in dp.index and dp.min_versions[K[0]] == 0
    pool.offer(K[0], version=0xFFFFFFFF)  # forged: the storage node holds nothing newer
    assert dp.min_versions[K[0]] == 0 and dp.writes == []
    storage.stored[K[0]] = StoredChunk(version=3, chunk_count=1, value=b"v3")
    pool.offer(K[0], version=3)
    assert dp.writes == [(0, K[0], 3, b"v3")] and dp.min_versions[K[0]] == 3
    assert pool.describe(K[0])["version"] == 3


def test_hot_digest_admission_is_traced_stage_by_stage_and_a_failed_one_is_not():
    pool, dp, _ = make_pool()
    dp.fail_install = True
    assert pool.on_hot_key(K[0], received=1.0) is None
    assert pool.metrics.traces() == []  # nothing installed: no trace
    dp.fail_install = False
    assert pool.on_hot_key(K[1], received=1.0) == 0
    assert pool.on_hot_key(K[1], received=2.0) == 0  # already resident: no new admission, no trace
    (trace,) = pool.metrics.traces()
    assert trace["key"] == str(K[1]) and trace["received"] == 1.0
    stamps = [trace[stage] for stage in ("locked", "write_sent", "write_done", "done")]
    assert stamps == sorted(stamps)
