"""Regression guard: hit counts of every policy pair on a small seeded synthetic chat stream.

The numbers were produced once, by replaying `conftest.synthetic_requests(seed=7, requests=400)`
(1,681 block references, 789 distinct blocks) through `make_pool(capacity, admission, eviction,
"drop")` with default parameters, at capacities 20, 40 and 80 blocks, and pasted here. A change in
any of them means a policy's behaviour changed: if that was intended, re-run and update the table.
"""

from __future__ import annotations

import pytest

from policies.registry import make_pool

CAPACITIES = (20, 40, 80)
GOLDEN: dict[str, tuple[int, int, int]] = {
    "always+lru": (796, 879, 892),
    "always+lfu": (662, 692, 746),
    "always+s3fifo": (730, 763, 796),
    "always+arc": (795, 861, 867),
    "always+prefix_lru": (813, 882, 892),
    "always+kvcache_wild": (810, 878, 891),
    "always+value": (831, 878, 892),
    "frequency+lru": (656, 656, 656),
    "tinylfu+lru": (650, 660, 687),
    "value+value": (841, 875, 892),
    "value+kvcache_wild": (857, 882, 891),
    "always+conversation": (836, 884, 887),
    "conversation+conversation": (837, 884, 887),
    "adaptive+adaptive": (834, 885, 892),
}


@pytest.mark.parametrize("pair", sorted(GOLDEN))
def test_hit_counts_match_the_recorded_golden_values(synthetic_stream, pair: str) -> None:
    admission, eviction = pair.split("+")
    hits = []
    for capacity in CAPACITIES:
        pool = make_pool(capacity, admission, eviction, "drop", log_limit=0)
        hits.append(sum(pool.access(block, now) for block, now in synthetic_stream))
    assert tuple(hits) == GOLDEN[pair]


def test_synthetic_stream_is_the_one_the_golden_values_were_made_from(synthetic_stream) -> None:
    assert len(synthetic_stream) == 1681
    assert len({block.key for block, _ in synthetic_stream}) == 789
