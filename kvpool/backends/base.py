"""What a storage node asks of the place it keeps committed blocks: the `StorageBackend` protocol.

The node (`kvpool.server`) owns the KVP protocol: staging per writer, the commit rule, verdicts (OK, ERR_STALE,
ERR_CONFLICT), the commit log, trust, counters. A backend only keeps what was committed, and answers four
questions about it: which version of a block is the newest ever committed, what a chunk is, its bytes, and where
it lives. A commit hands the backend a whole block, and the backend stores it all or nothing, so every backend
gives readers the same atomic blocks (docs/protocol.md, *Atomic blocks*).

Backends: `memory` (DRAM + optional SQLite disk tier, the default) and `mooncake` (Mooncake Store over TCP);
see docs/storage-backends.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kvpool.constants import Status, Tier
from kvpool.keys import BlockKey, ChunkKey


class StoreUnavailable(RuntimeError):
    """The backend cannot tell what it holds right now (its store did not answer, e.g. a Mooncake replica on a
    node that died and is not yet unmounted). Any method may raise it; the node then decides nothing: it answers
    MISS to reads and ERR_FULL to writes (never "absent", which would let it commit an older version over a
    newer one it could not read)."""


@dataclass(frozen=True, slots=True)
class BlockState:
    """What the node knows of a block as a whole."""

    version: int
    """The newest committed version; never lowered, also after TIER_MOVE dropped the chunks (so a version
    can never be committed twice with different bytes, even across a drop)."""
    chunk_count: int


@dataclass(frozen=True, slots=True)
class NewChunk:
    """One chunk of a block being committed."""

    value_len: int
    """Meaningful bytes of `value` (the rest is padding)."""
    csum: int
    """CRC-32 of the value bytes, as the writer sent it (checked before staging)."""
    value: bytes
    """The value bytes: the block's chunk size (128 B .. 8 KiB), padding included."""


class ChunkMeta(Protocol):
    """A committed chunk as the node reports it (GET_REPLY, STAT, LOOKUP_META, TIER_MOVE_ACK)."""

    @property
    def chunk_count(self) -> int: ...
    @property
    def value_len(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def csum(self) -> int: ...
    @property
    def tier(self) -> Tier: ...
    @property
    def score(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Moved:
    """The outcome of a TIER_MOVE of one chunk."""

    status: Status
    """OK, ERR_FULL (no room in the target tier) or ERR_DENIED (this backend lacks that tier)."""
    tier: Tier
    """Where the chunk is now (ABSENT once dropped)."""


class StorageBackend(Protocol):
    """Where a storage node keeps committed blocks. Single-threaded: the node calls it from its serve loop.
    Every method may raise `StoreUnavailable`."""

    name: str
    """The registry name (`--backend`)."""

    def newest(self, block: BlockKey) -> BlockState | None:
        """The newest version of `block` ever committed here (also after its chunks were dropped), or None."""
        ...

    def chunk(self, key: ChunkKey) -> ChunkMeta | None:
        """The committed chunk `key` if a GET would be served now, else None."""
        ...

    def read(self, key: ChunkKey) -> tuple[ChunkMeta, bytes | memoryview] | None:
        """The committed chunk and its value bytes (the block's chunk size, padding included; a view where the
        backend holds the block in one buffer), or None (never bytes of another version than the meta's)."""
        ...

    def read_span(self, block: BlockKey, first: int, count: int) -> Sequence[tuple[ChunkMeta, bytes | memoryview] | None]:
        """`read` of chunks first .. first + count - 1 of `block`, in order, in one call (what a span GET asks
        for; `count` <= KVP_MAX_GET_SPAN). Raises `StoreUnavailable` when any of them cannot be told: the node
        then reads them one by one, to answer each as its own GET would be."""
        ...

    def commit(self, block: BlockKey, version: int, chunks: Sequence[NewChunk]) -> bool:
        """Replace `block` by these chunks (index = position), all or nothing; False = no room, nothing changed.
        The node only calls this with a version newer than `newest(block)`."""
        ...

    def move(self, key: ChunkKey, target: Tier, score: float) -> Moved:
        """TIER_MOVE of a committed chunk (the node checked it exists): to STORAGE_DRAM / STORAGE_DISK (record
        `score`, the controller's residual score), or ABSENT (drop it; `newest` is kept)."""
        ...

    def summary(self) -> dict[str, object]:
        """Occupancy and counters, for logs and tests (JSON-serialisable)."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...
