"""Prefix semantics: only the longest leading run of hits is reusable."""

import pytest

from evaluation.prefix import HitCounter, leading_run

CASES = [
    ([], 0),
    ([True], 1),
    ([False], 0),
    ([True, True, True], 3),
    ([True, False, True, True], 1),
    ([False, True, True], 0),
    ([True, True, False, False, True], 2),
]


@pytest.mark.parametrize(("hits", "run"), CASES)
def test_leading_run_stops_at_the_first_miss(hits, run):
    assert leading_run(hits) == run


def test_hits_after_a_miss_count_as_block_hits_but_not_prefix_hits():
    counter = HitCounter()
    counter.add([True, False, True, True])  # block 2 and 3 are orphans: useless without block 1
    counter.add([True, True])
    assert (counter.block_refs, counter.block_hits, counter.prefix_hits) == (6, 5, 3)
    assert counter.block_hit_ratio == pytest.approx(5 / 6)
    assert counter.prefix_hit_ratio == pytest.approx(3 / 6)
    assert counter.per_request_prefix == [1, 2]
