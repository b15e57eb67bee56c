"""Properties that must hold whatever happens: key syntax round-trips, the slot map stays a bijection, and the
pool's index on the switch always equals its slot map, never exceeds capacity and never loses a pinned chunk."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.pool import PinError, PoolManager
from controller.tiers import TierMap, TierMover
from kvpool.keys import ChunkKey
from policies.slotpool import PoolFull, SlotMap
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

keys = st.builds(ChunkKey, st.integers(0, 0xFFFF), st.integers(0, 2**64 - 1), st.integers(0, 255))


@given(keys)
def test_key_text_round_trips(key):
    assert ChunkKey.parse(str(key)) == key


@pytest.mark.parametrize("text", ["", "1", "1:", "a:1:0", "1:g:0", "70000:1:0", "1:1:4294967296", "1:1:0:0", "-1:1:0"])
def test_bad_key_text_is_rejected_with_a_message(text):
    with pytest.raises(ValueError, match=r"key|must be"):
        ChunkKey.parse(text)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 20)), max_size=60))
def test_slot_map_stays_a_bijection(operations):
    slots = SlotMap(8)
    for allocate, n in operations:
        key = ChunkKey(0, n, 0)
        if allocate:
            try:
                slots.allocate(key)
            except PoolFull:
                assert slots.full
        else:
            slots.release(key)
        pairs = slots.items()
        assert len({s for _, s in pairs}) == len(pairs) == len(slots) <= 8
        assert all(slots.key_at(s) == k and 0 <= s < 8 for k, s in pairs)


operation = st.one_of(
    st.tuples(st.just("digest"), st.integers(0, 12), st.integers(1, 50)),
    st.tuples(st.just("insert"), st.integers(0, 12), st.integers(0, 1)),
    st.tuples(st.just("hit"), st.integers(0, 12), st.integers(1, 5)),
    st.tuples(st.just("pin"), st.integers(0, 12), st.integers(0, 1)),
    st.tuples(st.just("unpin"), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("evict"), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("tick"), st.just(0), st.integers(1, 30)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=40))
def test_switch_index_always_matches_the_slot_map(operations):
    clock = Clock()
    dataplane = FakeDataPlane(4)
    pool = PoolManager(dataplane, make_policies(threshold=2), mover=TierMover(TierMap(), FakeStorage()), clock=clock)
    for kind, n, arg in operations:
        key = ChunkKey(1, n, 0)
        try:
            if kind == "digest":
                pool.on_hot_key(key, arg)
            elif kind == "insert":
                pool.offer(key, value=b"v" if arg else None, version=1)
            elif kind == "hit" and key in dataplane.index:
                dataplane.hit(key, arg)
                pool.poll_hits()
            elif kind == "pin":
                pool.pin(key, ttl=10.0 if arg else None)
            elif kind == "unpin":
                pool.unpin(key)
            elif kind == "evict":
                pool.evict(key)
            elif kind == "tick":
                clock.now += arg
                pool.tick()
        except (PinError, KeyError):
            pass
        assert dataplane.index == dict(pool.slots.items())
        assert len(dataplane.index) <= dataplane.capacity
        pinned = pool.pins.protected(clock.now)
        assert pinned <= set(dataplane.index)
