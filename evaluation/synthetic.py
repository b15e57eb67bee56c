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
            labels: list[tuple] = [("sys", p, d) for d in range(options.system_prompt_blocks)]
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


# -- incast workloads ----------------------------------------------------------------------------------
INCAST_KINDS = ("agent-fanout", "batch-system-prompt", "rag-popular-docs")
"""Workloads where many readers want the same long prefix at once (the N-to-1 incast the switch relieves)."""


@dataclass(frozen=True)
class IncastOptions:
    """Sizes of the incast workloads; the defaults give 3,000–4,000 requests of 10–40 blocks each."""

    requests: int = 3_000
    groups_per_s: float = 2.0
    """Agent tasks, batch jobs (per second) or, for RAG, requests per second / 10."""
    fanout: int = 16
    """Parallel calls of one agent step; requests of one batch job are `4 × fanout`."""
    shared_blocks: int = 24
    """Blocks of the shared prompt: an agent's context (12K tokens), a batch job's system prompt, a document."""
    private_blocks: int = 2
    zipf_alpha: float = 1.1
    """Popularity skew of RAG documents and batch system prompts."""
    documents: int = 2_000
    output_tokens: int = 200
    block_tokens: int = BLOCK_TOKENS


def generate_incast(kind: str, options: IncastOptions = IncastOptions(), seed: int = 0) -> Trace:
    """A seeded incast workload of one of `INCAST_KINDS`.

    * agent-fanout: an agent task issues `fanout` parallel calls within 50 ms, all sharing its long
      context, then (60% of the time) a next step 2–10 s later whose context extends the previous one.
    * batch-system-prompt: a batch job submits 4 × `fanout` requests over 2 s sharing one of 20 Zipf-popular
      system prompts, each with its own document.
    * rag-popular-docs: a Poisson stream of questions, each prefixed by a short system prompt and one of
      `documents` Zipf-popular documents.
    """
    if kind not in INCAST_KINDS:
        raise ValueError(f"unknown incast workload {kind!r}; known: {', '.join(INCAST_KINDS)}")
    rng = np.random.default_rng(seed)
    ids = _ChainIds()
    requests: list[Request] = []
    clock = 0.0
    group = 0
    bt = options.block_tokens

    def emit(at: float, prefix: list[int], private: int, session: int) -> None:
        blocks = prefix + ids.chain(prefix[-1] if prefix else -1,
                                    [("own", len(requests), k) for k in range(private)])
        tokens = bt * (len(blocks) - 1) + int(rng.integers(1, bt + 1))
        requests.append(Request(at, tokens, options.output_tokens, tuple(blocks), session))

    if kind == "rag-popular-docs":
        weights = _zipf_weights(options.documents, options.zipf_alpha)
        system = ids.chain(-1, [("sys", d) for d in range(2)])
        while len(requests) < options.requests:
            clock += float(rng.exponential(1.0 / (10 * options.groups_per_s)))
            doc = int(rng.choice(options.documents, p=weights))
            prefix = system + ids.chain(system[-1], [("doc", doc, d) for d in range(options.shared_blocks // 3)])
            emit(clock, prefix, options.private_blocks, doc)
    elif kind == "batch-system-prompt":
        prompts = 20
        weights = _zipf_weights(prompts, options.zipf_alpha)
        while len(requests) < options.requests:
            clock += float(rng.exponential(1.0 / options.groups_per_s))
            p = int(rng.choice(prompts, p=weights))
            prefix = ids.chain(-1, [("sys", p, d) for d in range(options.shared_blocks)])
            for at in sorted(clock + rng.uniform(0.0, 2.0, size=4 * options.fanout)):
                emit(float(at), prefix, options.private_blocks * 2, group)
            group += 1
    else:
        pending: list[tuple[float, int, list[int]]] = []
        while len(requests) < options.requests:
            clock += float(rng.exponential(1.0 / options.groups_per_s))
            heapq.heappush(pending, (clock, group, ids.chain(-1, [("ctx", group, d)
                                                                   for d in range(options.shared_blocks)])))
            group += 1
            while pending and pending[0][0] <= clock and len(requests) < options.requests:
                at, task, prefix = heapq.heappop(pending)
                for offset in sorted(rng.uniform(0.0, 0.05, size=options.fanout)):
                    emit(at + float(offset), prefix, options.private_blocks, task)
                if rng.random() < 0.6:
                    grown = prefix + ids.chain(prefix[-1], [("step", task, len(prefix), d) for d in range(2)])
                    heapq.heappush(pending, (at + float(rng.uniform(2.0, 10.0)), task, grown))
    requests.sort(key=lambda r: r.arrival_s)
    return Trace(f"{kind}(seed={seed})", tuple(requests[: options.requests]))
