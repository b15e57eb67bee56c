"""The KVP header as a plain struct: fast pack/unpack and the protocol's validity rules, without Scapy.

The storage node answers every datagram, so its hot path cannot afford a Scapy dissection (~100 µs); this
module is that hot path. `kvpool.protocol` (the Scapy layer) is the reference shape of the same bytes, and
`tests/kvpool/test_wire.py` checks that both agree byte for byte.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass
from enum import StrEnum

from kvpool.constants import (
    KVP_HEADER_LEN,
    KVP_MAGIC,
    KVP_MAX_CHUNK_SHIFT,
    KVP_MIN_CHUNK_SHIFT,
    KVP_SLOT_SHIFT,
    KVP_VALUE_LEN,
    KVP_VERSION,
    Flag,
    Opcode,
    Status,
)
from kvpool.keys import CHUNK_BITS, PREFIX_HASH_BITS, TENANT_BITS, BlockKey, ChunkKey

_CODE = {8: "B", 16: "H", 32: "I", 64: "Q"}
HEADER = struct.Struct(f"!HBBBB{_CODE[TENANT_BITS]}I{_CODE[PREFIX_HASH_BITS]}{_CODE[CHUNK_BITS] * 2}HBBIII")
"""magic ver opcode status flags tenant req_id prefix_hash chunk_idx chunk_count value_len chunk_shift reserved
version value_csum aux (v2; the key widths come from `kvpool.keys`)."""
assert HEADER.size == KVP_HEADER_LEN
PREAMBLE_LEN = 3
"""Bytes of magic and ver: enough to tell a KVP message of another version (BAD_VERSION) from a short one."""

_OPCODES = frozenset(int(o) for o in Opcode)


class Reason(StrEnum):
    """Why a datagram is not a valid KVP message, one reason per rule of docs/protocol.md.

    The switch counts coarser classes (`drop_reason_t` in p4src/include/constants.p4); `drop_reason` maps.
    """

    SHORT_HEADER = "short_header"
    """Fewer than 3 bytes of UDP payload, or a v2 magic and version but fewer than 44 bytes."""
    NOT_KVP = "not_kvp"
    """Magic is not 0x4B56: plain UDP, not ours; never answered."""
    BAD_VERSION = "bad_version"
    """`ver` is not 2 (a v1 message, for example): answered ERR_MALFORMED when the request id came."""
    UNKNOWN_OP = "unknown_op"
    """Good magic, unknown opcode: answered with ERR_UNKNOWN_OP, not ERR_MALFORMED."""
    BAD_CHUNK_SIZE = "bad_chunk_size"
    """`chunk_shift` outside 7..13 (chunks of 128 B .. 8 KiB)."""
    VALUE_TRUNCATED = "value_truncated"
    """F_VALUE is set but fewer than `1 << chunk_shift` bytes follow the header."""
    VALUE_MISSING = "value_missing"
    """F_VALUE is clear on PUT or SLOT_WRITE."""
    ZERO_CHUNK_COUNT = "zero_chunk_count"
    """`chunk_count` is 0."""
    CHUNK_IDX_RANGE = "chunk_idx_range"
    """`chunk_idx >= chunk_count`."""
    VALUE_LEN_RANGE = "value_len_range"
    """`value_len > 1 << chunk_shift`."""

    @property
    def drop_reason(self) -> str:
        """The member of the P4 program's `drop_reason_t` that counts this reason."""
        return _DROP_REASON[self]

    @property
    def status(self) -> Status:
        """The status a receiver answers with (NOT_KVP and SHORT_HEADER usually cannot be answered)."""
        return Status.ERR_UNKNOWN_OP if self is Reason.UNKNOWN_OP else Status.ERR_MALFORMED


_DROP_REASON = {
    Reason.NOT_KVP: "BAD_MAGIC",
    Reason.SHORT_HEADER: "SHORT",
    Reason.BAD_VERSION: "BAD_VERSION",
    Reason.UNKNOWN_OP: "UNKNOWN_OP",
    Reason.BAD_CHUNK_SIZE: "BAD_CHUNK_SIZE",
    Reason.VALUE_TRUNCATED: "NO_VALUE",
    Reason.VALUE_MISSING: "NO_VALUE",
    Reason.ZERO_CHUNK_COUNT: "BAD_CHUNK",
    Reason.CHUNK_IDX_RANGE: "BAD_CHUNK",
    Reason.VALUE_LEN_RANGE: "BAD_VALUE_LEN",
}


