"""What each policy is for, shown on small hand-made streams."""

from __future__ import annotations

import math

import pytest

from policies.base import BlockInfo, Tier, Victim
from policies.registry import make_admission, make_eviction, make_pool, make_recycling
from policies.request import AnnotatorOptions, RequestAnnotator
from policies.reuse import ReuseModel, ReuseParams


def chain(keys: list[int], turn: int = 1) -> list[BlockInfo]:
    parent = None
    out = []
    for depth, key in enumerate(keys):
        out.append(BlockInfo(key, depth=depth, parent=parent, is_last=depth == len(keys) - 1, turn=turn))
        parent = key
    return out


# ------------------------------------------------------------------ request annotation
def test_annotator_numbers_turns_by_shared_prefix_and_sizes_the_partial_tail() -> None:
    annotator = RequestAnnotator()
    first = annotator.blocks([0, 1, 2], input_length=1100)
    second = annotator.blocks([0, 1, 3, 4], input_length=2000)
    stranger = annotator.blocks([0, 9], input_length=600)
    assert [b.turn for b in first] == [1, 1, 1]
    assert [b.turn for b in second] == [2, 2, 2, 2]
    assert [b.turn for b in stranger] == [1, 1]  # sharing only the common root block is not a next turn
    assert [b.tokens for b in first] == [512, 512, 76]
    assert [b.parent for b in second] == [None, 0, 1, 3]
    assert [b.is_last for b in second] == [False, False, False, True]


def test_annotator_rejects_a_length_that_does_not_fit_the_block_count() -> None:
    with pytest.raises(ValueError, match="needs 1 blocks"):
        RequestAnnotator().blocks([0, 1], input_length=100)
    annotator = RequestAnnotator(AnnotatorOptions(min_shared_blocks=1))
    annotator.blocks([5], now=0.0)
    (again,) = annotator.blocks([5], now=30.0)
    assert (again.turn, again.turn_gap_s, again.request_blocks) == (2, 30.0, 1)


# ------------------------------------------------------------------ eviction
def test_prefix_lru_evicts_the_leaf_not_the_older_parent_it_depends_on() -> None:
    policy = make_eviction("prefix_lru")
    for block in chain([1, 2, 3]):
        policy.on_insert(block, 0.0)
    policy.on_insert(BlockInfo(9), 1.0)
    assert policy.victim(2.0).key == 3
    policy.on_remove(3)
    assert policy.victim(2.0).key == 2  # now a leaf, older than 9
    assert policy.victim(2.0, protected=frozenset({2})).key == 9


def test_lfu_evicts_the_least_read_block_first_in_first_out_among_equals() -> None:
    policy = make_eviction("lfu")
    for key in (1, 2, 3):
        policy.on_insert(BlockInfo(key), 0.0)
    policy.on_hit(BlockInfo(1), 0.0)
    assert policy.victim(0.0).key == 2
    assert policy.victim(0.0, protected=frozenset({2, 3})).key == 1


@pytest.mark.parametrize("name", ["lru", "lfu", "s3fifo", "arc", "prefix_lru", "value", "kvcache_wild"])
def test_every_eviction_policy_raises_lookup_error_when_all_blocks_are_pinned(name: str) -> None:
    policy = make_eviction(name, capacity_blocks=20)
    blocks = [BlockInfo(key) for key in range(3)]
    for block in blocks:
        getattr(policy, "record", lambda b, n: None)(block, 0.0)
        policy.on_insert(block, 0.0)
    with pytest.raises(LookupError, match="pinned"):
        policy.victim(1.0, protected=frozenset(range(3)))


def test_kvcache_wild_breaks_ties_by_evicting_the_deeper_block() -> None:
    policy = make_eviction("kvcache_wild")
    for block in chain([10, 11, 12]):
        policy.record(block, 0.0)
        policy.on_insert(block, 0.0)
    victim = policy.victim(5.0)
    assert victim.key == 12
    assert "offset 2" in victim.reason


