"""Golden results of the pool replay on a small seeded trace, checked against libCacheSim's LRU and MIN."""

import pytest

from evaluation.bounds import bound_counters
from evaluation.experiments import parse_policies
from evaluation.replay import replay_pool, sweep
from evaluation.stream import BlockStream
from evaluation.synthetic import SyntheticOptions, generate
from policies.reference import libcachesim_hit_count
from policies.spec import PolicySpec

SEEDED = SyntheticOptions(requests=600, sessions_per_s=3.0, system_prompts=10, templates_per_prompt=4)

# Golden values for generate(SEEDED, seed=11): references, unique blocks, and hits per capacity.
GOLDEN = {"refs": 7838, "unique": 2235, "lru": {8: 0, 32: 826, 128: 2433}, "min": {8: 1153, 32: 2608, 128: 4248}}


@pytest.fixture(scope="module")
def stream():
    return BlockStream.from_trace(generate(SEEDED, 11))


def test_stream_matches_the_golden_shape(stream):
    assert (len(stream), stream.unique_blocks) == (GOLDEN["refs"], GOLDEN["unique"])


@pytest.mark.parametrize("capacity", [8, 32, 128])
def test_pool_lru_hits_equal_libcachesim_lru_and_the_golden_count(stream, capacity):
    counter, stats = replay_pool(stream, PolicySpec.parse("lru"), capacity)
    keys = [b.key for b in stream.blocks]
    assert counter.block_hits == libcachesim_hit_count("lru", keys, capacity)
    assert counter.block_hits == GOLDEN["lru"][capacity]
    assert stats.get("hits", 0) == counter.block_hits
    assert counter.prefix_hits <= counter.block_hits


@pytest.mark.parametrize("capacity", [8, 32, 128])
def test_min_bounds_lru_and_the_ideal_bounds_min(stream, capacity):
    (minimum,), ideal = bound_counters(stream, [capacity])[0].values(), bound_counters(stream, [1])[1]
    lru, _ = replay_pool(stream, PolicySpec.parse("lru"), capacity)
    assert lru.block_hits <= minimum.block_hits <= ideal.block_hits
    assert minimum.block_hits == GOLDEN["min"][capacity]


def test_sweep_runs_every_policy_at_every_size(stream):
    runs = sweep(stream, parse_policies("lru"), [0.01, 0.05])
    assert [(r.policy, r.fraction) for r in runs] == [("lru", 0.01), ("lru", 0.05)]
    assert runs[0].capacity_blocks == stream.capacity(0.01)
    assert runs[0].counter.block_hit_ratio <= runs[1].counter.block_hit_ratio


def test_bad_policy_specs_are_rejected():
    for text in ("", "a+b+c+d", "lru+", "no-such-policy"):
        with pytest.raises((ValueError, KeyError, LookupError)):
            parse_policies(text)
