"""The pieces of the protobuf wire format that P4Runtime hot paths write and read by hand.

The project pins protobuf 3.20 (p4runtime-shell needs it), whose pure-Python runtime is slow: the switch decodes
Write requests and encodes Read responses itself, the controller pre-serialises Write requests and decodes
counter cells. Those coders build on these helpers; each of them has property tests proving byte-equality with
protobuf. Field numbers always come from the generated descriptors, never typed in.
Wire format: https://protobuf.dev/programming-guides/encoding/ (varints, keys, length-delimited fields).
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

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


# ---- counter cells straight from a serialised ReadResponse ----------------------------------------------
# A full pool's poll reads every slot counter cell each second; the pure-Python protobuf runtime (3.20, pinned
# by p4runtime-shell) spends about 60 ms parsing 1,024 of them, this decoder a few. The wire format is read
# with `p4rt.wire`; field numbers come from the descriptors.

class _NotCounterCells(Fallback):
    """The response holds something this decoder does not read: protobuf parses it instead."""


_RESPONSE_ENTITIES = number(p4runtime_pb2.ReadResponse, "entities")
_ENTITY_COUNTER = number(p4runtime_pb2.Entity, "counter_entry")
_CE_ID = number(p4runtime_pb2.CounterEntry, "counter_id")
_CE_INDEX = number(p4runtime_pb2.CounterEntry, "index")
_CE_DATA = number(p4runtime_pb2.CounterEntry, "data")
_INDEX = number(p4runtime_pb2.Index, "index")
_CD_BYTES = number(p4runtime_pb2.CounterData, "byte_count")
_CD_PACKETS = number(p4runtime_pb2.CounterData, "packet_count")


def _int64(value) -> int:
    """An int64 field's value: the varint's low 64 bits, two's complement (as protobuf decodes it)."""
    if not isinstance(value, int):
        raise _NotCounterCells
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _counter_cell(buf: bytes, start: int, end: int) -> tuple[int, int, int]:
    """(index, packets, bytes) of one CounterEntry; repeated sub-messages merge and the last scalar wins,
    as protobuf's parser does."""
    index = packets = bytes_ = 0
    for field_number, _, value in fields(buf, start, end):
        if field_number == _CE_ID:
            _int64(value)
        elif field_number == _CE_INDEX and isinstance(value, tuple):
            for n2, _, v2 in fields(buf, *value):
                if n2 != _INDEX:
                    raise _NotCounterCells
                index = _int64(v2)
        elif field_number == _CE_DATA and isinstance(value, tuple):
            for n2, _, v2 in fields(buf, *value):
                if n2 == _CD_BYTES:
                    bytes_ = _int64(v2)
                elif n2 == _CD_PACKETS:
                    packets = _int64(v2)
                else:
                    raise _NotCounterCells
        else:
            raise _NotCounterCells
    return index, packets, bytes_


def counter_cells(response: bytes) -> dict[int, tuple[int, int]] | None:
    """{index: (packets, bytes)} of a serialised ReadResponse holding only counter entries; None otherwise."""
    cells: dict[int, tuple[int, int]] = {}
    try:
        for field_number, _, span in fields(response, 0, len(response)):
            if field_number != _RESPONSE_ENTITIES or not isinstance(span, tuple):
                return None
            entity = fields(response, *span)
            if len(entity) != 1 or entity[0][0] != _ENTITY_COUNTER or not isinstance(entity[0][2], tuple):
                return None
            index, packets, bytes_ = _counter_cell(response, *entity[0][2])
            cells[index] = (packets, bytes_)
    except (Fallback, IndexError):
        return None
    return cells
