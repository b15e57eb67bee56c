"""Turn a request's prefix-chained block ids into the `BlockInfo`s a policy sees.

A policy may look at a whole request when it arrives (depth, parent, which block is the tail) and at
the conversation turn, which the Mooncake traces do not carry: a request continues a conversation when
it re-reads at least `min_shared_blocks` leading blocks that an earlier request created, and its turn is
then one more than that request's. Everything here is known at arrival time; nothing looks ahead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey

BLOCK_TOKENS = 512
"""Tokens per block in the Mooncake traces (the last block of a prompt may be partial)."""


@dataclass(frozen=True)
class AnnotatorOptions:
    """How requests are read."""

    block_tokens: int = BLOCK_TOKENS
    """Tokens one block id covers."""
    min_shared_blocks: int = 2
    """Leading blocks a request must share with an earlier one to count as its next turn; 2 because
    every Mooncake request shares block 0 (a common system prompt), which says nothing about turns."""
    continuation_slack: int = 2
    """`previous_request` names an earlier request only if this one re-reads all of that request's
    blocks but at most this many (its partial tail, which the next turn re-hashes, and one more).
    Requests that share only a document or system prompt with it (on the Mooncake conversation trace,
    424 of the 3,843 first "next turns" by `min_shared_blocks` re-read 10 or more blocks fewer than the
    request they follow) are other conversations, not its next turn. `turn` keeps the looser rule."""


class RequestAnnotator:
    """Remembers which request created each block, to number conversation turns as requests arrive."""

    def __init__(self, options: AnnotatorOptions | None = None) -> None:
        self.options = options or AnnotatorOptions()
        self._created_in_turn: dict[CacheKey, int] = {}
        self._last_read: dict[CacheKey, float] = {}
        self._created_by: dict[CacheKey, int] = {}  # block → arrival number of the request that created it
        self._output_of: dict[int, int] = {}  # request → tokens it generated, for its *next* turn only
        self._length_of: dict[int, int] = {}  # request → blocks in its prompt
        self._requests = 0

    def blocks(
        self,
        hash_ids: Sequence[CacheKey],
        input_length: int | None = None,
        category: str = "",
        now: float | None = None,
        output_length: int | None = None,
    ) -> list[BlockInfo]:
        """The request's blocks in prefix order; `input_length` (tokens) sizes the last, partial block.

        With `now` (seconds), a next turn also gets `turn_gap_s`: the time since its shared prefix was
        last read, i.e. since the previous turn. Every request gets an arrival number (`request`) and a
        next turn the number of the request it continues (`previous_request`). `output_length` (tokens
        this request will generate) is only *remembered*: it appears as `previous_output_tokens` on the
        blocks of this conversation's next turn, never on this request's own blocks, because a real pool
        learns it when generation finishes, after this request was placed."""
        if not hash_ids:
            return []
        size = self.options.block_tokens
        if input_length is not None and input_length <= 0:
            raise ValueError(f"input_length must be positive, got {input_length}")
        if input_length is not None and math.ceil(input_length / size) != len(hash_ids):
            raise ValueError(
                f"input_length {input_length} needs {math.ceil(input_length / size)} blocks of {size} tokens, "
                f"the request lists {len(hash_ids)}"
            )
        created = self._created_in_turn
        shared = 0
        while shared < len(hash_ids) and hash_ids[shared] in created:
            shared += 1
        follows = shared >= self.options.min_shared_blocks
        turn = created[hash_ids[shared - 1]] + 1 if follows else 1
        request = self._requests
        self._requests += 1
        previous = self._created_by.get(hash_ids[shared - 1], -1) if follows else -1
        if previous >= 0 and shared < self._length_of[previous] - self.options.continuation_slack:
            previous = -1  # shares a document or system prompt with it, not its whole prompt
        self._length_of[request] = len(hash_ids)
        previous_output = self._output_of.get(previous, -1)
        if output_length is not None:
            if output_length < 0:
                raise ValueError(f"output_length must be ≥ 0, got {output_length}")
            self._output_of[request] = output_length
        gap = -1.0
        if follows and now is not None and hash_ids[shared - 1] in self._last_read:
            gap = max(0.0, now - self._last_read[hash_ids[shared - 1]])
        last_tokens = size if input_length is None else input_length - size * (len(hash_ids) - 1)
        out: list[BlockInfo] = []
        parent: CacheKey | None = None
        final = len(hash_ids) - 1
        for depth, key in enumerate(hash_ids):
            out.append(
                BlockInfo(
                    key=key,
                    depth=depth,
                    tokens=last_tokens if depth == final else size,
                    parent=parent,
                    is_last=depth == final,
                    turn=turn,
                    category=category,
                    request_blocks=len(hash_ids),
                    turn_gap_s=gap,
                    request=request,
                    previous_request=previous,
                    previous_output_tokens=previous_output,
                )
            )
            created.setdefault(key, turn)
            self._created_by.setdefault(key, request)
            if now is not None:
                self._last_read[key] = now
            parent = key
        return out
