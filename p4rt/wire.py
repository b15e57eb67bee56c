"""The pieces of the protobuf wire format that P4Runtime hot paths write and read by hand.

The project pins protobuf 3.20 (p4runtime-shell needs it), whose pure-Python runtime is slow: the switch decodes
Write requests and encodes Read responses itself, the controller pre-serialises Write requests and decodes
counter cells. Those coders build on these helpers; each of them has property tests proving byte-equality with
protobuf. Field numbers always come from the generated descriptors, never typed in.
Wire format: https://protobuf.dev/programming-guides/encoding/ (varints, keys, length-delimited fields).
"""

from __future__ import annotations

VARINT, LEN = 0, 2
"""The two wire types P4Runtime messages use (besides fixed64/32, which nothing here reads)."""

_U64 = (1 << 64) - 1
_SMALL = [bytes([n]) for n in range(0x80)]


class Fallback(Exception):
    """The bytes hold something these hand-written coders do not read: the caller hands them to protobuf."""


def number(message, name: str) -> int:
    """Field number of `name` in a generated message class, as the .proto says."""
    return message.DESCRIPTOR.fields_by_name[name].number


def varint(n: int) -> bytes:
    """Base-128 varint; negative ints (int32/int64 fields) go out as their 64-bit two's complement."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    n &= _U64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(message, name: str, wire_type: int) -> bytes:
    """The encoded key of field `name` of `message` with `wire_type` (VARINT or LEN)."""
    return varint(number(message, name) << 3 | wire_type)


def length_delimited(field_key: bytes, body: bytes) -> bytes:
    """A length-delimited field: a sub-message or a byte string after its key."""
    return field_key + varint(len(body)) + body


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`; Fallback past 10 bytes, IndexError past the end."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Fallback


def fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int | tuple[int, int]]]:
    """(field number, wire type, value) of the fields in buf[pos:end]: value is an int for varints, the
    (start, end) span for length-delimited fields.

    Only one-byte keys are read (field numbers below 16: every field the coders here read); a longer key is some
    other field, or a padded key, which protobuf keeps as an unknown field: Fallback either way. Other wire types,
    a length past `end` and a field running over `end` are Fallback too. Single-byte varints (nearly every
    length and id) are read inline: this is the hot loop.
    """
    out: list[tuple[int, int, int | tuple[int, int]]] = []
    append = out.append
    while pos < end:
        key = buf[pos]
        if key >= 0x80:
            raise Fallback
        pos += 1
        wt = key & 7
        if wt == VARINT:
            value = buf[pos]
            if value < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos)
            append((key >> 3, wt, value))
        elif wt == LEN:
            n = buf[pos]
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_varint(buf, pos)
            if pos + n > end:
                raise Fallback
            append((key >> 3, wt, (pos, pos + n)))
            pos += n
        else:
            raise Fallback
    if pos != end:
        raise Fallback
    return out
