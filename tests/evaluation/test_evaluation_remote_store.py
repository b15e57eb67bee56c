"""The remote pool evicts as Mooncake Store documents: watermark, ratio, approximate LRU, leases, soft pins."""

from __future__ import annotations

import math

import pytest

from evaluation.cluster import ClusterConfig, simulate
from evaluation.remote_store import InfiniteRemote, MooncakeEviction, MooncakeRemote, build_remote
from evaluation.stream import BlockStream
from evaluation.synthetic import SyntheticOptions, generate
from policies.base import BlockInfo

ONE_SHARD = MooncakeEviction(shards=1)
"""One metadata shard makes the first pass an exact LRU, so counts and victims can be asserted exactly."""


def fill(pool: MooncakeRemote, keys: range, start_s: float = 0.0, depth: int = 1) -> None:
    for i, key in enumerate(keys):
        assert not pool.read_or_write(BlockInfo(key=key, depth=depth), start_s + i)


def test_nothing_is_evicted_up_to_the_high_watermark() -> None:
    pool = MooncakeRemote(100, ONE_SHARD)
    fill(pool, range(95))  # 95% = the watermark, not above it
    assert len(pool) == 95 and pool.stats.evictions == 0


def test_passing_the_watermark_evicts_the_ratio_oldest_first() -> None:
    pool = MooncakeRemote(100, ONE_SHARD)
    fill(pool, range(96))  # 96% > 95%: target max(5%, 96% − 95% + 5%) = 6% of 96 objects
    assert pool.stats.eviction_tasks == 1
    assert pool.stats.evictions == math.ceil(96 * 0.06)
    assert [k for k in range(96) if k not in pool] == list(range(6))


@pytest.mark.parametrize(("capacity", "watermark", "ratio"), [(40, 0.9, 0.1), (40, 0.8, 0.25), (50, 0.95, 0.05),
                                                             (40, 1.0, 0.05)])
def test_the_first_task_runs_past_the_watermark_and_evicts_the_ratio(capacity: int, watermark: float,
                                                                     ratio: float) -> None:
    pool = MooncakeRemote(capacity, MooncakeEviction(high_watermark=watermark, ratio=ratio, shards=1))
    key = 0
    while pool.stats.eviction_tasks == 0:
        pool.read_or_write(BlockInfo(key=key, depth=1), float(key))
        key += 1
    if watermark < 1:  # the put that took usage above the watermark
        objects = math.floor(capacity * watermark) + 1
        assert key == objects and pool.stats.rejected_puts == 0
    else:  # at 100% nothing is above the watermark: the failed put of a full pool starts the task
        objects = capacity
        assert key == capacity + 1 and pool.stats.rejected_puts == 1
    target = max(ratio, objects / capacity - watermark + ratio)
    assert pool.stats.evictions == math.ceil(objects * target)


def test_a_leased_object_is_not_evicted_even_when_the_quota_is_larger() -> None:
    pool = MooncakeRemote(20, MooncakeEviction(ratio=0.5, shards=1, lease_ttl_s=5.0))
    fill(pool, range(19), start_s=0.0)
    now = 100.0
    for key in range(4, 19):  # 15 reads: leases until now + 5 s
        assert pool.read_or_write(BlockInfo(key=key, depth=1), now)
    assert not pool.read_or_write(BlockInfo(key=99, depth=1), now)  # 20/20: asks for 55%
    assert all(key in pool for key in range(4, 19))
    assert not any(key in pool for key in range(4))
    assert 99 not in pool  # a fresh put holds no lease: with the quota unmet it goes too
    assert pool.stats.evictions == 5


def test_a_full_pool_of_leased_objects_refuses_the_put() -> None:
    pool = MooncakeRemote(4, MooncakeEviction(high_watermark=1.0, shards=1))
    fill(pool, range(4))
    for key in range(4):
        pool.read_or_write(BlockInfo(key=key, depth=1), 10.0)
    assert not pool.read_or_write(BlockInfo(key=50, depth=1), 10.0)
    assert 50 not in pool and pool.stats.rejected_puts == 1
    assert len(pool) == 4
    # Once the leases expire the next put's eviction task frees space again.
    assert not pool.read_or_write(BlockInfo(key=51, depth=1), 20.0)
    assert pool.stats.evictions > 0


