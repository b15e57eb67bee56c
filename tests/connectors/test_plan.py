"""The scheduler-side planner: what a request loads and saves, step by step (no engine, no pool)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from connectors.identity import ModelIdentity, block_hashes
from connectors.plan import BlockLoad, BlockSave, Planner

TINY = ModelIdentity("kvswitch/tiny", "float32", 4, 2, 64, 256)
PROMPT = list(range(3, 3 + 1100))  # 4 full pool blocks and 76 tokens
KEYS = block_hashes(PROMPT, TINY)


class Pool:
    """leading_hits over a set of stored keys, recording what it was asked."""

    def __init__(self, stored: Sequence[int]) -> None:
        self.stored = set(stored)
        self.asked: list[list[int]] = []

    def leading_hits(self, keys: Sequence[int]) -> int:
        self.asked.append(list(keys))
        count = 0
        while count < len(keys) and keys[count] in self.stored:
            count += 1
        return count


def planner() -> Planner:
    return Planner(TINY, engine_block_tokens=128)


def test_hit_is_the_leading_stored_blocks_and_loads_fill_all_their_engine_blocks() -> None:
    plan, pool = planner(), Pool(KEYS[:3])
    assert plan.match("r", PROMPT, 0, pool.leading_hits) == 768
    assert pool.asked == [KEYS[:4]]
    plan.allocated("r", 768)
    load, saves = plan.scheduled("r", list(range(100, 109)), True, 1100)
    assert load is not None and load.blocks == (BlockLoad(KEYS[0], (100, 101), 0),
                                                BlockLoad(KEYS[1], (102, 103), 0),
                                                BlockLoad(KEYS[2], (104, 105), 0))
    assert saves == [BlockSave(KEYS[3], (106, 107))]  # only the block the pool lacks


def test_never_counts_the_last_prompt_token() -> None:
    prompt = PROMPT[:1024]  # 4 full blocks, nothing after: the last block cannot come from the pool
    plan, pool = planner(), Pool(block_hashes(prompt, TINY))
    assert plan.match("r", prompt, 0, pool.leading_hits) == 768
    assert pool.asked == [block_hashes(prompt, TINY)[:3]]


def test_asks_only_about_blocks_beyond_the_engines_own_hit() -> None:
    plan, pool = planner(), Pool(KEYS)
    assert plan.match("r", PROMPT, 384, pool.leading_hits) == 1024 - 384
    assert pool.asked == [KEYS[1:4]]
    plan.allocated("r", 640)
    load, _ = plan.scheduled("r", list(range(9)), True, 1100)
    assert load is not None
    assert load.blocks[0] == BlockLoad(KEYS[1], (2, 3), 1)  # engine block 2 (tokens 256..383) is the engine's


def test_engine_holding_everything_asks_nothing() -> None:
    plan, pool = planner(), Pool(KEYS)
    assert plan.match("r", PROMPT, 1024, pool.leading_hits) == 0
    assert pool.asked == []


def test_saves_each_completed_block_once_across_chunked_steps() -> None:
    plan, pool = planner(), Pool([])
    assert plan.match("r", PROMPT, 0, pool.leading_hits) == 0
    plan.allocated("r", 0)
    load, saves = plan.scheduled("r", [0, 1, 2, 3], True, 512)
    assert load is None and [s.key for s in saves] == KEYS[:2]
    _, saves = plan.scheduled("r", [4, 5], False, 700)
    assert saves == []
    _, saves = plan.scheduled("r", [6, 7, 8], False, 1100)
    assert saves == [BlockSave(KEYS[2], (4, 5)), BlockSave(KEYS[3], (6, 7))]
    _, saves = plan.scheduled("r", None, False, 1101)  # decoding: nothing more of the prompt
    assert saves == []


def test_failed_load_moves_the_save_mark_back_to_the_failed_block() -> None:
    plan, pool = planner(), Pool(KEYS[:3])
    plan.match("r", PROMPT, 0, pool.leading_hits)
    plan.allocated("r", 768)
    plan.scheduled("r", list(range(9)), True, 1100)
    assert plan.load_failed({2, 3}) == ["r"]  # pool block 1 failed: the engine recomputes from there
    _, saves = plan.scheduled("r", None, False, 1100)
    assert [s.key for s in saves] == KEYS[1:4]
    assert plan.load_failed({999}) == []


def test_salted_requests_use_their_own_keys() -> None:
    plan, pool = planner(), Pool(KEYS)
    assert plan.match("r", PROMPT, 0, pool.leading_hits, salt="alice") == 0
    assert pool.asked[0] == block_hashes(PROMPT, TINY.salted("alice"))[:4]
    assert plan.salt_of("r") == "alice"


def test_finished_requests_are_forgotten() -> None:
    plan = planner()
    plan.match("r", PROMPT, 0, Pool([]).leading_hits)
    plan.finished("r")
    assert len(plan) == 0 and plan.scheduled("r", [1], True, 1100) == (None, [])


def test_pool_block_must_be_whole_engine_blocks() -> None:
    with pytest.raises(ValueError, match="whole number"):
        Planner(TINY, engine_block_tokens=96)
