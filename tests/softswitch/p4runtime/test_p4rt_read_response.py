"""The hand-written ReadResponse encoders produce exactly protobuf's bytes for the entities Read builds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4rt import bytestrings
from softswitch import target as tg
from softswitch.p4runtime.index import P4InfoIndex
from softswitch.p4runtime.read_response import TableEntryEncoder, counter_entity, read_responses

_MT = p4info_pb2.MatchField
_KINDS = {_MT.EXACT: "exact", _MT.LPM: "lpm", _MT.TERNARY: "ternary", _MT.RANGE: "range", _MT.OPTIONAL: "optional"}
_u32 = st.integers(1, 2**32 - 1)
_u63 = st.integers(0, 2**63 - 1)


# ---- references: the entities built with protobuf's API, as the server built them before --------------

def proto_counter_entity(counter_id: int, index: int, packets: int, bytes_: int) -> bytes:
    ce = p4runtime_pb2.CounterEntry(counter_id=counter_id)
    ce.index.index = index
    ce.data.packet_count, ce.data.byte_count = packets, bytes_
    return p4runtime_pb2.Entity(counter_entry=ce).SerializeToString()


def proto_table_entry(index: P4InfoIndex, t, e: tg.TableEntry, counter, stored) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=t.id, priority=e.priority)
    by_name = {f.name: f for f in t.fields.values()}
    matches = []
    for name, m in e.match.items():
        f = by_name.get(name)
        if f is None:
            continue
        fm = p4runtime_pb2.FieldMatch(field_id=f.id)
        if isinstance(m, tg.Exact):
            fm.exact.value = bytestrings.encode(m.value)
        elif isinstance(m, tg.Lpm):
            if m.prefix_len == 0:
                continue
            fm.lpm.value = bytestrings.encode(m.value)
            fm.lpm.prefix_len = m.prefix_len
        elif isinstance(m, tg.Ternary):
            if m.mask == 0:
                continue
            fm.ternary.value = bytestrings.encode(m.value)
            fm.ternary.mask = bytestrings.encode(m.mask)
        elif isinstance(m, tg.Range):
            if m.low == 0 and m.high == (1 << f.bitwidth) - 1:
                continue
            fm.range.low = bytestrings.encode(m.low)
            fm.range.high = bytestrings.encode(m.high)
        else:
            fm.optional.value = bytestrings.encode(m.value)
        matches.append(fm)
    te.match.extend(sorted(matches, key=lambda fm: fm.field_id))
    action = index.action_by_name(e.action)
    te.action.action.action_id = action.id
    for pi in sorted(action.params.values(), key=lambda x: x.id):
        te.action.action.params.add(param_id=pi.id, value=bytestrings.encode(e.params.get(pi.name, 0)))
    if counter is not None:
        te.counter_data.packet_count, te.counter_data.byte_count = counter
    te.is_const = t.is_const
    if stored is not None:
        te.controller_metadata, te.metadata = stored
    return te


# ---- generated pipelines and entries ------------------------------------------------------------------

@st.composite
def tables_and_entries(draw):
    """A P4Info with one table (every match kind possible) and two actions, and entries of that table."""
    info = p4info_pb2.P4Info()
    t = info.tables.add()
    t.preamble.id, t.preamble.name = draw(_u32), "ingress.t"
    t.is_const_table = draw(st.booleans())
    fields = []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(sorted(_KINDS)))
        width = draw(st.sampled_from([1, 7, 8, 9, 16, 32, 48, 64, 128]))
        t.match_fields.add(id=draw(st.integers(1, 300)) * 4 + i, name=f"f{i}", bitwidth=width, match_type=kind)
        fields.append((f"f{i}", kind, width))
    actions = []
    for a, action_id in enumerate(draw(st.lists(_u32, min_size=2, max_size=2, unique=True))):
        act = info.actions.add()
        act.preamble.id, act.preamble.name = action_id, f"ingress.a{a}"
        params = [(draw(st.integers(1, 2**32 - 1)), f"p{j}", draw(st.sampled_from([1, 9, 32, 48])))
                  for j in range(draw(st.integers(0, 3)))]
        for pid, pname, width in {p[0]: p for p in params}.values():
            act.params.add(id=pid, name=pname, bitwidth=width)
        t.action_refs.add(id=act.preamble.id)
        actions.append(act)
    index = P4InfoIndex(info)
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        match: dict[str, tg.Match] = {}
        for name, kind, width in fields:
            value = st.integers(0, 2**width - 1)
            if kind == _MT.EXACT:
                match[name] = tg.Exact(draw(value))
            elif kind == _MT.LPM:
                match[name] = tg.Lpm(draw(value), draw(st.integers(0, width)))
            elif kind == _MT.TERNARY:
                match[name] = tg.Ternary(draw(value), draw(st.one_of(st.just(0), value)))
            elif kind == _MT.RANGE:
                low, high = sorted((draw(value), draw(st.one_of(st.just(2**width - 1), value))))
                match[name] = tg.Range(draw(st.one_of(st.just(0), st.just(low))), high)
            else:
                match[name] = tg.OptionalMatch(draw(value))
        if draw(st.booleans()):
            match["not_in_p4info"] = tg.Exact(1)
        act = draw(st.sampled_from(actions))
        params = {p.name: draw(st.integers(0, 2**p.bitwidth - 1)) for p in act.params
                  if draw(st.integers(0, 4))}  # sometimes a parameter the target left out (reads as 0)
        entry = tg.TableEntry("ingress.t", match, act.preamble.name, params, draw(st.integers(0, 2**31 - 1)))
        counter = draw(st.one_of(st.none(), st.tuples(_u63, _u63)))
        stored = draw(st.one_of(st.none(), st.tuples(st.integers(0, 2**64 - 1), st.binary(max_size=20))))
        entries.append((entry, counter, stored))
    return index, index.tables[t.preamble.id], entries


# ---- tests --------------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), _u63, _u63, _u63)
def test_counter_entity_bytes_equal_protobufs(counter_id, index, packets, bytes_):
    assert counter_entity(counter_id, index, packets, bytes_) == proto_counter_entity(counter_id, index, packets, bytes_)


def test_counter_entity_of_a_zero_cell_keeps_empty_index_and_data():
    """Index 0 and a zero count are set sub-messages (present, empty), not absent ones."""
    got = p4runtime_pb2.Entity.FromString(counter_entity(5, 0, 0, 0))
    assert got.counter_entry.HasField("index") and got.counter_entry.HasField("data")
    assert counter_entity(5, 0, 0, 0) == proto_counter_entity(5, 0, 0, 0)


@settings(max_examples=150, deadline=None)
@given(tables_and_entries())
def test_table_entry_bytes_equal_protobufs(case):
    index, t, entries = case
    encoder = TableEntryEncoder(index)
    for entry, counter, stored in entries:
        want = proto_table_entry(index, t, entry, counter, stored)
        assert encoder.entity(t, entry, counter, stored) == p4runtime_pb2.Entity(table_entry=want).SerializeToString()


@settings(max_examples=60, deadline=None)
@given(tables_and_entries())
def test_direct_counter_entry_bytes_equal_protobufs(case):
    index, t, entries = case
    encoder = TableEntryEncoder(index)
    for entry, counter, stored in entries:
        want = p4runtime_pb2.DirectCounterEntry()
        want.table_entry.CopyFrom(proto_table_entry(index, t, entry, None, stored))
        want.data.packet_count, want.data.byte_count = counter or (0, 0)
        expected = p4runtime_pb2.Entity(direct_counter_entry=want).SerializeToString()
        assert encoder.direct_counter_entity(t, entry, counter or (0, 0), stored) == expected


def test_read_responses_cut_batches_and_keep_order():
    cells = [counter_entity(7, i, i, 2 * i) for i in range(2500)]
    responses = [p4runtime_pb2.ReadResponse.FromString(data) for data in read_responses(cells)]
    assert [len(r.entities) for r in responses] == [1000, 1000, 500]
    got = [e.counter_entry.index.index for r in responses for e in r.entities]
    assert got == list(range(2500))
    assert responses[2].entities[-1].counter_entry.data.byte_count == 2 * 2499


def test_read_responses_cut_on_size_before_count():
    big = [p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry(digest_id=i + 1)).SerializeToString()
           for i in range(10)]
    chunks = list(read_responses(big, max_entities=1000, max_bytes=3 * len(big[0])))
    assert [len(p4runtime_pb2.ReadResponse.FromString(c).entities) for c in chunks] == [3, 3, 3, 1]


def test_read_responses_of_nothing_is_one_empty_response():
    assert list(read_responses([])) == [b""]
