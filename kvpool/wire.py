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
    KVP_VALUE_LEN,
    KVP_VERSION,
    Flag,
    Opcode,
    Status,
)

HEADER = struct.Struct("!HBBBBHIQBBHIII")
"""magic ver opcode status flags tenant req_id prefix_hash chunk_idx chunk_count value_len version value_csum aux."""
assert HEADER.size == KVP_HEADER_LEN

_OPCODES = frozenset(int(o) for o in Opcode)


class Reason(StrEnum):
    """Why a datagram is not a valid KVP message, one reason per rule of docs/protocol.md.

    The switch counts coarser classes (`drop_reason_t` in p4src/include/constants.p4); `drop_reason` maps.
    """

    SHORT_HEADER = "short_header"
    """Fewer than 36 bytes of UDP payload (whatever the magic: the switch cannot parse kvp_h)."""
    NOT_KVP = "not_kvp"
    """Magic is not 0x4B56: plain UDP, not ours; never answered."""
    BAD_VERSION = "bad_version"
    """`ver` is not 1."""
    UNKNOWN_OP = "unknown_op"
    """Good magic, unknown opcode: answered with ERR_UNKNOWN_OP, not ERR_MALFORMED."""
    VALUE_TRUNCATED = "value_truncated"
    """F_VALUE is set but fewer than 128 bytes follow the header."""
    VALUE_MISSING = "value_missing"
    """F_VALUE is clear on PUT or SLOT_WRITE."""
    ZERO_CHUNK_COUNT = "zero_chunk_count"
    """`chunk_count` is 0."""
    CHUNK_IDX_RANGE = "chunk_idx_range"
    """`chunk_idx >= chunk_count`."""
    VALUE_LEN_RANGE = "value_len_range"
    """`value_len > 128`."""

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
    Reason.VALUE_TRUNCATED: "NO_VALUE",
    Reason.VALUE_MISSING: "NO_VALUE",
    Reason.ZERO_CHUNK_COUNT: "BAD_CHUNK",
    Reason.CHUNK_IDX_RANGE: "BAD_CHUNK",
    Reason.VALUE_LEN_RANGE: "BAD_VALUE_LEN",
}


@dataclass(frozen=True, slots=True)
class Header:
    """One `kvp_h`; field names and widths as in docs/protocol.md."""

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

    @property
    def key(self) -> tuple[int, int, int]:
        """The block-chunk key `(tenant, prefix_hash, chunk_idx)`."""
        return (self.tenant, self.prefix_hash, self.chunk_idx)

    def pack(self) -> bytes:
        return HEADER.pack(
            self.magic, self.ver, self.opcode, self.status, self.flags, self.tenant, self.req_id,
            self.prefix_hash, self.chunk_idx, self.chunk_count, self.value_len, self.version,
            self.value_csum, self.aux,
        )

    def replace(self, **changes: int) -> Header:
        return dataclasses.replace(self, **changes)

    @classmethod
    def unpack(cls, data: bytes) -> Header:
        """The header at the start of `data` (at least 36 bytes; no validity checks, see `check`)."""
        (magic, ver, opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len,
         version, value_csum, aux) = HEADER.unpack_from(data)
        return cls(opcode, status, flags, tenant, req_id, prefix_hash, chunk_idx, chunk_count, value_len,
                   version, value_csum, aux, magic, ver)


def pad_value(value: bytes) -> bytes:
    """A value chunk of exactly 128 bytes: `value` zero-padded (at most 128 bytes in)."""
    if len(value) > KVP_VALUE_LEN:
        raise ValueError(f"a value chunk holds at most {KVP_VALUE_LEN} bytes, got {len(value)}")
    return value.ljust(KVP_VALUE_LEN, b"\0")


def value_checksum(value: bytes) -> int:
    """`value_csum`: CRC-32 (zlib) of the 128 value bytes including padding."""
    return zlib.crc32(pad_value(value))


def encode(header: Header, value: bytes | None = None) -> bytes:
    """A whole message: with a value, F_VALUE, `value_len` and `value_csum` are filled in from it."""
    if value is None:
        return header.pack()
    chunk = pad_value(value)
    header = header.replace(flags=header.flags | Flag.VALUE, value_len=len(value), value_csum=zlib.crc32(chunk))
    return header.pack() + chunk


def has_magic(data: bytes) -> bool:
    """Whether the datagram starts with KVP's magic (then a receiver may answer even a malformed one)."""
    return len(data) >= 2 and data[0] << 8 | data[1] == KVP_MAGIC


def check(data: bytes) -> Reason | None:
    """The protocol's validity rules on a UDP payload; None when the message may be applied.

    Order as the switch checks them: length, magic, version, opcode, then the value and chunk rules, so each
    message has exactly one reason.
    """
    if len(data) < KVP_HEADER_LEN:
        return Reason.SHORT_HEADER
    if not has_magic(data):
        return Reason.NOT_KVP
    h = Header.unpack(data)
    if h.ver != KVP_VERSION:
        return Reason.BAD_VERSION
    if h.opcode not in _OPCODES:
        return Reason.UNKNOWN_OP
    if h.flags & Flag.VALUE and len(data) < KVP_HEADER_LEN + KVP_VALUE_LEN:
        return Reason.VALUE_TRUNCATED
    if not h.flags & Flag.VALUE and h.opcode in (Opcode.PUT, Opcode.SLOT_WRITE):
        return Reason.VALUE_MISSING
    if h.chunk_count == 0:
        return Reason.ZERO_CHUNK_COUNT
    if h.chunk_idx >= h.chunk_count:
        return Reason.CHUNK_IDX_RANGE
    if h.value_len > KVP_VALUE_LEN:
        return Reason.VALUE_LEN_RANGE
    return None


def value_of(data: bytes) -> bytes | None:
    """The 128 value bytes of a valid message, or None when F_VALUE is clear."""
    if not data[5] & Flag.VALUE:
        return None
    return bytes(data[KVP_HEADER_LEN:KVP_HEADER_LEN + KVP_VALUE_LEN])
