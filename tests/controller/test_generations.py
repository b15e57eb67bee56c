"""Coherence (docs/dataplane.md): every path that (re)installs an index entry carries a fresh, strictly increasing admission
generation, persisted across controller restarts and above anything the switch still holds."""

from __future__ import annotations

from controller.pool import PoolManager
from controller.state import StateStore
from controller.tiers import StoredChunk, TierMap, TierMover
from kvpool.keys import ChunkKey
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

K = [ChunkKey(1, 0x3000 + i, 0) for i in range(8)]


def make_pool(dataplane=None, state=None, capacity=4) -> tuple[PoolManager, FakeDataPlane, FakeStorage]:
    dataplane = dataplane or FakeDataPlane(capacity)
    storage = FakeStorage()
    pool = PoolManager(dataplane, make_policies(threshold=1), state=state, mover=TierMover(TierMap(), storage),
                       clock=Clock())
    return pool, dataplane, storage


def generations(dp: FakeDataPlane) -> list[int]:
    return [g for _, _, g in dp.installs]


def test_every_install_path_uses_a_fresh_increasing_nonzero_generation():
    pool, dp, storage = make_pool()
    pool.on_hot_key(K[0])                              # hot-key digest
    pool.pin(K[1])                                     # CLI pin
    pool.offer(K[2])                                   # INSERT without version
    pool.offer(K[3], version=5)                        # INSERT with version
    storage.stored[K[3]] = StoredChunk(5, 1, b"v5")
    pool.offer(K[3], value=b"x", version=5)            # SLOT_WRITE fill: the entry is re-installed first
    dp.index.clear()
    pool.resync()                                      # switch restart
    seen = generations(dp)
    assert len(seen) == 4 + 1 + 4 and 0 not in seen
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


def test_evict_and_readmit_into_the_same_slot_changes_the_generation():
    pool, dp, _ = make_pool(capacity=1)
    pool.on_hot_key(K[0])
    first = dp.generations[K[0]]
    pool.evict(K[0])
    pool.pin(K[0])
    assert dp.index[K[0]] == 0 and dp.generations[K[0]] > first


def test_restore_after_a_controller_restart_never_reuses_a_generation(tmp_path):
    db = tmp_path / "state.sqlite"
    pool, dp, _ = make_pool(state=StateStore(db))
    for key in K[:3]:
        pool.on_hot_key(key)
    before = set(generations(dp))
    kept = dict(dp.generations)
    del dp.index[K[1]]  # lost while the controller was down
    restarted, _, _ = make_pool(dataplane=dp, state=StateStore(db))
    counts = restarted.restore()
    assert counts["kept"] == 2 and counts["reinstalled"] == 1
    assert dp.generations[K[0]] == kept[K[0]]  # kept entries keep what the switch holds
    assert dp.generations[K[1]] > max(before)  # the re-installed one gets a fresh generation
    restarted.on_hot_key(K[5])
    assert dp.generations[K[5]] > dp.generations[K[1]]


def test_restarted_controller_without_state_starts_above_the_switchs_generations():
    pool, dp, _ = make_pool()
    for key in K[:2]:
        pool.on_hot_key(key)
    highest = max(dp.generations.values())
    fresh, _, _ = make_pool(dataplane=dp)  # state lost: the switch's entries are adopted
    assert fresh.restore()["adopted"] == 2
    fresh.on_hot_key(K[4])
    assert dp.generations[K[4]] > highest


def test_resync_reinstalls_an_entry_whose_generation_differs_from_ours():
    pool, dp, _ = make_pool()
    pool.on_hot_key(K[0])
    dp.generations[K[0]] = 999  # someone re-installed it behind our back
    assert pool.resync()["reinstalled"] == 1
    assert dp.generations[K[0]] > 999
