"""The synthetic generator: seeded, time-ordered, prefix-chained, with sharing that can be switched off."""

import pytest

from evaluation.synthetic import SyntheticOptions, generate

SMALL = SyntheticOptions(requests=400, sessions_per_s=2.0, system_prompts=5, templates_per_prompt=3)


def parents(trace):
    seen = {}
    for request in trace.requests:
        parent = None
        for block in request.blocks:
            seen.setdefault(block, set()).add(parent)
            parent = block
    return seen


def test_same_seed_gives_the_same_trace_and_another_seed_does_not():
    assert generate(SMALL, 3) == generate(SMALL, 3)
    assert generate(SMALL, 3).requests != generate(SMALL, 4).requests


def test_arrivals_are_ordered_and_ids_are_prefix_chained():
    trace = generate(SMALL, 1)
    assert len(trace.requests) == 400
    times = [r.arrival_s for r in trace.requests]
    assert times == sorted(times)
    assert all(len(p) == 1 for p in parents(trace).values())  # every id has exactly one predecessor


def test_later_turns_extend_the_conversation_so_far():
    trace = generate(SMALL, 2)
    last = {}
    for request in trace.requests:
        if request.session in last:
            previous = last[request.session]
            assert request.blocks[: len(previous)] == previous
            assert len(request.blocks) > len(previous)
        last[request.session] = request.blocks


def test_without_sharing_sessions_never_share_blocks():
    trace = generate(SyntheticOptions(requests=300, sharing=0.0), 5)
    owner = {}
    for request in trace.requests:
        for block in request.blocks:
            assert owner.setdefault(block, request.session) == request.session


def test_more_sharing_means_more_reuse():
    def reuse(sharing):
        t = generate(SyntheticOptions(requests=1500, sharing=sharing, mean_turns=1.0), 7)
        return 1 - t.unique_blocks / t.block_references

    assert reuse(1.0) > reuse(0.5) > reuse(0.0)


def test_invalid_options_are_rejected():
    with pytest.raises(ValueError):
        SyntheticOptions(sharing=1.5)
