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

from policies.base import BlockInfo, BlockKey

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


class RequestAnnotator:
    """Remembers which request created each block, to number conversation turns as requests arrive."""

    def __init__(self, options: AnnotatorOptions | None = None) -> None:
        self.options = options or AnnotatorOptions()
        self._created_in_turn: dict[BlockKey, int] = {}
        self._last_read: dict[BlockKey, float] = {}

    def blocks(
        self,
        hash_ids: Sequence[BlockKey],
        input_length: int | None = None,
        category: str = "",
        now: float | None = None,
    ) -> list[BlockInfo]:
        """The request's blocks in prefix order; `input_length` (tokens) sizes the last, partial block.

        With `now` (seconds), a next turn also gets `turn_gap_s`: the time since its shared prefix was
        last read, i.e. since the previous turn."""
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
        gap = -1.0
        if follows and now is not None and hash_ids[shared - 1] in self._last_read:
            gap = max(0.0, now - self._last_read[hash_ids[shared - 1]])
        last_tokens = size if input_length is None else input_length - size * (len(hash_ids) - 1)
        out: list[BlockInfo] = []
        parent: BlockKey | None = None
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
                )
            )
            created.setdefault(key, turn)
            if now is not None:
                self._last_read[key] = now
            parent = key
        return out
