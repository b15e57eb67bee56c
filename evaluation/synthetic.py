"""Synthetic prefix-sharing workloads for scale experiments beyond the real traces.

Requests are drawn from prefix trees: a Zipf-popular *system prompt* (shared by many users), below it a
Zipf-popular *template* (few-shot examples, tools), below that the private blocks of one conversation that
grow turn by turn. Conversations start as a Poisson process; each next turn follows after an exponential
think time and repeats the whole conversation so far (multi-turn reuse). Ids are chained like Mooncake's:
an id stands for a block and every block before it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from evaluation.traces import BLOCK_TOKENS, Request, Trace


@dataclass(frozen=True)
class SyntheticOptions:
    """Knobs of the generator; defaults give a workload with Mooncake-like block counts per request."""

    requests: int = 5_000
    """Requests to emit (the last conversations are cut when this is reached)."""
    sessions_per_s: float = 5.0
    """Poisson rate of new conversations, per second (scale it with the number of nodes)."""
    system_prompts: int = 100
    """Roots of the prefix trees."""
    system_prompt_blocks: int = 4
    """Blocks of every system prompt (shared by all its users)."""
    templates_per_prompt: int = 20
    """Second level of sharing under each system prompt."""
    template_blocks: int = 4
    zipf_alpha: float = 1.0
    """Skew of system-prompt and template popularity (rank r has weight r^-alpha)."""
    sharing: float = 0.8
    """Probability a conversation starts with a shared system prompt (else its prefix is private)."""
    mean_turns: float = 3.0
    """Mean conversation length in turns (geometric)."""
    turn_blocks: int = 3
    """Mean new blocks each turn adds (user message + previous answer), at least 1."""
    think_time_s: float = 20.0
    """Mean pause between the turns of one conversation."""
    block_tokens: int = BLOCK_TOKENS
    output_tokens: int = 300

    def __post_init__(self) -> None:
        if self.requests < 1 or self.sessions_per_s <= 0 or self.mean_turns < 1:
            raise ValueError("requests ≥ 1, sessions_per_s > 0 and mean_turns ≥ 1 are required")
        if not 0.0 <= self.sharing <= 1.0:
            raise ValueError(f"sharing must be a probability, got {self.sharing}")


def _zipf_weights(n: int, alpha: float) -> np.ndarray:
    weights = np.arange(1, n + 1, dtype=float) ** -alpha
    return weights / weights.sum()


class _ChainIds:
    """Gives each (parent id, label) path its own integer id, so equal prefixes share ids."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, tuple], int] = {}

    def chain(self, parent: int, labels: list[tuple]) -> list[int]:
        ids = []
        for label in labels:
            key = (parent, label)
            parent = self._ids.setdefault(key, len(self._ids))
            ids.append(parent)
        return ids


def generate(options: SyntheticOptions = SyntheticOptions(), seed: int = 0) -> Trace:
    """A seeded synthetic trace; the same options and seed always give the same requests."""
    rng = np.random.default_rng(seed)
    ids = _ChainIds()
    prompt_weights = _zipf_weights(options.system_prompts, options.zipf_alpha)
    template_weights = _zipf_weights(options.templates_per_prompt, options.zipf_alpha)
    # (arrival time, session id, turn index) events; a session's state is its prefix ids so far.
    events: list[tuple[float, int, int]] = []
    prefixes: dict[int, list[int]] = {}
    turns_left: dict[int, int] = {}
    start = 0.0
    session = 0
    requests: list[Request] = []

    def open_session(at: float, sid: int) -> None:
        if rng.random() < options.sharing:
            p = int(rng.choice(options.system_prompts, p=prompt_weights))
            t = int(rng.choice(options.templates_per_prompt, p=template_weights))
            labels = [("sys", p, d) for d in range(options.system_prompt_blocks)]
            labels += [("tpl", p, t, d) for d in range(options.template_blocks)]
        else:
            labels = [("own", sid, d) for d in range(options.system_prompt_blocks)]
        prefixes[sid] = ids.chain(-1, labels)
        turns_left[sid] = int(rng.geometric(1.0 / options.mean_turns))
        heapq.heappush(events, (at, sid, 0))

    while len(requests) < options.requests:
        # Keep the next conversation start in the queue so turns and starts interleave by time.
        while not events or events[0][0] >= start:
            open_session(start, session)
            session += 1
            start += float(rng.exponential(1.0 / options.sessions_per_s))
        at, sid, turn = heapq.heappop(events)
        new = max(1, int(rng.poisson(options.turn_blocks)))
        parent = prefixes[sid][-1]
        prefixes[sid] = prefixes[sid] + ids.chain(parent, [("turn", sid, turn, k) for k in range(new)])
        blocks = tuple(prefixes[sid])
        tokens = options.block_tokens * (len(blocks) - 1) + int(rng.integers(1, options.block_tokens + 1))
        requests.append(Request(at, tokens, options.output_tokens, blocks, sid))
        turns_left[sid] -= 1
        if turns_left[sid] > 0:
            heapq.heappush(events, (at + float(rng.exponential(options.think_time_s)), sid, turn + 1))
        else:
            del prefixes[sid], turns_left[sid]
    return Trace(f"synthetic(seed={seed})", tuple(requests))
