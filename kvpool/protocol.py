"""KVP, the KV-pool wire protocol of docs/protocol.md, as Scapy layers: `KVP` (kvp_h) and `KVPValue` (kvp_value_h).

Build requests with `IP()/UDP()/KVP(opcode="GET", ...)`; lengths, flags and the value checksum default to None
and are filled in `post_build` from the payload, as Scapy's own layers do. A field given by hand goes out as it
is, even when it disagrees with the payload, so `fuzz(KVP()/KVPValue())` builds every packet it draws.
Dissection picks `KVP` for UDP port 7420 (`KVP_UDP_PORT`) in either direction (bindings at the bottom) and, when
F_VALUE is set, `KVPValue` for a slot-sized chunk (`chunk_shift` 7, 128 bytes: what the switch parses and stores)
or `Raw` for a larger chunk (up to 8 KiB).
A GET's `aux` is its span (chunks chunk_idx .. chunk_idx + span - 1); each GET_REPLY of a span carries its offset
in `aux`, with the GET's req_id and chunk_idx + offset, so `answers()` and `sr(..., multi=True)` pair every reply
of a span GET with it.

The numbers live in `kvpool.constants`; the validity rules in `kvpool.wire.check`, re-exported here as `check`
so the storage node (bytes) and the controller (dissected packets) share one implementation.
"""

from __future__ import annotations

import struct
import zlib

