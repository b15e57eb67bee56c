"""Every number of the KVP wire protocol (docs/protocol.md), in one place, importable without Scapy.

The enums' values are the wire codes; their names are the names used in P4 (`kvp_opcode_t`, `kvp_status_t`,
`kvp_tier_t`) and in the protocol document.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

KVP_UDP_PORT = 7420
"""UDP destination port of requests (source port of replies): outside Linux's ephemeral range 32768-60999."""
KVP_MAGIC = 0x4B56
"""First two bytes of every KVP header, "KV"; anything else is plain UDP."""
KVP_VERSION = 2
"""Value of the `ver` field (v2: 32-bit chunk index and count, a chunk size per block; v1 messages are refused)."""
KVP_HEADER_LEN = 44
"""Bytes of `kvp_h`."""
KVP_VALUE_WORDS = 16
"""64-bit words in one switch slot's value (`kvp_value_h` has one field of this many words)."""
KVP_VALUE_LEN = KVP_VALUE_WORDS * 8
"""Bytes of one switch slot's value (128): the only chunk size the switch parses as `kvp_value_h` and stores."""
KVP_SLOT_SHIFT = 7
"""`chunk_shift` of a slot-sized chunk: 1 << 7 = KVP_VALUE_LEN."""
KVP_MIN_CHUNK_SHIFT = 7
"""Smallest `chunk_shift`: 128-byte chunks."""
KVP_MAX_CHUNK_SHIFT = 13
"""Largest `chunk_shift`: 8 KiB chunks (a message of 8,236 bytes: links need an MTU of at least 8,264)."""
KVP_MAX_CHUNK_LEN = 1 << KVP_MAX_CHUNK_SHIFT
"""Largest chunk payload, in bytes."""
KVP_MAX_MESSAGE = KVP_HEADER_LEN + KVP_MAX_CHUNK_LEN
"""Largest KVP message (UDP payload), in bytes."""
CHUNK_SIZES = tuple(1 << s for s in range(KVP_MIN_CHUNK_SHIFT, KVP_MAX_CHUNK_SHIFT + 1))
"""Every chunk size the protocol allows: 128 B, 256 B, ..., 8 KiB."""
PREFIX_BLOCK_TOKENS = 512
"""Tokens per prefix block, as in the Mooncake traces."""
KVP_MAX_GET_SPAN = 16
"""Most chunks one GET may ask for (its `aux`, the span: chunks `chunk_idx` .. `chunk_idx + span - 1`, as far as the
block goes; 0 and 1 both ask for one). A GET asking for more is answered ERR_MALFORMED by the storage node."""


class Opcode(IntEnum):
    """`enum bit<8> kvp_opcode_t`."""

    GET = 0x01
    GET_REPLY = 0x02
    PUT = 0x03
    PUT_ACK = 0x04
    INSERT = 0x05
    INSERT_ACK = 0x06
    LOOKUP_META = 0x07
    LOOKUP_META_REPLY = 0x08
    SLOT_WRITE = 0x10
    SLOT_WRITE_ACK = 0x11
    SLOT_READ = 0x12
    SLOT_READ_REPLY = 0x13
    TIER_MOVE = 0x20
    TIER_MOVE_ACK = 0x21
    STAT = 0x22
    STAT_REPLY = 0x23
    INVALIDATE = 0x30
    """Switch to switch only (fabric coherence, docs/dataplane.md): a storage node's acknowledged PUT, relayed
    over FABRIC ports so every switch drops older copies; dropped when it comes from a host port."""


REPLY_OF: dict[Opcode, Opcode] = {
    Opcode.GET: Opcode.GET_REPLY,
    Opcode.PUT: Opcode.PUT_ACK,
    Opcode.INSERT: Opcode.INSERT_ACK,
    Opcode.LOOKUP_META: Opcode.LOOKUP_META_REPLY,
    Opcode.SLOT_WRITE: Opcode.SLOT_WRITE_ACK,
    Opcode.SLOT_READ: Opcode.SLOT_READ_REPLY,
    Opcode.TIER_MOVE: Opcode.TIER_MOVE_ACK,
    Opcode.STAT: Opcode.STAT_REPLY,
}
"""Request opcode -> the opcode of its reply. Every request is odd or even by table, not by arithmetic."""
REPLIES = frozenset(REPLY_OF.values())
"""Opcodes that are replies; a receiver never answers them (no reply ping-pong between two nodes)."""
CONTROL_OPCODES = frozenset({Opcode.TIER_MOVE, Opcode.SLOT_WRITE, Opcode.SLOT_READ})
"""Requests only the controller sends: the switch drops them from host ports, the storage node honours them only
from the controller's addresses (`--control-from`)."""


