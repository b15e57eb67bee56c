"""A KV-cache block as KVP value chunks: split bytes into chunks of one size and put them back together, checked.

A block of n bytes travels as ceil(n / chunk_len) chunks (at least one, so an empty block is one chunk with
value_len 0), where chunk_len is the block's chunk size (protocol v2: 128 B .. 8 KiB, `chunk_shift` on the wire;
128 B chunks fit a switch slot, larger ones are only forwarded and coalesced). Every chunk carries the block's
version and its own CRC-32, and all chunks of one block must agree on `chunk_count`, chunk size and `version`.
`Reassembly` enforces exactly that, so a reader never returns a block stitched from two versions (say, chunk 0
from a stale switch slot and chunk 1 from the storage node), and writes each chunk straight into one buffer
allocated once per block, that a reader hands out as the block (`Reassembly.take`: no copy).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from kvpool.constants import CHUNK_SIZES, KVP_HEADER_LEN, KVP_VALUE_LEN
from kvpool.keys import MAX_CHUNKS

MAX_BLOCK_LEN = 1 << 30
"""Largest block a client writes or reads, in bytes (1 GiB): a memory bound of this implementation, not of the
protocol (which allows 2^32 - 1 chunks). A reply announcing more is refused before anything is allocated."""
SMALL_BLOCK_LEN = 255 * KVP_VALUE_LEN
"""Blocks up to this size (32,640 bytes, the largest v1 block) travel in slot-sized 128-byte chunks by default,
so the switch can store them; larger ones in the largest chunks the path MTU carries (`default_chunk_len`)."""
LARGE_CHUNK_LEN = 1024
"""Chunk size of large blocks when the path MTU is unknown: 1 KiB keeps a message (1,068 bytes + UDP/IPv4/Ethernet) under a
1,500-byte MTU; 4 KiB and 8 KiB chunks need jumbo frames (MTU 9000)."""


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
    """One value chunk of a block, as it travels (value padded to the chunk size)."""

    idx: int
    count: int
    value_len: int
    """Meaningful bytes of `value` (the chunk size except maybe in the last chunk)."""
    value: bytes | memoryview
    """Exactly the chunk size in bytes, padding included (a slice of the block where no padding is needed)."""
    version: int

    @property
    def csum(self) -> int:
        """`value_csum` of this chunk."""
        return zlib.crc32(self.value)

    @property
    def data(self) -> bytes | memoryview:
        """The meaningful bytes (`value_len` of them)."""
        return self.value[:self.value_len]


_CHUNK_SIZES = frozenset(CHUNK_SIZES)

IP_UDP_OVERHEAD = 20 + 8
"""Bytes of an IPv4 header without options and a UDP header: what a KVP message adds to a datagram's size."""


def chunk_len_for_mtu(mtu: int) -> int:
    """The largest chunk size whose whole datagram (IPv4 + UDP + KVP header + chunk) fits in `mtu` bytes; the
    smallest chunk size when none does (the path then fragments, which still works)."""
    room = mtu - IP_UDP_OVERHEAD - KVP_HEADER_LEN
    fitting = [c for c in CHUNK_SIZES if c <= room]
    return fitting[-1] if fitting else CHUNK_SIZES[0]


def default_chunk_len(size: int, path_mtu: int | None = None) -> int:
    """The chunk size a writer uses for a block of `size` bytes when not told: 128 B up to SMALL_BLOCK_LEN
    (switch-cacheable), beyond that the largest chunk a datagram of the path MTU holds (1 KiB at 1,500 bytes,
    8 KiB at 9,000), or LARGE_CHUNK_LEN when the MTU is unknown."""
    if size <= SMALL_BLOCK_LEN:
        return KVP_VALUE_LEN
    return LARGE_CHUNK_LEN if path_mtu is None else chunk_len_for_mtu(path_mtu)


def _check_chunk_len(chunk_len: int) -> None:
    if chunk_len not in CHUNK_SIZES:
        raise BlockError(f"chunk size must be one of {', '.join(map(str, CHUNK_SIZES))} bytes, got {chunk_len}")


