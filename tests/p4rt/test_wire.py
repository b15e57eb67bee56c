"""The shared protobuf wire-format pieces write and read exactly what protobuf does (P4Runtime messages)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2

from p4rt import wire


@given(st.integers(-(2**63), 2**64 - 1))
def test_varint_matches_protobuf_int64_and_uint64(n):
    msg = p4runtime_pb2.CounterData(byte_count=n) if n < 2**63 else p4runtime_pb2.Uint128(high=n)
    assert msg.SerializeToString() == (b"\x08" + wire.varint(n) if n else b"")


@given(st.integers(0, 2**64 - 1), st.binary(max_size=4))
def test_read_varint_reads_back_what_varint_wrote(n, tail):
    data = b"\xff" + wire.varint(n) + tail
    assert wire.read_varint(data, 1) == (n, len(data) - len(tail))


def test_read_varint_of_more_than_ten_bytes_falls_back():
    with pytest.raises(wire.Fallback):
        wire.read_varint(b"\x80" * 10 + b"\x01", 0)


def test_read_varint_past_the_end_is_an_index_error():
    with pytest.raises(IndexError):
        wire.read_varint(b"\x80\x80", 0)


@pytest.mark.parametrize(("message", "name"), [
    (p4runtime_pb2.WriteRequest, "updates"),
    (p4runtime_pb2.Entity, "table_entry"),
    (p4runtime_pb2.TableEntry, "is_default_action"),
    (p4runtime_pb2.CounterData, "packet_count"),
])
def test_number_is_the_descriptors_field_number(message, name):
    assert wire.number(message, name) == message.DESCRIPTOR.fields_by_name[name].number


def test_keys_and_length_delimited_fields_are_protobufs_bytes():
    te = p4runtime_pb2.TableEntry(table_id=300, metadata=b"x" * 200)
    assert te.SerializeToString() == (wire.key(p4runtime_pb2.TableEntry, "table_id", wire.VARINT) + wire.varint(300)
                                      + wire.length_delimited(
                                          wire.key(p4runtime_pb2.TableEntry, "metadata", wire.LEN), b"x" * 200))


def test_fields_list_varints_and_spans_of_a_protobuf_message():
    data = p4runtime_pb2.TableEntry(table_id=7, priority=300, metadata=b"abc").SerializeToString()
    got = wire.fields(data, 0, len(data))
    number = {n: wire.number(p4runtime_pb2.TableEntry, n) for n in ("table_id", "priority", "metadata")}
    assert [(num, wt) for num, wt, _ in got] == [(number["table_id"], wire.VARINT),
                                                 (number["priority"], wire.VARINT),
                                                 (number["metadata"], wire.LEN)]
    assert got[0][2] == 7 and got[1][2] == 300
    start, end = got[2][2]
    assert data[start:end] == b"abc"


def test_fields_read_only_the_span_they_are_given():
    data = b"\x00\x00" + bytes([1 << 3, 5, 2 << 3 | 2, 1, 0x41]) + b"\xff"
    assert wire.fields(data, 2, 7) == [(1, wire.VARINT, 5), (2, wire.LEN, (6, 7))]


@pytest.mark.parametrize("data", [
    pytest.param(bytes([0x88, 0x00, 5]), id="padded key: protobuf keeps it as an unknown field"),
    pytest.param(bytes([0x80, 0x01, 5]), id="field 16: a two-byte key"),
    pytest.param(bytes([1 << 3 | 1]) + bytes(8), id="fixed64 wire type"),
    pytest.param(bytes([1 << 3 | 5]) + bytes(4), id="fixed32 wire type"),
    pytest.param(bytes([2 << 3 | 2, 5, 0x41]), id="length past the end of the span"),
])
def test_fields_fall_back_on_what_they_do_not_read(data):
    with pytest.raises(wire.Fallback):
        wire.fields(data, 0, len(data))


def test_fields_with_a_varint_running_past_the_span_fall_back():
    data = bytes([1 << 3, 0x80, 0x01])
    with pytest.raises(wire.Fallback):
        wire.fields(data, 0, 2)