def test_soft_pinned_objects_go_only_when_nothing_else_is_eligible() -> None:
    settings = MooncakeEviction(ratio=0.1, shards=1, soft_pin_depth=1)
    pool = MooncakeRemote(20, settings)
    fill(pool, range(10), depth=0)  # the ten oldest, soft pinned (system-prompt blocks)
    fill(pool, range(10, 20), start_s=10.0)
    assert pool.stats.evictions > 0
    assert all(key in pool for key in range(10))  # unpinned ones went instead

    strict = MooncakeRemote(10, MooncakeEviction(ratio=0.5, shards=1, soft_pin_depth=1,
                                                 allow_evict_soft_pinned=False, high_watermark=1.0))
    fill(strict, range(10), depth=0)
    assert not strict.read_or_write(BlockInfo(key=77, depth=1), 100.0)
    assert strict.stats.rejected_puts == 1 and strict.stats.evictions == 0  # pins hold, put refused

    allowed = MooncakeRemote(10, MooncakeEviction(ratio=0.5, shards=1, soft_pin_depth=1, high_watermark=1.0))
    fill(allowed, range(10), depth=0)
    allowed.read_or_write(BlockInfo(key=77, depth=1), 100.0)
    assert allowed.stats.evictions > 0 and 0 not in allowed  # the oldest pinned object went first


def test_a_soft_pin_lapses_after_its_ttl_without_access() -> None:
    pool = MooncakeRemote(20, MooncakeEviction(ratio=0.1, shards=1, soft_pin_depth=1, soft_pin_ttl_s=5.0))
    fill(pool, range(10), depth=0)
    fill(pool, range(10, 20), start_s=100.0)  # long after the pins lapsed: the old blocks rank oldest
    assert 0 not in pool


def test_many_shards_evict_about_the_ratio_but_not_exactly_the_oldest() -> None:
    pool = MooncakeRemote(2_000, MooncakeEviction())  # 1,024 shards
    fill(pool, range(1_901))
    evicted = [k for k in range(1_901) if k not in pool]
    target = max(0.05, 1_901 / 2_000 - 0.95 + 0.05)
    assert math.ceil(1_901 * target * 0.5) <= len(evicted) <= math.ceil(1_901 * target) + 50
    assert sum(evicted) / len(evicted) < 1_901 / 2  # mostly old objects …
    assert max(evicted) > len(evicted)  # … but not the exact oldest: approximate LRU


def test_build_remote_picks_the_tier_and_the_cluster_reports_its_evictions() -> None:
    assert isinstance(build_remote("mooncake", None, lambda c: None), InfiniteRemote)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="remote_tier"):
        ClusterConfig(remote_tier="fifo")
    stream = BlockStream.from_trace(generate(SyntheticOptions(requests=300), seed=1))
    results = {}
    for tier in ("mooncake", "lru", "infinite"):
        config = ClusterConfig(nodes=2, hbm_blocks=8, dram_blocks=0, storage_blocks=60, remote_tier=tier)
        results[tier] = simulate(stream, config)
    assert results["mooncake"].remote.evictions > 0 and results["mooncake"].remote.eviction_tasks > 0
    assert results["infinite"].remote.evictions == 0
    assert results["infinite"].prefix_hit_ratio >= results["lru"].prefix_hit_ratio


def test_lru_remote_counts_one_eviction_per_put_into_a_full_pool() -> None:
    from evaluation.cluster import NODE_TIER_POLICY
    from evaluation.remote_store import LruRemote
    from policies.base import Tier

    pool = LruRemote(3, lambda c: NODE_TIER_POLICY.build(c, Tier.STORAGE_DRAM))
    for key in range(5):
        pool.read_or_write(BlockInfo(key=key), float(key))
    assert pool.read_or_write(BlockInfo(key=4), 9.0)
    assert (pool.stats.puts, pool.stats.evictions) == (5, 2)