def chunk_count(size: int, chunk_len: int = KVP_VALUE_LEN) -> int:
    """Chunks needed for `size` bytes (at least 1)."""
    return max(1, -(-size // chunk_len))


def split(data: bytes | memoryview, version: int, chunk_len: int = KVP_VALUE_LEN) -> list[Chunk]:
    """The chunks of a block, in order; full chunks are slices of `data` (no copy), the last one is padded."""
    _check_chunk_len(chunk_len)
    if len(data) > MAX_BLOCK_LEN:
        raise BlockError(f"block of {len(data)} bytes exceeds the client's {MAX_BLOCK_LEN}")
    if not 0 <= version < 1 << 32:
        raise BlockError(f"version must fit 32 bits, got {version}")
    count = chunk_count(len(data), chunk_len)
    if count > MAX_CHUNKS:
        raise BlockError(f"block of {count} chunks exceeds the protocol's {MAX_CHUNKS}")
    view = memoryview(data).toreadonly()
    chunks = []
    for idx in range(count):
        part = view[idx * chunk_len:(idx + 1) * chunk_len]
        value = part if len(part) == chunk_len else bytes(part).ljust(chunk_len, b"\0")
        chunks.append(Chunk(idx, count, len(part), value, version))
    return chunks


class Reassembly:
    """Collects the chunks of one block into one buffer and checks them (checksum, count, size, version,
    lengths). The buffer is allocated once, when the first chunk tells the block's count and chunk size."""

    def __init__(self, version: int = 0, max_len: int = MAX_BLOCK_LEN) -> None:
        self.min_version = version
        """The reader asked for at least this version (0: any)."""
        self.max_len = max_len
        self.version: int | None = None
        """The version every chunk must carry: the first chunk's."""
        self.count: int | None = None
        self.chunk_len: int | None = None
        self._buffer = bytearray()
        self._view = memoryview(self._buffer)
        """The buffer, as a view that chunks are written through (made once per block, not per chunk)."""
        self._have = bytearray()
        self._received = 0
        self._last_len = 0
        self._taken = False
        """The buffer was handed out (`take`)."""

    def add(self, idx: int, count: int, value_len: int, value: bytes | memoryview, version: int, csum: int) -> bool:
        """Accept one chunk: True when it was new, False when the assembly had it (a duplicate, left as it was);
        raises BlockError if it contradicts the chunks seen so far or its checksum. The chunk is copied into the
        block's buffer: `value` may be a view the caller reuses afterwards."""
        size = len(value)
        if size not in _CHUNK_SIZES:
            raise BlockError(f"chunk {idx}: value must be a chunk size ({', '.join(map(str, CHUNK_SIZES))} bytes), "
                             f"got {size}")
        crc = zlib.crc32(value)
        if crc != csum:
            raise ChecksumError(f"chunk {idx}: checksum {crc:#010x} != value_csum {csum:#010x}")
        if count == 0 or idx >= count:
            raise BlockError(f"chunk {idx}: out of range for chunk_count {count}")
        if version < self.min_version:
            raise VersionMismatch(f"chunk {idx}: version {version} older than the requested {self.min_version} "
                                  "(mixed versions)", self.min_version)
        known = self.count
        if known is not None:  # (every later chunk: the rules against the first one's count, size and version)
            if version != self.version:
                raise VersionMismatch(f"chunk {idx}: version {version} != {self.version} (mixed versions)",
                                      max(version, self.version or 0))
            if count != known:
                raise BlockError(f"chunk {idx}: chunk_count {count} != {known} of earlier chunks")
            if size != self.chunk_len:
                raise BlockError(f"chunk {idx}: chunk size {size} != {self.chunk_len} of earlier chunks")
        if value_len > size or (idx < count - 1 and value_len != size):
            raise BlockError(f"chunk {idx}: value_len {value_len} invalid for chunk {idx} of {count}")
        if known is None:
            if count * size > self.max_len:
                raise BlockError(f"chunk {idx}: a block of {count} chunks of {size} bytes exceeds {self.max_len}")
            self._buffer = bytearray(count * size)
            self._view = memoryview(self._buffer)
            self._have = bytearray(count)
            self.count, self.version, self.chunk_len = count, version, size
        have = self._have
        if have[idx]:
            return False
        start = idx * size
        self._view[start:start + size] = value
        have[idx] = 1
        self._received += 1
        if idx == count - 1:
            self._last_len = value_len
        return True

    def has(self, idx: int) -> bool:
        """Whether chunk `idx` was received (False while the count is unknown or `idx` is out of range)."""
        return 0 <= idx < len(self._have) and bool(self._have[idx])

    @property
    def missing(self) -> list[int]:
        """Chunk indices not received yet ([0] until the count is known)."""
        if self.count is None:
            return [0]
        if self._received == self.count:
            return []
        return [i for i in range(self.count) if not self._have[i]]

    @property
    def complete(self) -> bool:
        return self.count is not None and self._received == self.count

    def _length(self) -> int:
        """The block's bytes (the last chunk's padding left out); raises BlockError while chunks are missing, or
        once the buffer was handed out (`take`)."""
        if self._taken:
            raise BlockError("block already handed out (Reassembly.take)")
        if not self.complete:
            raise BlockError(f"block incomplete: missing chunks {self.missing[:10]}")
        assert self.count is not None and self.chunk_len is not None
        return (self.count - 1) * self.chunk_len + self._last_len

    def data(self) -> bytes:
        """The block's bytes, a copy; raises BlockError while chunks are missing."""
        return bytes(self._view[:self._length()])

    def take(self) -> bytearray:
        """The block's bytes without a copy: the buffer the chunks were written into, cut to the block's length,
        handed over (the assembly keeps nothing of it, and hands out nothing more: `data` and `take` raise
        BlockError from then on); raises BlockError while chunks are missing. What a reader returns: copying a
        16 MiB block once more cost a reader 4 µs per 8 KiB chunk (a fresh allocation's page faults, then the
        copy)."""
        length = self._length()
        buffer, self._buffer = self._buffer, bytearray()
        self._view.release()  # (a bytearray with a view on it cannot be cut)
        self._view = memoryview(self._buffer)
        self._taken = True
        del buffer[length:]  # at most a chunk's padding: the allocation stays, nothing is copied
        return buffer