from scapy.fields import (
    ByteEnumField,
    ByteField,
    FlagsField,
    IntField,
    ShortField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Padding, Raw, bind_bottom_up, bind_layers

from kvpool import wire
from kvpool.constants import (
    KVP_HEADER_LEN,
    KVP_MAGIC,
    KVP_MAX_CHUNK_SHIFT,
    KVP_MAX_GET_SPAN,
    KVP_MIN_CHUNK_SHIFT,
    KVP_SLOT_SHIFT,
    KVP_UDP_PORT,
    KVP_VALUE_LEN,
    KVP_VALUE_WORDS,
    KVP_VERSION,
    REPLY_OF,
    Flag,
    Opcode,
    Status,
    Tier,
)
from kvpool.wire import Reason

__all__ = ["KVP", "KVPValue", "Reason", "check"]

OPCODE_NAMES = {int(o): o.name for o in Opcode}
STATUS_NAMES = {int(s): s.name for s in Status}
TIER_NAMES = {int(t): t.name for t in Tier}
FLAG_NAMES = ["VALUE", "BYPASS", "PIN", "bit3", "bit4", "bit5", "bit6", "bit7"]
"""Bit i of `flags`, least significant first (Scapy's FlagsField order)."""


class KVPValue(Packet):
    """`kvp_value_h`: one 128-byte value chunk as sixteen big-endian 64-bit words w0..w15 (w0 first)."""

    name = "KVPValue"
    fields_desc = [XLongField(f"w{i}", 0) for i in range(KVP_VALUE_WORDS)]  # noqa: RUF012 (Scapy's API)

    @classmethod
    def from_bytes(cls, value: bytes) -> KVPValue:
        """The chunk holding `value` (at most 128 bytes), zero-padded."""
        words = struct.unpack(f"!{KVP_VALUE_WORDS}Q", wire.pad_value(value))
        return cls(**{f"w{i}": w for i, w in enumerate(words)})

    @property
    def value_bytes(self) -> bytes:
        """The 128 bytes of the chunk, padding included."""
        return struct.pack(f"!{KVP_VALUE_WORDS}Q", *(getattr(self, f"w{i}") for i in range(KVP_VALUE_WORDS)))

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return Padding

    def mysummary(self) -> str:
        return f"KVPValue crc32={zlib.crc32(self.value_bytes):#010x}"


class KVP(Packet):
    """`kvp_h`, the fixed 44-byte header (v2); see docs/protocol.md for every field's meaning and unit."""

    name = "KVP"
    fields_desc = [  # noqa: RUF012 (Scapy's API)
        XShortField("magic", KVP_MAGIC),
        ByteField("ver", KVP_VERSION),
        ByteEnumField("opcode", Opcode.GET, OPCODE_NAMES),
        ByteEnumField("status", Status.OK, STATUS_NAMES),
        FlagsField("flags", None, 8, FLAG_NAMES),  # None: F_VALUE set when a KVPValue follows
        ShortField("tenant", 0),
        IntField("req_id", 0),
        XLongField("prefix_hash", 0),
        IntField("chunk_idx", 0),
        IntField("chunk_count", 1),
        ShortField("value_len", None),  # None: the chunk's size with a value, 0 without
        ByteField("chunk_shift", KVP_SLOT_SHIFT),  # log2 of the chunk size: 7 (128 B, a slot) .. 13 (8 KiB)
        ByteField("reserved", 0),
        IntField("version", 0),
        XIntField("value_csum", None),  # None: crc32 of the chunk's value bytes with a value, 0 without
        IntField("aux", 0),  # by opcode (docs/protocol.md, *The aux field*); GET: the span, GET_REPLY: the offset in it
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        """Fill the fields left None from the payload; every other field, and the payload, go out as they are.

        Like Scapy's own layers, a set field is never corrected to match the payload: a `value_len`,
        `chunk_shift` or `flags` that disagrees with it is sent as given, so `fuzz(KVP()/KVPValue())` builds.
        """
        has_value = isinstance(self.payload, (KVPValue, Raw)) and len(pay) > 0
        size = self._chunk_size(len(pay))
        head = bytearray(pkt)
        if self.flags is None:
            head[5] = Flag.VALUE if has_value else 0
        if self.value_len is None:
            head[28:30] = (min(len(pay), size, 0xFFFF) if has_value else 0).to_bytes(2, "big")
        if self.value_csum is None:
            csum = zlib.crc32(pay[:size].ljust(size, b"\0")) if has_value else 0
            head[36:40] = csum.to_bytes(4, "big")
        return bytes(head) + pay

    def _chunk_size(self, payload_len: int) -> int:
        """The chunk size the checksum covers: `1 << chunk_shift` for a legal shift (7..13, at most 8 KiB of
        zero padding), else the payload as it is (a fuzzed shift of 40 must not allocate a terabyte)."""
        shift = self.chunk_shift if self.chunk_shift is not None else KVP_SLOT_SHIFT
        if KVP_MIN_CHUNK_SHIFT <= shift <= KVP_MAX_CHUNK_SHIFT:
            return 1 << shift
        return payload_len

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if self.flags is None or not int(self.flags) & Flag.VALUE:
            return Padding
        if self.chunk_shift == KVP_SLOT_SHIFT and len(payload) >= KVP_VALUE_LEN:
            return KVPValue
        return Raw  # a chunk larger than a slot, or a truncated value (`check` says VALUE_TRUNCATED)

    @property
    def span(self) -> int:
        """Chunks this GET asks for: `aux` when 2 .. KVP_MAX_GET_SPAN, else 1 (0 and 1 ask for one; a larger
        `aux` is refused whole, ERR_MALFORMED); 1 for any other opcode."""
        return self.aux if self.opcode == Opcode.GET and 1 < self.aux <= KVP_MAX_GET_SPAN else 1

    @property
    def span_offset(self) -> int:
        """Which chunk of its GET's span this GET_REPLY is (`aux`: req_id and chunk_idx are the GET's + offset);
        0 for any other message, and for ERR_MALFORMED, whose `aux` may name a protocol version instead."""
        if self.opcode != Opcode.GET_REPLY or self.status == Status.ERR_MALFORMED:
            return 0
        return self.aux or 0

    def hashret(self) -> bytes:
        """Requests and replies share req_id (a span's replies: req_id - offset), so `sr()` can bucket them."""
        return struct.pack("!I", (self.req_id - self.span_offset) & 0xFFFFFFFF)

    def answers(self, other: Packet) -> int:
        """A reply answers a request: reply opcode of the request's, same req_id and chunk key (`ChunkKey`); a
        GET_REPLY at offset i of a span GET has req_id + i and chunk_idx + i, and i is within the span."""
        if not isinstance(other, KVP):
            return 0
        try:
            expected = REPLY_OF[Opcode(other.opcode)]
        except (KeyError, ValueError):
            return 0
        offset = self.span_offset
        return int(
            self.opcode == expected
            and offset < other.span
            and (self.req_id - offset) & 0xFFFFFFFF == other.req_id
            and self.tenant == other.tenant
            and self.prefix_hash == other.prefix_hash
            and self.chunk_idx - offset == other.chunk_idx
        )

    def mysummary(self) -> str:
        op = OPCODE_NAMES.get(self.opcode, f"op{self.opcode:#04x}")
        text = (f"KVP {op} req={self.req_id} tenant={self.tenant} ph={self.prefix_hash:#018x} "
                f"chunk={self.chunk_idx}/{self.chunk_count}x{1 << self.chunk_shift}B v={self.version}")
        if self.span > 1:
            text += f" span={self.span}"
        if self.span_offset:
            text += f" offset={self.span_offset}"
        if self.status:
            text += f" {STATUS_NAMES.get(self.status, self.status)}"
        return text

    @property
    def value(self) -> bytes | None:
        """The meaningful value bytes (`value_len` of them), or None without a value chunk."""
        if isinstance(self.payload, KVPValue):
            return self.payload.value_bytes[: self.value_len or 0]
        if isinstance(self.payload, Raw):
            return bytes(self.payload.load)[: self.value_len or 0]
        return None


def check(kvp: KVP | bytes) -> Reason | None:
    """The protocol's validity rules (docs/protocol.md) on a dissected KVP or a UDP payload; None if valid."""
    return wire.check(bytes(kvp))


assert len(KVP()) == KVP_HEADER_LEN and len(KVPValue()) == KVP_VALUE_LEN

# Requests go to port 7420: dissect them as KVP, and make UDP()/KVP() default to dport=7420 when building.
bind_layers(UDP, KVP, dport=KVP_UDP_PORT)
# Replies come from port 7420 (addresses and ports swapped): dissect only, so building keeps dport=7420.
bind_bottom_up(UDP, KVP, sport=KVP_UDP_PORT)
# KVP -> KVPValue is not a binding: a value follows exactly when the F_VALUE *bit* is set, whatever the other
# flags, which an equality binding cannot say; KVP.guess_payload_class decides it.
