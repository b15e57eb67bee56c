"""A KV-cache block as KVP value chunks: split bytes into 128-byte chunks and put them back together, checked.

A block of n bytes travels as ceil(n / 128) chunks (at least one, so an empty block is one chunk with
value_len 0); every chunk carries the block's version and its own CRC-32, and all chunks of one block must
agree on `chunk_count` and `version`. `Reassembly` enforces exactly that, so a reader never returns a block
stitched from two versions (say, chunk 0 from a stale switch slot and chunk 1 from the storage node).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from kvpool.constants import KVP_MAX_BLOCK_LEN, KVP_MAX_CHUNKS, KVP_VALUE_LEN
from kvpool.wire import pad_value


class BlockError(ValueError):
    """A block cannot be built or reassembled; the message says which chunk and why."""


class ChecksumError(BlockError):
    """A chunk's bytes do not match its `value_csum` (damaged on the way: worth asking again)."""


class VersionMismatch(BlockError):
    """A chunk's version differs from the block's so far (a newer write committed during the read), or is
    older than the reader asked for. `newest` is the newest version seen: a reader restarts at it."""

    def __init__(self, message: str, newest: int) -> None:
        super().__init__(message)
        self.newest = newest


@dataclass(frozen=True, slots=True)
class Chunk:
    """One value chunk of a block, as it travels (value padded to 128 bytes)."""

    idx: int
    count: int
    value_len: int
    """Meaningful bytes of `value` (128 except maybe in the last chunk)."""
    value: bytes
    """Exactly 128 bytes, padding included."""
    version: int

    @property
    def csum(self) -> int:
        """`value_csum` of this chunk."""
        return zlib.crc32(self.value)


def chunk_count(size: int) -> int:
    """Chunks needed for `size` bytes (at least 1)."""
    return max(1, -(-size // KVP_VALUE_LEN))


def split(data: bytes, version: int) -> list[Chunk]:
    """The chunks of a block, in order."""
    if len(data) > KVP_MAX_BLOCK_LEN:
        raise BlockError(f"block of {len(data)} bytes exceeds the protocol's {KVP_MAX_BLOCK_LEN} "
                         f"({KVP_MAX_CHUNKS} chunks of {KVP_VALUE_LEN} bytes)")
    if not 0 <= version < 1 << 32:
        raise BlockError(f"version must fit 32 bits, got {version}")
    count = chunk_count(len(data))
    chunks = []
    for idx in range(count):
        part = data[idx * KVP_VALUE_LEN:(idx + 1) * KVP_VALUE_LEN]
        chunks.append(Chunk(idx, count, len(part), pad_value(part), version))
    return chunks


class Reassembly:
    """Collects the chunks of one block and checks them (checksum, count, version, lengths)."""

    def __init__(self, version: int = 0) -> None:
        self.min_version = version
        """The reader asked for at least this version (0: any)."""
        self.version: int | None = None
        """The version every chunk must carry: the first chunk's."""
        self.count: int | None = None
        self._chunks: dict[int, Chunk] = {}

    def add(self, idx: int, count: int, value_len: int, value: bytes, version: int, csum: int) -> None:
        """Accept one chunk; raises BlockError if it contradicts the chunks seen so far or its checksum."""
        if len(value) != KVP_VALUE_LEN:
            raise BlockError(f"chunk {idx}: value must be {KVP_VALUE_LEN} bytes, got {len(value)}")
        if zlib.crc32(value) != csum:
            raise ChecksumError(f"chunk {idx}: checksum {zlib.crc32(value):#010x} != value_csum {csum:#010x}")
        if count == 0 or idx >= count:
            raise BlockError(f"chunk {idx}: out of range for chunk_count {count}")
        if version < self.min_version:
            raise VersionMismatch(f"chunk {idx}: version {version} older than the requested {self.min_version} "
                                  "(mixed versions)", self.min_version)
        if self.version is not None and version != self.version:
            raise VersionMismatch(f"chunk {idx}: version {version} != {self.version} (mixed versions)",
                                  max(version, self.version))
        if self.count is not None and count != self.count:
            raise BlockError(f"chunk {idx}: chunk_count {count} != {self.count} of earlier chunks")
        if value_len > KVP_VALUE_LEN or (idx < count - 1 and value_len != KVP_VALUE_LEN):
            raise BlockError(f"chunk {idx}: value_len {value_len} invalid for chunk {idx} of {count}")
        self.count, self.version = count, version
        self._chunks[idx] = Chunk(idx, count, value_len, value, version)

    @property
    def missing(self) -> list[int]:
        """Chunk indices not received yet ([0] until the count is known)."""
        if self.count is None:
            return [0]
        return [i for i in range(self.count) if i not in self._chunks]

    @property
    def complete(self) -> bool:
        return not self.missing

    def data(self) -> bytes:
        """The block's bytes; raises BlockError while chunks are missing."""
        if not self.complete:
            raise BlockError(f"block incomplete: missing chunks {self.missing}")
        return b"".join(self._chunks[i].value[: self._chunks[i].value_len] for i in range(self.count or 0))