@dataclass(slots=True, unsafe_hash=True)
class Header:
    """One `kvp_h`; field names and widths as in docs/protocol.md.

    Treated as immutable (`replace` makes a changed copy; it hashes by value), but not a frozen dataclass: a
    frozen one sets each of its 15 fields through `object.__setattr__`, 1.3 µs per header against 0.2 µs, and a
    reader builds headers per chunk (its GET, the reply it unpacks)."""

    opcode: int
    status: int = Status.OK
    flags: int = 0
    tenant: int = 0
    req_id: int = 0
    prefix_hash: int = 0
    chunk_idx: int = 0
    chunk_count: int = 1
    value_len: int = 0
    version: int = 0
    value_csum: int = 0
    aux: int = 0
    magic: int = KVP_MAGIC
    ver: int = KVP_VERSION
    chunk_shift: int = KVP_SLOT_SHIFT
    """log2 of the chunk's payload bytes (7..13): the value that follows is exactly `1 << chunk_shift` bytes."""

    @property
    def key(self) -> ChunkKey:
        """The chunk this message is about (checked: a hand-built header's fields may be out of range; code that
        only handles unpacked headers may name it with `ChunkKey.from_wire` instead)."""
        return ChunkKey(self.tenant, self.prefix_hash, self.chunk_idx)

    @property
    def block(self) -> BlockKey:
        """The block this message is about (checked, as `key`)."""
        return BlockKey(self.tenant, self.prefix_hash)

    @property
    def chunk_len(self) -> int:
        """Bytes of this message's value chunk (padding included)."""
        return 1 << self.chunk_shift

    def pack(self) -> bytes:
        return HEADER.pack(
            self.magic, self.ver, self.opcode, self.status, self.flags, self.tenant, self.req_id,
            self.prefix_hash, self.chunk_idx, self.chunk_count, self.value_len, self.chunk_shift, 0,
            self.version, self.value_csum, self.aux,
        )

    def replace(self, **changes: int) -> Header:
        return dataclasses.replace(self, **changes)

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> Header:
        """The header at the start of `data` (at least 44 bytes; no validity checks, see `check`)."""
        (magic, ver, opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len,
         chunk_shift, _reserved, version, value_csum, aux) = HEADER.unpack_from(data)
        return cls(opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len,
                   version, value_csum, aux, magic, ver, chunk_shift)


def pad_value(value: bytes | memoryview, size: int = KVP_VALUE_LEN) -> bytes:
    """A value chunk of exactly `size` bytes (default: one slot, 128): `value` zero-padded."""
    if len(value) > size:
        raise ValueError(f"a value chunk holds at most {size} bytes, got {len(value)}")
    return bytes(value).ljust(size, b"\0")


def value_checksum(value: bytes | memoryview, size: int = KVP_VALUE_LEN) -> int:
    """`value_csum`: CRC-32 (zlib) of the `size` value bytes including padding."""
    if len(value) == size:
        return zlib.crc32(value)
    return zlib.crc32(pad_value(value, size))


def encode(header: Header, value: bytes | memoryview | None = None) -> bytes:
    """A whole message: with a value, F_VALUE, `value_len` and `value_csum` are filled in from it (padded to
    the header's chunk size, `1 << chunk_shift`)."""
    if value is None:
        return header.pack()
    chunk = pad_value(value, header.chunk_len)
    header = header.replace(flags=header.flags | Flag.VALUE, value_len=len(value), value_csum=zlib.crc32(chunk))
    return header.pack() + chunk


def has_magic(data: bytes | memoryview) -> bool:
    """Whether the datagram starts with KVP's magic (then a receiver may answer even a malformed one)."""
    return len(data) >= 2 and data[0] << 8 | data[1] == KVP_MAGIC


def check(data: bytes | memoryview) -> Reason | None:
    """The protocol's validity rules on a UDP payload; None when the message may be applied.

    Order as the switch checks them: magic and version (3 bytes), header length, opcode, chunk size, then the
    value and chunk rules, so each message has exactly one reason.
    """
    verdict = checked(data)
    return verdict if isinstance(verdict, Reason) else None


_VALUE = int(Flag.VALUE)
_NEEDS_VALUE = frozenset((int(Opcode.PUT), int(Opcode.SLOT_WRITE)))
_unpack_header = HEADER.unpack_from


def checked(data: bytes | memoryview) -> Header | Reason:
    """`check`, handing back the header it unpacked when the message is valid (a receiver's hot path then
    unpacks it once), else the reason it is not. The rules run on the unpacked fields and the Header is built
    last, once (a reader and a node call this per datagram)."""
    size = len(data)
    if size < PREAMBLE_LEN:
        return Reason.SHORT_HEADER
    if data[0] << 8 | data[1] != KVP_MAGIC:  # (`has_magic`, inline: every datagram of a reader and a node)
        return Reason.NOT_KVP
    if data[2] != KVP_VERSION:
        return Reason.BAD_VERSION
    if size < KVP_HEADER_LEN:
        return Reason.SHORT_HEADER
    (magic, ver, opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len,
     chunk_shift, _reserved, version, value_csum, aux) = _unpack_header(data)
    if opcode not in _OPCODES:
        return Reason.UNKNOWN_OP
    if not KVP_MIN_CHUNK_SHIFT <= chunk_shift <= KVP_MAX_CHUNK_SHIFT:
        return Reason.BAD_CHUNK_SIZE
    chunk_len = 1 << chunk_shift
    if flags & _VALUE:
        if size < KVP_HEADER_LEN + chunk_len:
            return Reason.VALUE_TRUNCATED
    elif opcode in _NEEDS_VALUE:
        return Reason.VALUE_MISSING
    if chunk_count == 0:
        return Reason.ZERO_CHUNK_COUNT
    if chunk_idx >= chunk_count:
        return Reason.CHUNK_IDX_RANGE
    if value_len > chunk_len:
        return Reason.VALUE_LEN_RANGE
    return Header(opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len, version,
                  value_csum, aux, magic, ver, chunk_shift)


def value_of(data: bytes | memoryview) -> bytes | None:
    """The value bytes (`1 << chunk_shift` of them, padding included) of a valid message, or None when F_VALUE
    is clear."""
    if not data[5] & Flag.VALUE:
        return None
    return bytes(data[KVP_HEADER_LEN:KVP_HEADER_LEN + (1 << data[30])])
