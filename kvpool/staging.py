"""Writes in progress at the storage node: chunks staged per writer until the block is whole, bounded and expiring.

A block becomes visible only as a whole (docs/protocol.md, *Atomic blocks*), so the chunks of a PUT wait here,
keyed by the writer (source address and port) and the version it writes, until the last one arrives. Two
writers of one block never share a staging area, so their chunks can never be mixed into one block.

The staging area is the one place a host can make the node hold memory without storing anything, so it is
bounded three ways: a global byte budget, a per-source-address budget (one flooding host evicts its own
oldest writes first), and an idle time after which a staged write is dropped. A dropped write is not an error
anyone sees: its chunks were never acknowledged, so the writer resends them and they are staged again.

`CommitLog` remembers, for a while, which writer committed which chunk checksums, so a writer's resend after a
lost PUT_ACK is acknowledged OK even when a newer version has replaced its block in the meantime.
"""

from __future__ import annotations

import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from kvpool.constants import KVP_HEADER_LEN, KVP_MAX_CHUNK_LEN
from kvpool.keys import BlockKey
from kvpool.wire import Header


class WriteKey(NamedTuple):
    """One write: which writer (source address and port) writes which version of which block.

    Not a block key: two writers of one block, or one writer's two versions, are two writes staged apart.
    """

    address: str
    """Source address: what the per-source byte budget is charged to."""
    port: int
    block: BlockKey
    version: int


def chunk_cost(chunk_len: int) -> int:
    """Bytes one staged chunk is charged: the request header kept for its ack, and its value bytes."""
    return KVP_HEADER_LEN + chunk_len


def write_cost(chunk_count: int, chunk_len: int) -> int:
    """Bytes a whole write of `chunk_count` chunks costs while staged."""
    return chunk_count * chunk_cost(chunk_len)


DEFAULT_BLOCK = 64 << 20
"""The block the default budgets are sized for: 64 MiB (a 512-token block of Llama-3-8B) in 128-byte chunks,
the costliest way to send it (524,288 chunks of 172 bytes: 86 MiB staged)."""


@dataclass(frozen=True, slots=True)
class StagingOptions:
    """Bounds of the staging area."""

    max_bytes: int = 256 << 20
    """All staged chunks together, in bytes (`chunk_cost` per chunk): a bound, nothing is allocated up front."""
    max_bytes_per_source: int = 96 << 20
    """Staged bytes one source address may hold (default: one 64 MiB block in 128-byte chunks). A write larger
    than this can never be staged whole: it is refused at once with ERR_FULL."""
    idle_timeout: float = 5.0
    """Seconds after its last chunk arrived that an incomplete write is dropped."""
    commit_log_entries: int = 4096
    """Recent commits remembered for idempotent resends (oldest forgotten first)."""
    commit_log_ttl: float = 30.0
    """Seconds a commit is remembered (longer than any client's retry span)."""
    commit_log_bytes: int = 16 << 20
    """Bytes of chunk checksums the commit log keeps (4 per chunk; oldest commits forgotten first)."""

    def __post_init__(self) -> None:
        least = chunk_cost(KVP_MAX_CHUNK_LEN)
        if self.max_bytes_per_source < least or self.max_bytes < self.max_bytes_per_source:
            raise ValueError(f"staging needs max_bytes >= max_bytes_per_source >= {least} (one largest chunk)")
        if self.idle_timeout <= 0 or self.commit_log_ttl <= 0 or self.commit_log_entries < 0:
            raise ValueError("staging timeouts must be > 0 and the commit log size >= 0")


@dataclass(slots=True)
class StagedChunk:
    request: Header
    """The PUT as it came (its req_id and fields are echoed in the ack sent at commit)."""
    value: bytes
    """The value bytes (the chunk size, padding included)."""


@dataclass(slots=True)
class StagedWrite:
    """The chunks one writer has sent of one version of one block."""

    key: WriteKey
    chunk_count: int
    chunk_len: int
    """Bytes of each chunk's value (the write's chunk size)."""
    chunks: dict[int, StagedChunk] = field(default_factory=dict)
    touched: float = 0.0

    @property
    def source(self) -> tuple[str, int]:
        return self.key.address, self.key.port

    @property
    def block(self) -> BlockKey:
        return self.key.block

    @property
    def version(self) -> int:
        return self.key.version

    @property
    def complete(self) -> bool:
        return len(self.chunks) == self.chunk_count


class Staged(Enum):
    """What `StagingArea.stage` did with a chunk."""

    ADDED = "added"
    DUPLICATE = "duplicate"
    """The same bytes again (a resend): kept once, the newest request header kept for the ack."""
    CONFLICT = "conflict"
    """This writer already staged other bytes for this chunk of this version: refused."""
    COUNT_MISMATCH = "count_mismatch"
    """This writer staged chunks of this version with another chunk_count or chunk size: refused."""
    TOO_LARGE = "too_large"
    """The whole write would exceed the per-source budget: it could never be staged whole (ERR_FULL)."""


