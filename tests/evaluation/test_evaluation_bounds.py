"""MIN and the ideal: hand-checked on a tiny stream, and equal to libCacheSim's own replay."""

from evaluation.bounds import NEVER, belady_hits, ideal_hits, next_use
from policies.reference import libcachesim_hit_count

SEQ = [1, 2, 3, 1, 2, 4, 1, 2, 3, 4, 5, 1]


def test_next_use_points_at_the_following_reference():
    assert next_use([7, 8, 7]) == [2, NEVER, NEVER]


def test_min_always_admits_and_evicts_the_furthest_next_use():
    # Capacity 2: 3 evicts 2 (next use 4 > 3); 1 hits; 2 evicts 3; 4 evicts 2; 1 hits; ... 4 hits.
    assert belady_hits(SEQ, 2) == [False, False, False, True, False, False, True, False, False, True, False,
                                   False]


def test_ideal_hits_every_repeat():
    assert sum(ideal_hits(SEQ)) == len(SEQ) - len(set(SEQ))


def test_min_matches_libcachesim_process_trace_replay():
    keys = [(i * 7919) % 97 for i in range(3000)] + SEQ * 5
    for capacity in (4, 16, 64):
        assert sum(belady_hits(keys, capacity)) == libcachesim_hit_count("belady", keys, capacity)
