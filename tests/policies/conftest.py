"""Shared block streams for the policy tests: a seeded synthetic chat workload and a Mooncake excerpt."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from policies.base import BlockInfo
from policies.request import RequestAnnotator

# The project's shipped Mooncake excerpt (data/traces/README.md: attribution and license); its first
# EXCERPT_REQUESTS requests keep these tests fast and the golden counts fixed.
EXCERPT = Path(__file__).parents[2] / "data" / "traces" / "mooncake_conversation_excerpt.jsonl"
EXCERPT_REQUESTS = 400


def synthetic_requests(seed: int = 7, requests: int = 400) -> list[tuple[float, list[int]]]:
    """(time s, prefix-chained block ids) per request: new chats share root block 0 and sometimes one of
    a few system prompts; with probability 0.45 a request is the next turn of a recent chat (its whole
    prompt's full blocks plus 1-3 new blocks, the old partial tail being re-hashed). Reproducible from `seed`."""
    rng = random.Random(seed)
    next_id = 100
    chats: list[list[int]] = []
    out: list[tuple[float, list[int]]] = []
    now = 0.0
    for _ in range(requests):
        now += rng.choice((0.0, 1.0, 1.0, 2.0))
        if chats and rng.random() < 0.45:
            chat = chats[-1 - min(int(rng.expovariate(0.3)), len(chats) - 1)]
        else:
            chat = [0] + ([1, 2] if rng.random() < 0.3 else [])
            chats.append(chat)
        fresh = list(range(next_id, next_id + rng.randint(1, 3)))
        next_id += len(fresh)
        out.append((now, chat + fresh))
        chat.extend(fresh[:-1])  # the last block is partial: the next turn re-hashes it with the answer
    return out


def annotate(requests: list[tuple[float, list[int]]]) -> list[tuple[BlockInfo, float]]:
    annotator = RequestAnnotator()
    return [(block, now) for now, ids in requests for block in annotator.blocks(ids)]


@pytest.fixture(scope="session")
def synthetic_stream() -> list[tuple[BlockInfo, float]]:
    return annotate(synthetic_requests())


@pytest.fixture(scope="session")
def excerpt_stream() -> list[tuple[BlockInfo, float]]:
    rows = [json.loads(line) for line in EXCERPT.read_text().splitlines()[:EXCERPT_REQUESTS] if line.strip()]
    annotator = RequestAnnotator()
    return [
        (block, row["timestamp"] / 1000.0)
        for row in rows
        for block in annotator.blocks(row["hash_ids"], row["input_length"])
    ]
