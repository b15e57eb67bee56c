"""The pool's bookkeeping: hits, admission, eviction with recycling, pins, explicit eviction, its log."""

from __future__ import annotations

import pytest

from policies.base import BlockInfo, Tier
from policies.pool import Pool, PoolEvent
from policies.registry import make_admission, make_eviction, make_pool, make_recycling


def lru_pool(capacity: int = 2, recycling: str = "drop", admission: str = "always", **kwargs) -> Pool:
    return Pool(
        capacity, make_admission(admission), make_eviction("lru"), make_recycling(recycling), **kwargs
    )


def test_second_read_of_an_admitted_block_hits() -> None:
    pool = lru_pool()
    assert pool.access(BlockInfo(1), 0.0) is False
    assert pool.access(BlockInfo(1), 1.0) is True
    assert pool.stats["hits"] == 1 and pool.stats["misses"] == 1
    assert list(pool.events) == [PoolEvent("admitted", 1, "missed and admitted")]


def test_full_pool_evicts_least_recent_and_logs_eviction_then_drop() -> None:
    pool = lru_pool()
    for key in (1, 2, 1, 3):
        pool.access(BlockInfo(key), 0.0)
    assert pool.resident() == frozenset({1, 3})
    kinds = [(e.kind, e.key) for e in pool.events]
    assert kinds[-3:] == [("evicted", 2), ("dropped", 2), ("admitted", 3)]


def test_demote_recycling_sends_switch_victims_to_storage_dram() -> None:
    pool = lru_pool(1, recycling="demote")
    pool.access(BlockInfo(1), 0.0)
    pool.access(BlockInfo(2), 0.0)
    demoted = [e for e in pool.events if e.kind == "demoted"]
    assert demoted == [PoolEvent("demoted", 1, demoted[0].reason, Tier.STORAGE_DRAM)]


def test_pinned_block_survives_and_the_next_least_recent_leaves() -> None:
    pool = lru_pool()
    pool.access(BlockInfo(1), 0.0)
    pool.access(BlockInfo(2), 0.0)
    pool.pin(1)
    pool.access(BlockInfo(3), 0.0)
    assert pool.resident() == frozenset({1, 3})
    pool.unpin(1)
    assert pool.pinned() == frozenset()


def test_miss_is_bypassed_when_every_resident_block_is_pinned() -> None:
    pool = lru_pool(1)
    pool.access(BlockInfo(1), 0.0)
    pool.pin(1)
    assert pool.access(BlockInfo(2), 0.0) is False
    assert pool.resident() == frozenset({1})
    assert pool.events[-1].kind == "bypassed"


def test_pin_and_unpin_misuse_raise_clear_errors() -> None:
    pool = lru_pool()
    with pytest.raises(KeyError, match="not resident"):
        pool.pin(9)
    with pytest.raises(KeyError, match="not pinned"):
        pool.unpin(9)
    pool.access(BlockInfo(1), 0.0)
    pool.pin(1)
    with pytest.raises(ValueError, match="pinned"):
        pool.evict(1)


def test_explicit_evict_removes_without_recycling() -> None:
    pool = lru_pool(recycling="demote")
    pool.access(BlockInfo(1), 0.0)
    assert pool.evict(1, "invalidated") is True
    assert pool.evict(1) is False
    assert 1 not in pool
    assert pool.events[-1] == PoolEvent("evicted", 1, "invalidated")
    assert pool.stats["demoted"] == 0


def test_refused_admission_is_logged_as_bypass() -> None:
    pool = lru_pool(admission="frequency")
    assert pool.access(BlockInfo(1), 0.0) is False
    assert len(pool) == 0
    assert pool.events[-1].kind == "bypassed"
    pool.access(BlockInfo(1), 0.0)  # read twice at once: a prefix shared by concurrent requests
    assert 1 in pool


def test_log_limit_bounds_the_event_log_and_zero_disables_it() -> None:
    bounded = lru_pool(1, log_limit=3)
    silent = lru_pool(1, log_limit=0)
    for key in range(10):
        bounded.access(BlockInfo(key), 0.0)
        silent.access(BlockInfo(key), 0.0)
    assert len(bounded.events) == 3 and len(silent.events) == 0
    assert silent.stats["evicted"] == 9


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity_blocks"):
        make_pool(0)


def test_tinylfu_refuses_a_one_off_newcomer_over_a_popular_victim() -> None:
    pool = lru_pool(1, admission="tinylfu")
    for t in range(5):
        pool.access(BlockInfo("hot"), float(t))
    assert pool.access(BlockInfo("cold"), 6.0) is False
    assert pool.resident() == frozenset({"hot"})
    for t in range(7, 14):
        pool.access(BlockInfo("cold"), float(t))
    assert "cold" in pool


def test_refusal_rule_is_exported_for_drivers_with_their_own_slots() -> None:
    from policies.base import Victim
    from policies.pool import refusal

    victim = Victim("old", 2.0, "test")
    assert refusal(make_admission("always"), 0.0, victim, BlockInfo("old"), 0.0) is None
    assert "less than victim" in refusal(make_admission("value"), 1.0, victim, BlockInfo("old"), 0.0)
    assert refusal(make_admission("value"), 2.0, victim, BlockInfo("old"), 0.0) is None
    tinylfu = make_admission("tinylfu")
    assert "not more popular" in refusal(tinylfu, 0.0, victim, BlockInfo("old"), 0.0)  # ties refuse
