"""The adaptive default: never below LRU or ARC on the shipped excerpt and a synthetic trace; pool contract;
adopting a new leader's contents."""

from __future__ import annotations

import pytest

from policies.base import BlockInfo
from policies.pool import Pool
from policies.registry import make_admission, make_pool


def hits(pool: Pool, stream: list[tuple[BlockInfo, float]]) -> int:
    return sum(pool.access(block, now) for block, now in stream)


@pytest.mark.parametrize(("stream_name", "capacity"), [
    ("excerpt_stream", 8), ("excerpt_stream", 32), ("excerpt_stream", 128), ("synthetic_stream", 8),
    ("synthetic_stream", 32), ("synthetic_stream", 128),
])
def test_adaptive_is_at_least_lru_and_arc(request, stream_name: str, capacity: int) -> None:
    stream = request.getfixturevalue(stream_name)
    baselines = {e: hits(make_pool(capacity, "always", e, "drop"), stream) for e in ("lru", "arc")}
    adaptive = hits(make_pool(capacity, "adaptive", "adaptive", "drop"), stream)
    assert adaptive >= max(baselines.values()), (adaptive, baselines)


def test_adaptive_pool_never_exceeds_its_capacity_and_follows_its_leader(excerpt_stream) -> None:
    pool = make_pool(16, "adaptive", "adaptive", "drop")
    ensemble = pool.admission.ensemble  # type: ignore[attr-defined]
    for block, now in excerpt_stream:
        pool.access(block, now)
        assert len(pool) <= 16
        assert ensemble.real == set(pool.resident())
    leader = ensemble.shadows[ensemble.leader]
    assert len(pool.resident() & leader.resident()) >= len(pool) - 1


def test_adaptive_halves_come_only_as_a_pair() -> None:
    with pytest.raises(ValueError, match="make_pool"):
        make_admission("adaptive")
    with pytest.raises(ValueError, match="together"):
        make_pool(4, "adaptive", "lru", "drop")


def test_access_many_matches_access_for_lru_and_for_a_logging_pool(synthetic_stream) -> None:
    for log_limit in (0, None):
        one, many = (make_pool(16, "always", "lru", "drop", log_limit=log_limit) for _ in range(2))
        singles = [one.access(block, now) for block, now in synthetic_stream]
        batched = [hit for block, now in synthetic_stream for hit in many.access_many([block], now)]
        assert singles == batched
        assert one.resident() == many.resident() and one.stats == many.stats


def test_a_switch_adopts_the_new_leaders_contents_and_counts_the_prefetches(synthetic_stream) -> None:
    pool = make_pool(8, "adaptive", "adaptive", "drop")
    ensemble = pool.admission.ensemble  # type: ignore[attr-defined]
    switched = 0
    for block, now in synthetic_stream:
        before, switches = pool.resident(), ensemble.switches
        hit = pool.access(block, now)
        assert hit == (block.key in before)  # a prefetch never serves the read that triggered it
        if ensemble.switches != switches:
            switched += 1
            leader = ensemble.shadows[ensemble.leader].resident()
            assert pool.resident() == leader
    assert switched >= 1
    assert pool.stats["prefetched"] >= 1


def test_lazy_following_prefetches_nothing(synthetic_stream) -> None:
    pool = make_pool(8, "adaptive", "adaptive", "drop", eviction_params={"adopt": "false"})
    for block, now in synthetic_stream:
        pool.access(block, now)
    assert pool.admission.ensemble.switches >= 1  # type: ignore[attr-defined]
    assert pool.stats["prefetched"] == 0


def test_adaptive_rejects_an_unknown_initial_leader() -> None:
    with pytest.raises(ValueError, match="initial_leader"):
        make_pool(8, "adaptive", "adaptive", "drop", eviction_params={"initial_leader": "fifo"})


def test_only_switches_that_pay_for_their_prefetches_happen(synthetic_stream) -> None:
    free, costly = (make_pool(8, "adaptive", "adaptive", "drop", eviction_params={"switch_cost": cost})
                    for cost in ("0", "1000"))
    for block, now in synthetic_stream:
        free.access(block, now)
        costly.access(block, now)
    assert free.stats["prefetched"] >= 1
    assert costly.stats["prefetched"] == 0  # a switch that needs no prefetch may still happen


def test_a_switch_whose_worst_case_the_lead_covers_prefetches_nothing(synthetic_stream) -> None:
    """`spend_lead`: with a lead over every expert larger than any adoption, every switch is lazy; without a lead
    (the fixture's pool at 8 blocks is never ahead of its best expert by more than it would prefetch) none is."""
    rich, plain = (make_pool(8, "adaptive", "adaptive", "drop") for _ in range(2))
    rich.admission.ensemble.real_hits = 10**6  # type: ignore[attr-defined]
    for block, now in synthetic_stream:
        rich.access(block, now)
        plain.access(block, now)
    ensembles = rich.admission.ensemble, plain.admission.ensemble  # type: ignore[attr-defined]
    assert ensembles[0].switches >= 1 and ensembles[0].lazy_switches == ensembles[0].switches
    assert rich.stats["prefetched"] == 0
    assert ensembles[1].lazy_switches == 0 and plain.stats["prefetched"] >= 1


def test_ties_at_full_size_follow_the_half_size_record(synthetic_stream) -> None:
    pool = make_pool(32, "adaptive", "adaptive", "drop")
    ensemble = pool.admission.ensemble  # type: ignore[attr-defined]
    assert set(ensemble._minis) == {0, 1, 2}  # every expert tied at the start (no hits yet)
    for block, now in synthetic_stream:
        pool.access(block, now)
    assert not ensemble._minis  # dropped once no expert's record equals another's
    with pytest.raises(ValueError, match="tie_break_capacity"):
        make_pool(8, "adaptive", "adaptive", "drop", eviction_params={"tie_break_capacity": "1"})