class StagingArea:
    """Staged writes, least recently touched first, with byte accounting globally and per source address."""

    def __init__(self, options: StagingOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self._clock = clock
        self._writes: OrderedDict[WriteKey, StagedWrite] = OrderedDict()
        self._by_source: dict[str, OrderedDict[WriteKey, None]] = {}
        self._by_block: dict[BlockKey, set[WriteKey]] = {}
        self._source_bytes: dict[str, int] = {}
        self.bytes = 0
        """Bytes charged now (`chunk_cost` per staged chunk)."""
        self.evicted = 0
        """Writes dropped to stay within a budget."""
        self.expired = 0
        """Writes dropped after `idle_timeout`."""

    def __len__(self) -> int:
        return len(self._writes)

    def stage(self, key: WriteKey, chunk_count: int, request: Header, value: bytes) -> tuple[Staged, StagedWrite]:
        """Add one chunk to the write `key` (creating it), evicting older writes to stay within the budgets."""
        self.expire()
        write = self._writes.get(key)
        if write is None:
            if write_cost(chunk_count, len(value)) > self.options.max_bytes_per_source:
                return Staged.TOO_LARGE, StagedWrite(key, chunk_count, len(value))
            write = StagedWrite(key, chunk_count, len(value))
            self._writes[key] = write
            self._by_source.setdefault(key.address, OrderedDict())[key] = None
            self._by_block.setdefault(write.block, set()).add(key)
        write.touched = self._clock()
        self._writes.move_to_end(key)
        self._by_source[key.address].move_to_end(key)
        if chunk_count != write.chunk_count or len(value) != write.chunk_len:
            return Staged.COUNT_MISMATCH, write
        idx = request.chunk_idx
        known = write.chunks.get(idx)
        if known is not None:
            if known.value != value:
                return Staged.CONFLICT, write
            known.request = request
            return Staged.DUPLICATE, write
        cost = chunk_cost(write.chunk_len)
        self._make_room(key, cost)
        write.chunks[idx] = StagedChunk(request, value)
        self._charge(key.address, cost)
        return Staged.ADDED, write

    def _make_room(self, keep: WriteKey, cost: int) -> None:
        """Evict least recently touched writes (the source's own first) until one more chunk fits."""
        source = keep.address
        while self._source_bytes.get(source, 0) + cost > self.options.max_bytes_per_source:
            victim = next((k for k in self._by_source[source] if k != keep), None)
            assert victim is not None, "a write larger than the per-source budget (refused as TOO_LARGE)"
            self.remove(victim)
            self.evicted += 1
        while self.bytes + cost > self.options.max_bytes:
            victim = next(k for k in self._writes if k != keep)
            self.remove(victim)
            self.evicted += 1

    def _charge(self, source: str, amount: int) -> None:
        self.bytes += amount
        left = self._source_bytes.get(source, 0) + amount
        if left:
            self._source_bytes[source] = left
        else:
            del self._source_bytes[source]

    def remove(self, key: WriteKey) -> StagedWrite | None:
        """Forget the write `key` (committed, resolved or dropped); returns it."""
        write = self._writes.pop(key, None)
        if write is None:
            return None
        source = self._by_source[key.address]
        del source[key]
        if not source:
            del self._by_source[key.address]
        others = self._by_block[write.block]
        others.discard(key)
        if not others:
            del self._by_block[write.block]
        self._charge(key.address, -chunk_cost(write.chunk_len) * len(write.chunks))
        return write

    def writes_of(self, block: BlockKey) -> list[StagedWrite]:
        """The staged writes of one block, any writer, any version."""
        return [self._writes[k] for k in self._by_block.get(block, ())]

    def expire(self) -> int:
        """Drop writes idle for longer than `idle_timeout`; how many."""
        deadline = self._clock() - self.options.idle_timeout
        dropped = 0
        while self._writes:
            key, write = next(iter(self._writes.items()))
            if write.touched > deadline:
                break
            self.remove(key)
            dropped += 1
        self.expired += dropped
        return dropped

    def __iter__(self) -> Iterator[StagedWrite]:
        return iter(list(self._writes.values()))


class CommitLog:
    """Which writer committed which chunk checksums, remembered for `commit_log_ttl` seconds (bounded)."""

    def __init__(self, options: StagingOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self._clock = clock
        self._entries: OrderedDict[WriteKey, tuple[float, int, array[int]]] = OrderedDict()
        self._bytes = 0

    def record(self, key: WriteKey, chunk_count: int, csums: tuple[int, ...]) -> None:
        """Remember a commit: 4 bytes per chunk (256 KiB for a 64 MiB block of 1 KiB chunks)."""
        if self.options.commit_log_entries == 0:
            return
        self._forget(key)
        sums = array("I", csums)
        self._entries[key] = (self._clock(), chunk_count, sums)
        self._bytes += len(sums) * sums.itemsize
        while len(self._entries) > self.options.commit_log_entries or (
                self._bytes > self.options.commit_log_bytes and len(self._entries) > 1):
            self._forget(next(iter(self._entries)))

    def _forget(self, key: WriteKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[2]) * entry[2].itemsize

    def committed(self, key: WriteKey, chunk_idx: int, chunk_count: int, csum: int) -> bool:
        """Whether this writer committed exactly this chunk (same count, same checksum) recently."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        at, count, csums = entry
        if at < self._clock() - self.options.commit_log_ttl:
            self._forget(key)
            return False
        return count == chunk_count and chunk_idx < count and csums[chunk_idx] == csum

    def __len__(self) -> int:
        return len(self._entries)