class Status(IntEnum):
    """`enum bit<8> kvp_status_t`."""

    OK = 0x00
    HIT_SWITCH = 0x01
    HIT_SERVER = 0x02
    MISS = 0x03
    STAGED = 0x04
    """PUT_ACK: the chunk is staged (progress: `aux` = chunks of this write staged so far); the block is not
    committed yet. OK still means committed."""
    ERR_MALFORMED = 0x10
    ERR_FULL = 0x11
    ERR_CHECKSUM = 0x12
    ERR_STALE = 0x13
    ERR_UNKNOWN_OP = 0x14
    ERR_DENIED = 0x15
    ERR_CONFLICT = 0x16
    """A PUT of a version the storage node already holds, with different bytes (a retry must be identical)."""
    BUSY = 0x17
    """The storage node sheds this request: its queue is full. Nothing was done; the client backs off (its
    congestion window is cut as for a loss) and asks again. Never a failure by itself."""


class Flag(IntFlag):
    """Bits of the `flags` field."""

    VALUE = 0x01
    """A `kvp_value_h` follows the header (F_VALUE)."""
    BYPASS = 0x02
    """The switch must not answer or fill from this message (F_BYPASS)."""
    PIN = 0x04
    """INSERT only: the client asks for a pin (F_PIN)."""
    CONGESTED = 0x08
    """Set by a switch on a reply whose egress queue towards the receiver was over the marking threshold when
    the reply was queued (F_CONGESTED, as ECN's CE codepoint; the client reacts as DCTCP does). Ignored on
    requests; a host that sets it gains nothing but a smaller window at its peer."""
    STREAM = 0x10
    """GET only: the reader accepts PUSHED chunks of this block (F_STREAM). A switch may then add the reader to
    the block's stream: the copies of later replies of the block to the stream's first reader reach this reader
    too (docs/dataplane.md, "Stream join"). Ignored on other opcodes."""
    PUSHED = 0x20
    """GET_REPLY only: a copy a switch made for a stream subscriber that did not ask for this chunk (F_PUSHED);
    its `req_id` is 0 and answers no request. Only a switch sets it: one coming from a host or storage port is
    cleared by the first switch. A reader takes it only for a block it is reading, checked as any chunk."""


F_VALUE = Flag.VALUE
F_BYPASS = Flag.BYPASS
F_PIN = Flag.PIN
F_CONGESTED = Flag.CONGESTED
F_STREAM = Flag.STREAM
F_PUSHED = Flag.PUSHED


class Tier(IntEnum):
    """`enum bit<8> kvp_tier_t`: where a chunk lives. Tier bitmaps set bit `t` for tier `t`."""

    ABSENT = 0
    SWITCH = 1
    STORAGE_DRAM = 2
    STORAGE_DISK = 3
    NODE_HBM = 4
    NODE_DRAM = 5


def chunk_shift_of(size: int) -> int:
    """`chunk_shift` of a chunk size in bytes; ValueError for a size the protocol does not allow."""
    if size not in CHUNK_SIZES:
        raise ValueError(f"chunk size must be one of {', '.join(map(str, CHUNK_SIZES))} bytes, got {size}")
    return size.bit_length() - 1


def tier_bitmap(tiers: set[Tier] | frozenset[Tier]) -> int:
    """The `aux` tier bitmap of INSERT_ACK / LOOKUP_META_REPLY."""
    return sum(1 << int(t) for t in tiers if t != Tier.ABSENT)


def tiers_of(bitmap: int) -> frozenset[Tier]:
    """Inverse of `tier_bitmap` (unknown bits are ignored)."""
    return frozenset(t for t in Tier if t != Tier.ABSENT and bitmap >> int(t) & 1)
