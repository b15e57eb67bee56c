"""The conversation-level policies: what the annotator may tell them, what the return model learns, and
that the pool they drive keeps a returning chat that LRU loses, on small hand-made streams."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.base import BlockInfo
from policies.conversation import AGE_EDGES_S, ReturnModel, ReturnParams, hit_density
from policies.eviction.conversation import ConversationEviction
from policies.registry import make_admission, make_pool
from policies.request import RequestAnnotator

FAST = {"shrinkage": 2.0, "refit_s": 3.0}
"""Model parameters that learn from a handful of conversations (the defaults want hundreds)."""


def chat_stream(turns: int = 40, gap_s: float = 30.0, strangers_every_s: float = 3.0):
    """(block, time) of one chat returning every `gap_s` seconds (its prompt growing a block per turn,
    blocks 1000+) among one-shot requests of 3 fresh blocks every `strangers_every_s` seconds."""
    annotator = RequestAnnotator()
    chat = [0, 1000, 1001]
    fresh = 10_000
    stream: list[tuple[BlockInfo, float]] = []
    now = 0.0
    for turn in range(turns):
        ids = [*chat, 2000 + turn]  # the partial tail, re-hashed by the next turn
        stream += [(b, now) for b in annotator.blocks(ids, 512 * len(ids) - 100, now=now, output_length=300)]
        chat.append(1002 + turn)
        step = now
        while step + strangers_every_s < now + gap_s:
            step += strangers_every_s
            ids = [0, fresh, fresh + 1, fresh + 2]
            fresh += 3
            stream += [(b, step) for b in annotator.blocks(ids, 512 * 4 - 100, now=step, output_length=50)]
        now += gap_s
    return stream


# ------------------------------------------------------------------ annotation: nothing from the future
def test_annotator_exposes_the_previous_turns_output_never_the_current_one() -> None:
    annotator = RequestAnnotator()
    first = annotator.blocks([0, 1, 2], 1100, now=0.0, output_length=111)
    second = annotator.blocks([0, 1, 2, 3], 1800, now=30.0, output_length=222)
    third = annotator.blocks([0, 1, 2, 3, 4], 2400, now=60.0, output_length=333)
    assert {b.previous_output_tokens for b in first} == {-1}
    assert {b.previous_output_tokens for b in second} == {111}
    assert {b.previous_output_tokens for b in third} == {222}
    assert [first[0].request, second[0].request, third[0].request] == [0, 1, 2]
    assert [first[0].previous_request, second[0].previous_request, third[0].previous_request] == [-1, 0, 1]


def test_sharing_only_a_document_prefix_is_not_a_previous_turn() -> None:
    annotator = RequestAnnotator()
    annotator.blocks(list(range(10)), 5000, now=0.0, output_length=10)
    reader = annotator.blocks([0, 1, 2, 77], 1900, now=3.0)
    assert reader[0].turn == 2  # the loose rule of `turn` is unchanged
    assert reader[0].previous_request == -1
    assert reader[0].previous_output_tokens == -1


def test_annotator_rejects_a_negative_output_length() -> None:
    with pytest.raises(ValueError, match="output_length"):
        RequestAnnotator().blocks([0, 1], 600, output_length=-1)


# ------------------------------------------------------------------ the return model
def test_hit_density_rises_towards_a_known_return_time_and_is_zero_for_a_class_that_never_returns() -> None:
    edges = np.asarray(AGE_EDGES_S, dtype=float)
    hazard = np.zeros((2, len(edges)))
    hazard[0, list(AGE_EDGES_S).index(60)] = 0.5  # half of class 0 returns at 60–75 s; class 1 never
    density = hit_density(hazard, edges)
    at = {age: list(AGE_EDGES_S).index(age) for age in (0, 30, 60, 90)}
    assert density[0, at[0]] < density[0, at[30]] < density[0, at[60]]
    assert density[0, at[90]] == 0.0  # past its return time nothing is left to wait for
    assert not density[1].any()
    capped = hit_density(hazard, edges, horizon_s=30.0)
    assert (
        capped[0, at[0]] == capped[0, at[30]] == 0.0 < capped[0, at[60]]
    )  # 30 s ahead: the return is out of reach


def test_model_ranks_a_returning_conversation_above_one_shots_and_a_finished_one() -> None:
    model = ReturnModel(ReturnParams.from_mapping(FAST))
    stream = chat_stream()
    for block, now in stream:
        model.observe(block, now)
    end = stream[-1][1]
    chat = max(model.units, key=lambda u: model.units[u].turn)  # the chat's last turn, not continued yet
    one_shot = model.current  # the last stranger, never continued
    assert model.units[chat].turn == 40
    assert model.unit_value(chat, end) > 3 * model.unit_value(one_shot, end)
    continued = model.units[chat - 1 - 9]  # the chat's previous turn (9 strangers per gap)
    assert continued.returned_by == chat
    assert model.unit_value(chat - 10, end) == 0.0  # its conversation came back: its leftovers are stale
    assert model.unit_value(chat, end + 2000) == 0.0  # idle past every learned return: finished


def test_partial_tail_blocks_are_learned_to_be_worth_almost_nothing() -> None:
    model = ReturnModel(ReturnParams.from_mapping(FAST))
    for block, now in chat_stream(turns=10):
        model.observe(block, now)
    assert model.tail_factor() < 0.05


def test_shared_root_block_is_valued_by_its_reads_from_other_conversations() -> None:
    model = ReturnModel(ReturnParams.from_mapping(FAST))
    stream = chat_stream(turns=5)
    for block, now in stream:
        model.observe(block, now)
    end = stream[-1][1]
    root = next(b for b, _ in stream if b.key == 0)
    assert model.popularity(0, end) > 0.1  # read by a stranger every 3 s
    assert model.popularity(1000, end) == 0.0  # only ever read by its own conversation
    assert model.block_value(root, model.current, end) >= model.popularity(0, end)


def test_model_needs_annotated_requests_and_sane_parameters() -> None:
    with pytest.raises(ValueError, match="annotated requests"):
        ReturnModel().observe(BlockInfo(5), 0.0)
    with pytest.raises(ValueError, match="bad priors"):
        ReturnModel(ReturnParams(prior_probability=1.5))
    with pytest.raises(ValueError, match="unknown parameter"):
        make_pool(10, "conversation", "conversation", model_params={"turns": 3})


# ------------------------------------------------------------------ eviction and admission
def test_eviction_takes_the_least_valuable_conversation_deepest_block_first() -> None:
    model = ReturnModel(ReturnParams.from_mapping(FAST))
    for block, now in chat_stream(turns=20):
        model.observe(block, now)
    policy = ConversationEviction(model=model)
    now = 20 * 30.0
    annotator = RequestAnnotator()
    # A request of a class learned to return (turn ≥ 2, blocks 1000+) and a one-shot (turn 1).
    stranger = annotator.blocks([0, 50_000, 50_001, 50_002], 1900, now=now)
    for block in stranger:
        policy.record(block, now)
        policy.on_insert(block, now)
    assert policy.victim(now).key == 50_002  # the one-shot's deepest block (root 0 is shared, valued higher)
    assert policy.victim(now, protected=frozenset({50_002})).key == 50_001
    policy.on_remove(50_002)
    assert policy.victim(now).key == 50_001


def test_blocks_a_continuing_request_is_still_reading_are_not_evicted_under_it() -> None:
    pool = make_pool(6, "conversation", "conversation", "drop", model_params=FAST, log_limit=0)
    annotator = RequestAnnotator()
    for block in annotator.blocks([0, 1, 2, 3, 4, 5], 3000, now=0.0):
        pool.access(block, 0.0)
    follow_up = annotator.blocks([0, 1, 2, 3, 4, 5, 6, 7], 4000, now=30.0)
    assert follow_up[0].previous_request == 0
    pool.access(follow_up[0], 30.0)
    # Request 0 has come back: its other blocks are about to be read by request 1 and must stay.
    assert pool.eviction.victim(30.0).key not in {1, 2, 3, 4, 5}
    assert [pool.access(block, 30.0) for block in follow_up[1:6]] == [True] * 5


def test_pool_keeps_a_returning_chat_that_lru_loses() -> None:
    stream = chat_stream(turns=20, strangers_every_s=1.5)
    # The chat's reads once the model has seen a few of its turns, minus each turn's one first read.
    chat_reads = [
        (b, t) for b, t in stream if 1000 <= b.key < 2000 and t >= 300.0 and b.depth < b.request_blocks - 2
    ]
    results = {}
    for admission, eviction in (("conversation", "conversation"), ("always", "lru")):
        params = FAST if eviction == "conversation" else None
        pool = make_pool(32, admission, eviction, "drop", model_params=params, log_limit=0)
        hits = {id(b): pool.access(b, t) for b, t in stream}
        results[eviction] = sum(hits[id(b)] for b, _ in chat_reads) / len(chat_reads)
    assert results["lru"] == 0.0  # 30 s of strangers (57 fresh blocks per gap) flush a 32-block LRU
    assert results["conversation"] > 0.9


def test_admission_alone_builds_and_feeds_its_own_model() -> None:
    admission = make_admission("conversation", model_params=FAST)
    block = RequestAnnotator().blocks([0, 1], 900, now=0.0)[0]
    admission.record(block, 0.0)
    assert admission.admit(block, 0.0)
    assert math.isfinite(admission.score(block, 0.0))


def test_hit_counts_on_the_seeded_synthetic_stream_match_the_recorded_values(synthetic_stream) -> None:
    """Regression guard in the manner of `test_golden` (recorded once from this code; update if intended)."""
    hits = []
    for capacity in (20, 40, 80):
        pool = make_pool(capacity, "conversation", "conversation", "drop", log_limit=0)
        hits.append(sum(pool.access(block, now) for block, now in synthetic_stream))
    assert hits == [837, 884, 887]


def test_model_state_stays_bounded_by_max_units_and_memory() -> None:
    model = ReturnModel(ReturnParams.from_mapping({**FAST, "max_units": 5, "memory": 50}))
    stream = chat_stream(turns=10)
    for block, now in stream:
        model.observe(block, now)
    assert len(model.units) == 5
    assert model.current in model.units
    assert len(model._last_unit) == 50
    assert model.popularity(0, stream[-1][1]) > 0  # the root is read all the time: never the one forgotten
    assert model.popularity(10_000, stream[-1][1]) == 0.0  # the first stranger's block is long forgotten
    model.refit(1000.0)  # fits from the remembered units only


def test_blocks_read_often_learn_a_higher_rate_of_reads_from_branches_than_new_ones() -> None:
    """Chats of three turns whose first-turn blocks are later re-read by a branch (an edited conversation,
    sharing 4 of 10 blocks: not a next turn); the third turn's new block is never read again."""
    annotator = RequestAnnotator()
    model = ReturnModel(ReturnParams.from_mapping(FAST))
    for chat in range(30):
        start, base = 10.0 * chat, 1000 * (chat + 1)
        first = [0, *range(base, base + 8)]
        turns = [(start, [*first, base + 900]), (start + 30, [*first, base + 8, base + 901])]
        turns += [(start + 60, [*first, base + 8, base + 9, base + 902])]
        turns += [(start + 90, [*first[:4], base + 500])]  # the branch
        for now, ids in turns:
            for block in annotator.blocks(ids, 512 * len(ids) - 100, now=now):
                model.observe(block, now)
    now = 300.0 + 90.0
    probe = 99_000
    last = None
    for offset, ids in enumerate(([0, *range(probe, probe + 8), 1], [0, *range(probe, probe + 9), 2])):
        for block in annotator.blocks(ids, 512 * len(ids) - 100, now=now + 30 * offset):
            model.observe(block, now + 30 * offset)
        last = now + 30 * offset
    for block in annotator.blocks([0, *range(probe, probe + 10), 3], 512 * 12 - 100, now=last + 30):
        model.observe(block, last + 30)
    at = last + 31
    assert model.branch_rate(probe + 1, at) > 3 * model.branch_rate(probe + 9, at)  # read 3× vs once