def test_kvcache_wild_keeps_the_type_that_comes_back() -> None:
    policy = make_eviction("kvcache_wild", {"prior_weight": "1"})
    for t in range(50):  # turn-3 blocks are re-read every 10 s; turn-1 blocks never
        policy.record(BlockInfo(("hot", t % 5), turn=3), 10.0 * t)
        policy.record(BlockInfo(("cold", t), turn=1), 10.0 * t)
    policy.on_insert(BlockInfo("a", turn=3), 500.0)
    policy.on_insert(BlockInfo("b", turn=1), 501.0)
    assert policy.victim(502.0).key == "b"


def test_value_eviction_prefers_to_evict_prompt_tails_once_it_learns_they_never_return() -> None:
    pool = make_pool(4, "always", "value", "drop", log_limit=0)
    for t in range(200):  # each request re-reads a shared prefix and ends in a fresh tail
        for block in chain([0, 1, 1000 + t]):
            pool.access(block, float(t))
    assert {0, 1} <= pool.resident()


def test_value_admission_refuses_tails_when_the_pool_holds_reused_blocks() -> None:
    pool = make_pool(2, "value", "value", "drop")
    for t in range(200):
        for block in chain([0, 1, 1000 + t]):
            pool.access(block, float(t))
    assert pool.resident() == frozenset({0, 1})
    assert pool.events[-1].kind == "bypassed"


# ------------------------------------------------------------------ admission
def test_frequency_count_halves_every_half_life() -> None:
    admission = make_admission("frequency", {"half_life_s": 10, "threshold": 1.5})
    block = BlockInfo(7)
    admission.record(block, 0.0)
    admission.record(block, 0.0)
    assert admission.score(block, 10.0) == pytest.approx(1.0)
    assert admission.admit(block, 0.0) and not admission.admit(block, 10.0)


def test_tinylfu_estimate_counts_reads_and_ageing_halves_it() -> None:
    admission = make_admission("tinylfu", {"sample_size": 64})
    block = BlockInfo("k")
    for _ in range(9):
        admission.record(block, 0.0)
    assert admission.estimate("k") == 9  # one in the doorkeeper, eight in the sketch
    for other in range(64 - 9):
        admission.record(BlockInfo(other), 0.0)
    assert admission.estimate("k") == 4


def test_reuse_model_learns_reuse_probability_and_decays_with_age() -> None:
    model = ReuseModel(ReuseParams(prior_weight=0.01, refresh=1))
    for t in range(100):
        model.observe(BlockInfo("shared", turn=2), float(t))
        model.observe(BlockInfo(("tail", t), is_last=True), float(t))
    shared = model.last("shared")[0]
    tail = model.last(("tail", 99))[0]
    assert model.probability(shared, 0.0) > 0.9 > 0.05 > model.probability(tail, 0.0)
    assert model.probability(shared, 60.0) < model.probability(shared, 1.0)
    assert model.fit(shared)[1] == pytest.approx(1.0, rel=0.1)  # re-read every second


# ------------------------------------------------------------------ recycling
@pytest.mark.parametrize(
    ("name", "params", "residual", "tier", "expected"),
    [
        ("drop", None, 9.0, Tier.SWITCH, Tier.ABSENT),
        ("demote", None, 0.0, Tier.SWITCH, Tier.STORAGE_DRAM),
        ("demote", None, 0.0, Tier.STORAGE_DRAM, Tier.STORAGE_DISK),
        ("demote", None, 0.0, Tier.STORAGE_DISK, Tier.ABSENT),
        ("residual", {"threshold": 1}, 2.0, Tier.SWITCH, Tier.STORAGE_DRAM),
        ("residual", {"threshold": 1}, 0.5, Tier.SWITCH, Tier.ABSENT),
    ],
)
def test_recycling_sends_victims_where_their_policy_says(name, params, residual, tier, expected) -> None:
    decision = make_recycling(name, params).decide(Victim("k", residual, "test"), tier, 0.0)
    assert decision.tier is expected
    assert decision.reason


def test_value_scores_are_finite_and_non_negative(synthetic_stream) -> None:
    pool = make_pool(16)
    for block, now in synthetic_stream:
        pool.access(block, now)
        score = pool.admission.score(block, now)
        assert math.isfinite(score) and score >= 0.0
