"""The fast first-hit poll stays small however many admitted chunks are never hit (it ran every few ms over
all of them, so its counter Read grew with the pool and held up INSERT answers)."""

from __future__ import annotations

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
