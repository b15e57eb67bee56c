"""The fast first-hit poll stays small however many admitted chunks are never hit (it ran every few ms over
all of them, so its counter Read grew with the pool and held up INSERT answers)."""

from __future__ import annotations

import threading

import pytest

from controller.ledger import FIRST_HIT_SLOWEST_POLL_S, PendingFirstHits
from controller.pool import PoolManager, PoolOptions
from controller.tiers import TierMap, TierMover
from kvpool.keys import ChunkKey
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

CAPACITY = 128
KEYS = [ChunkKey(1, 0x3000 + i, 0) for i in range(CAPACITY)]


class ReadRecordingDataPlane(FakeDataPlane):
    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.reads: list[list[int]] = []

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        self.reads.append(list(slots) if slots is not None else list(range(self.capacity)))
        return super().slot_hits(slots)


def admitted_pool(options: PoolOptions) -> tuple[PoolManager, ReadRecordingDataPlane, Clock]:
    clock = Clock()
    dataplane = ReadRecordingDataPlane(CAPACITY)
    pool = PoolManager(dataplane, make_policies(threshold=1), mover=TierMover(TierMap(), FakeStorage()),
                       clock=clock, options=options)
    for key in KEYS:  # one admission every 10 ms, none of them hit
        pool.on_hot_key(key)
        clock.now += 0.010
    dataplane.reads.clear()
    return pool, dataplane, clock


def test_fast_first_hit_poll_reads_only_the_newest_admissions():
    options = PoolOptions(first_hit_window=1.0, first_hit_max_slots=16)
    pool, dataplane, _ = admitted_pool(options)
    pool.poll_hits(only_pending=True)
    assert len(dataplane.reads) == 1
    newest = sorted(pool.slots.slot_of(k) for k in KEYS[-16:])
    assert sorted(dataplane.reads[0]) == newest


def test_chunks_past_the_window_leave_the_fast_poll_but_the_regular_poll_still_times_their_first_hit():
    pool, dataplane, clock = admitted_pool(PoolOptions(first_hit_window=1.0, first_hit_max_slots=1000))
    clock.now += 0.505  # the oldest admission is now 1.785 s old, the newest 0.515 s (no ties with the window)
    pool.poll_hits(only_pending=True)
    assert len(dataplane.reads[-1]) == sum(1 for i in range(CAPACITY) if 0.505 + 0.010 * (CAPACITY - i) <= 1.0)
    clock.now += 1.0
    dataplane.reads.clear()
    assert pool.poll_hits(only_pending=True) == 0
    assert dataplane.reads == []  # nothing pending any more: no Read at all
    dataplane.hit(KEYS[0])
    assert pool.poll_hits() == 1  # the regular poll
    assert pool.describe(KEYS[0])["hits"] == 1


def test_the_fast_poll_sleeps_while_nothing_is_pending_and_wakes_at_an_admission():
    pool, _, clock = admitted_pool(PoolOptions(first_hit_window=1.0))
    pending = pool.pending_first_hit
    assert pending.wait(0)  # admissions pending: the poll runs
    clock.now += 2.0
    pool.poll_hits(only_pending=True)  # every admission is past its window: none pending any more
    assert len(pending) == 0 and not pending.wait(0)  # the poll's thread sleeps (no wake-ups every 2 ms)
    key = ChunkKey(1, 0x9000, 0)
    pool.on_hot_key(key)
    assert key in pending and pending.wait(0)


def test_the_fast_poll_backs_off_as_the_newest_admission_ages():
    pool, _, clock = admitted_pool(PoolOptions(first_hit_window=1.0))
    pending = pool.pending_first_hit
    newest = clock.now - 0.010  # admitted_pool's last admission
    fastest = 0.002
    assert pending.poll_interval(newest, fastest) == fastest  # just admitted: the finest timing
    assert pending.poll_interval(newest + 0.016, fastest) == fastest
    assert pending.poll_interval(newest + 0.320, fastest) == pytest.approx(0.320 / 16)  # the hit timed within 6%
    assert pending.poll_interval(newest + 2.0, fastest) == FIRST_HIT_SLOWEST_POLL_S
    # Reads over a whole 1 s window: tens, not the 500 of a fixed 2 ms period
    t, polls = newest, 0
    while t < newest + 1.0:
        t += pending.poll_interval(t, fastest)
        polls += 1
    assert 20 <= polls <= 100, polls


def _waiter(pending: PendingFirstHits) -> tuple[threading.Thread, list[bool]]:
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(pending.wait(None)), daemon=True)
    thread.start()
    return thread, got


def test_a_sleeper_on_pending_first_hits_is_woken_by_an_admission_and_by_wake_alone():
    pending = PendingFirstHits()
    assert pending.wait(0) is False, "nothing pending: the wait times out"
    thread, got = _waiter(pending)
    pending.add(ChunkKey(0, 1, 0), 0.0)
    thread.join(30)
    assert got == [True], "an admission ends an unbounded wait"
    pending.discard(ChunkKey(0, 1, 0))
    assert pending.wait(0) is False and len(pending) == 0
    thread, got = _waiter(pending)
    pending.wake()
    thread.join(30)
    assert got == [False], "wake ends it too, with nothing pending"
    assert pending.wait(None) is False, "and every later wait (the service stops)"


def test_an_empty_pool_is_idle_until_a_chunk_is_admitted_or_pinned():
    pool, _dp, clock = admitted_pool(PoolOptions())
    assert not pool.idle()
    for key, _slot in list(pool.slots.items()):
        pool.evict(key)
    assert pool.idle()
    pool.pin(ChunkKey(0, 0x77, 0), ttl=5.0, now=clock())
    assert not pool.idle()
