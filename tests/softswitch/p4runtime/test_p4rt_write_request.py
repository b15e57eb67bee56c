"""The fast WriteRequest decoder reads exactly what protobuf reads, and hands anything unusual to protobuf."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2

from softswitch.p4runtime.write_request import (
    TableWrite,
    decode_write_request,
    from_proto,
    table_write_from_proto,
)

_bytes = st.binary(min_size=0, max_size=6)


@st.composite
def table_entries(draw):
    te = p4runtime_pb2.TableEntry(table_id=draw(st.integers(0, 2**32 - 1)),
                                  priority=draw(st.integers(-(2**31), 2**31 - 1)),
                                  is_default_action=draw(st.booleans()))
    for fid in range(draw(st.integers(0, 3))):
        fm = te.match.add(field_id=fid + draw(st.integers(0, 300)))
        kind = draw(st.sampled_from(["exact", "lpm", "ternary", "range", "optional"]))
        if kind == "exact":
            fm.exact.value = draw(_bytes)
        elif kind == "lpm":
            fm.lpm.value, fm.lpm.prefix_len = draw(_bytes), draw(st.integers(-5, 300))
        elif kind == "ternary":
            fm.ternary.value, fm.ternary.mask = draw(_bytes), draw(_bytes)
        elif kind == "range":
            fm.range.low, fm.range.high = draw(_bytes), draw(_bytes)
        else:
            fm.optional.value = draw(_bytes)
    form = draw(st.sampled_from(["action", "member", "none"]))
    if form == "action":
        te.action.action.action_id = draw(st.integers(0, 2**32 - 1))
        for _ in range(draw(st.integers(0, 3))):
            te.action.action.params.add(param_id=draw(st.integers(0, 2**32 - 1)), value=draw(_bytes))
    elif form == "member":
        te.action.action_profile_member_id = draw(st.integers(1, 2**32 - 1))
    return te


@settings(max_examples=100, deadline=None)
@given(st.lists(table_entries(), max_size=4), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_fast_decode_equals_protobuf_decode(entries, high, low):
    req = p4runtime_pb2.WriteRequest(device_id=3, election_id=p4runtime_pb2.Uint128(high=high, low=low))
    for te in entries:
        req.updates.add(type=p4runtime_pb2.Update.MODIFY).entity.table_entry.CopyFrom(te)
    fast = decode_write_request(req.SerializeToString())
    slow = from_proto(req)
    assert (fast.device_id, fast.election_id, fast.role, fast.atomicity) == \
        (slow.device_id, slow.election_id, slow.role, slow.atomicity)
    assert len(fast.updates) == len(entries)
    for (utype, got), te in zip(fast.updates, entries, strict=True):
        assert utype == p4runtime_pb2.Update.MODIFY
        want = table_write_from_proto(te)
        if isinstance(got, TableWrite):
            assert got == want
        else:  # handed to protobuf: the same entity
            assert got.table_entry == te


def test_entries_with_other_fields_fall_back_to_protobuf():
    req = p4runtime_pb2.WriteRequest()
    te = req.updates.add(type=1).entity.table_entry
    te.table_id = 5
    te.counter_data.packet_count = 9
    req.updates.add(type=1).entity.counter_entry.counter_id = 7
    fast = decode_write_request(req.SerializeToString())
    assert isinstance(fast.updates[0][1], p4runtime_pb2.Entity)
    assert fast.updates[0][1].table_entry.counter_data.packet_count == 9
    assert fast.updates[1][1].counter_entry.counter_id == 7


def test_padded_table_id_key_is_read_as_protobuf_reads_it():
    entry = p4runtime_pb2.TableEntry(table_id=5).SerializeToString()
    assert entry[:1] == b"\x08"
    padded = b"\x88\x00" + entry[1:]  # the same key as a two-byte varint: protobuf keeps it as an unknown field
    entity = b"\x12" + bytes([len(padded)]) + padded  # Entity.table_entry (field 2)
    update = b"\x08\x01\x12" + bytes([len(entity)]) + entity  # Update{type: INSERT, entity}
    data = b"\x22" + bytes([len(update)]) + update  # WriteRequest.updates (field 4)
    want = p4runtime_pb2.WriteRequest.FromString(data).updates[0].entity.table_entry
    assert want.table_id == 0
    (_, got), = decode_write_request(data).updates
    got_id = got.table_id if isinstance(got, TableWrite) else got.table_entry.table_id
    assert got_id == want.table_id
