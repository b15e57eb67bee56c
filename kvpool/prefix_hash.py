"""Chained prefix hashes (docs/protocol.md, "Prefix hash"): a block's 64-bit name covers the block and its prefix.

    h(-1) = 0
    h(i)  = BLAKE2b-64(key="kvswitch-prefix-v1", data = h(i-1) as 8 bytes big-endian ‖ block i's tokens)

Tokens are uint32 little-endian. Trace block ids (Mooncake's `hash_ids`, already prefix-chained) go through the
same chain with each id as one uint64 little-endian "token", so trace ids and token prompts share one shape.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence

from kvpool.constants import PREFIX_BLOCK_TOKENS

HASH_KEY = b"kvswitch-prefix-v1"
"""BLAKE2b key: separates our hashes from any other BLAKE2b-64 use."""
ROOT = 0
"""h(-1): the hash "before" the first block."""


def chain(parent: int, data: bytes) -> int:
    """One link: BLAKE2b-64 over the parent hash (8 bytes big-endian) and the block's bytes."""
    if not 0 <= parent < 1 << 64:
        raise ValueError(f"parent hash must be a 64-bit unsigned integer, got {parent}")
    digest = hashlib.blake2b(parent.to_bytes(8, "big") + data, digest_size=8, key=HASH_KEY).digest()
    return int.from_bytes(digest, "big")


def token_block_bytes(tokens: Sequence[int]) -> bytes:
    """A block's tokens as uint32 little-endian (raises ValueError on a token outside 0..2^32-1)."""
    try:
        return struct.pack(f"<{len(tokens)}I", *tokens)
    except struct.error as exc:
        raise ValueError(f"tokens must be uint32: {exc}") from None


def token_prefix_hashes(tokens: Sequence[int], block_tokens: int = PREFIX_BLOCK_TOKENS) -> list[int]:
    """Prefix hashes of a prompt's blocks of `block_tokens` tokens; the last, partial block is hashed too."""
    if block_tokens <= 0:
        raise ValueError("block_tokens must be positive")
    hashes: list[int] = []
    parent = ROOT
    for start in range(0, len(tokens), block_tokens):
        parent = chain(parent, token_block_bytes(tokens[start:start + block_tokens]))
        hashes.append(parent)
    return hashes


def block_id_prefix_hashes(block_ids: Iterable[int]) -> list[int]:
    """Prefix hashes of a trace request's `hash_ids`: each id is one uint64 little-endian "token"."""
    hashes: list[int] = []
    parent = ROOT
    for block_id in block_ids:
        parent = chain(parent, _id_bytes(block_id))
        hashes.append(parent)
    return hashes


class BlockIdHasher:
    """Memoised `block_id_prefix_hashes` for a whole trace.

    Mooncake ids are prefix-chained (an id always has the same predecessor), so an id's prefix hash is a
    function of the id alone once its chain is known; replaying thousands of requests then hashes each id once.
    """

    def __init__(self) -> None:
        self._by_chain: dict[tuple[int, int], int] = {}

    def hashes(self, block_ids: Sequence[int]) -> list[int]:
        out: list[int] = []
        parent = ROOT
        for block_id in block_ids:
            link = (parent, block_id)
            h = self._by_chain.get(link)
            if h is None:
                h = chain(parent, _id_bytes(block_id))
                self._by_chain[link] = h
            out.append(h)
            parent = h
        return out


def _id_bytes(block_id: int) -> bytes:
    if not 0 <= block_id < 1 << 64:
        raise ValueError(f"block id must be a 64-bit unsigned integer, got {block_id}")
    return block_id.to_bytes(8, "little")
