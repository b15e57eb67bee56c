"""Our generic policies replay a block stream with exactly libCacheSim's hit count.

Each policy module follows the corresponding libCacheSim C source rule for rule (LFU's FIFO tie-break
among equal counts, S3-FIFO's "has_evicted" insertion rule, ARC's float p), so no tolerance is needed:
any difference is a bug in one of them. Capacities start at 20 blocks because libCacheSim's S3-FIFO
cannot insert when its small queue has a single slot (it requires object size < small queue size).
"""

from __future__ import annotations

import random

import pytest

from policies.base import BlockInfo
from policies.reference import ReferenceTrace, libcachesim_hit_count
from policies.registry import make_pool

GENERIC = ["lru", "lfu", "s3fifo", "arc"]
SIZES = [20, 64, 300]


def zipf_keys(seed: int = 11, n: int = 6000, universe: int = 800, skew: float = 0.9) -> list[int]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** skew for rank in range(universe)]
    return rng.choices(range(universe), weights=weights, k=n)


def our_hits(eviction: str, keys: list[int], capacity: int) -> int:
    pool = make_pool(capacity, "always", eviction, "drop", log_limit=0)
    return sum(pool.access(BlockInfo(key), float(i)) for i, key in enumerate(keys))


@pytest.mark.parametrize("capacity", SIZES)
@pytest.mark.parametrize("eviction", GENERIC)
def test_generic_policy_matches_libcachesim_on_zipf_stream(eviction: str, capacity: int) -> None:
    keys = zipf_keys()
    assert our_hits(eviction, keys, capacity) == libcachesim_hit_count(eviction, keys, capacity)


@pytest.mark.parametrize("capacity", SIZES)
@pytest.mark.parametrize("eviction", GENERIC)
def test_generic_policy_matches_libcachesim_on_conversation_excerpt(
    excerpt_stream, eviction: str, capacity: int
) -> None:
    keys = [block.key for block, _ in excerpt_stream]
    assert our_hits(eviction, keys, capacity) == libcachesim_hit_count(eviction, keys, capacity)


def test_belady_bounds_every_online_policy_on_the_excerpt(excerpt_stream) -> None:
    keys = [block.key for block, _ in excerpt_stream]
    with ReferenceTrace(keys) as trace:
        best = trace.run("belady", 64).hits
        assert all(trace.run(name, 64).hits <= best for name in GENERIC)
    assert best > libcachesim_hit_count("lru", keys, 64)


def test_reference_rejects_unknown_policy_and_bad_keys() -> None:
    with pytest.raises(ValueError, match="unknown libCacheSim policy"):
        libcachesim_hit_count("nope", [1, 2], 2)
    with pytest.raises(ValueError, match="non-negative ints"):
        libcachesim_hit_count("lru", [1, -2], 2)
    with pytest.raises(ValueError, match="capacity"):
        libcachesim_hit_count("lru", [1, 2], 0)
