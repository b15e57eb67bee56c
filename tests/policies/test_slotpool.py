"""SlotPool: Pool's decisions over numbered slots, with admission generations and pins with a TTL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import registry
from policies.base import BlockInfo, Tier
from policies.slotpool import GenerationCounter, PinnedError, SlotPool
from policies.spec import PolicySpec


def make(capacity=3, eviction="lru", admission="always", recycling="drop", generations=None) -> SlotPool:
    return SlotPool(capacity, registry.make_admission(admission), registry.make_eviction(eviction, capacity_blocks=capacity),
                    registry.make_recycling(recycling), generations)


def block(key) -> BlockInfo:
    return BlockInfo(key)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=80), st.sampled_from(["lru", "lfu", "s3fifo", "arc"]))
def test_residents_are_exactly_those_of_pool_on_the_same_accesses(keys, eviction):
    """The controller's driver decides as the evaluator's: same resident set after every access."""
    slotted = make(3, eviction)
    reference = registry.make_pool(3, "always", eviction, "drop", log_limit=0)
    for t, key in enumerate(keys):
        now = float(t)
        reference.access(block(key), now)
        if key in slotted:
            slotted.hit(block(key), now)
        else:
            slotted.record(block(key), now)
            slotted.place(block(key), now)
        assert set(k for k, _ in slotted.slots.items()) == reference.resident()
        assert len(slotted.slots) <= 3


def test_newcomer_takes_the_victims_slot_and_a_fresh_generation():
    pool = make(2)
    first = pool.place(block("a"), 0)
    second = pool.place(block("b"), 1)
    third = pool.place(block("c"), 2)
    assert (first.slot, second.slot, third.slot) == (0, 1, 0)
    assert [e.key for e in third.evicted] == ["a"] and third.evicted[0].slot == 0
    assert third.evicted[0].recycle.tier is Tier.ABSENT
    assert first.generation < second.generation < third.generation
    assert pool.generation_of("a") is None and pool.generation_of("c") == third.generation


def test_readmission_of_the_same_key_into_the_same_slot_gets_a_new_generation():
    pool = make(1)
    before = pool.place(block("a"), 0)
    pool.evict("a", 1, "operator")
    after = pool.place(block("a"), 2)
    assert after.slot == before.slot and after.generation > before.generation
    assert pool.regenerate("a") > after.generation


def test_generations_stay_increasing_across_a_restart_from_the_reserved_ceiling():
    saved = []
    counter = GenerationCounter(reserve=saved.append, block=4)
    used = [counter.next() for _ in range(6)]
    restarted = GenerationCounter(start=saved[-1], reserve=saved.append, block=4)
    assert restarted.next() > max(used)
    assert used == sorted(set(used)) and 0 not in used


def test_a_generation_seen_on_the_switch_is_never_handed_out_again():
    counter = GenerationCounter()
    counter.above(41)
    assert counter.next() == 42


def test_generations_are_32_bit():
    counter = GenerationCounter(start=(1 << 32) - 1)
    assert counter.next() == (1 << 32) - 1
    with pytest.raises(OverflowError):
        counter.next()


def test_pinned_key_is_never_the_victim_until_its_soft_pin_lapses():
    pool = make(2)
    pool.place(block("a"), 0)
    pool.pin("a", 0, ttl=10)
    pool.place(block("b"), 1)
    assert [e.key for e in pool.place(block("c"), 2).evicted] == ["b"]  # a is older but pinned
    with pytest.raises(PinnedError):
        pool.evict("a", 3, "operator")
    assert [e.key for e in pool.place(block("d"), 11).evicted] == ["a"]  # the pin lapsed at 10


def test_a_pool_full_of_pins_refuses_with_the_reason():
    pool = make(1)
    pool.place(block("a"), 0)
    pool.pin("a", 0)
    placement = pool.place(block("b"), 1, compare=False)
    assert placement.slot is None and "pinned" in (placement.refused or "")
    assert "a" in pool and "b" not in pool


def test_held_keys_are_protected_for_one_placement_only():
    pool = make(2)
    pool.place(block("parent"), 0)
    pool.place(block("other"), 1)
    placed = pool.place(block("child"), 2, hold={"parent"})
    assert [e.key for e in placed.evicted] == ["other"]  # LRU would have taken the parent
    assert not pool.pool.pinned()


def test_cancel_undoes_a_placement_without_recycling():
    pool = make(2, recycling="demote")
    pool.place(block("a"), 0)
    pool.cancel("a")
    assert "a" not in pool and len(pool) == 0 and pool.generation_of("a") is None


def test_claim_binds_a_given_slot_and_generation_and_lifts_the_counter():
    pool = make(4)
    pool.claim(block("a"), 3, 77, now=0)
    assert pool.slots.slot_of("a") == 3 and pool.generation_of("a") == 77
    assert pool.place(block("b"), 1).generation == 78


def test_replaced_policies_know_every_resident_and_keep_pins():
    pool = make(2)
    pool.place(block("a"), 0)
    pool.pin("a", 0)
    pool.place(block("b"), 1)
    spec = PolicySpec("always", "lfu", "drop")
    parts = spec.policies(2)
    pool.replace_policies(parts.admission, parts.eviction, parts.recycling, {}, now=2)
    assert pool.eviction.name == "lfu"
    assert [e.key for e in pool.place(block("c"), 3).evicted] == ["b"]


def test_policy_spec_text_round_trips_the_evaluators_syntax():
    spec = PolicySpec.parse("freq:threshold=2+lru+demote")
    assert (spec.admission, spec.eviction, spec.recycling) == ("freq", "lru", "demote")
    assert spec.admission_params == {"threshold": "2"} and spec.name == "freq:threshold=2+lru+demote"
    assert PolicySpec.parse("lru") == PolicySpec("always", "lru", "drop", label="lru")
    assert spec.with_policy("eviction", "lfu", {}).eviction == "lfu"
