"""P4Info generation: p4c-compatible ids, spec prefixes, widths, annotations, and a golden text."""

from __future__ import annotations

import pathlib

import pytest
from p4.config.v1 import p4info_pb2
from p4rt_fakes import SMALL_PROGRAM

from softswitch.p4runtime import p4info, schema

GOLDEN = pathlib.Path(__file__).parent / "golden" / "small.p4info.txtpb"


def test_ids_match_p4c_for_the_tutorials_basic_program():
    """p4c (p4lang/tutorials basic.p4) gives these ids; ours must agree so controllers see the same ids."""
    prog = schema.Program(
        tables=(schema.Table(schema.Named("MyIngress.ipv4_lpm"), (schema.MatchField("hdr.ipv4.dstAddr", 32, "lpm"),),
                             (schema.ActionRef("MyIngress.ipv4_forward"), schema.ActionRef("MyIngress.drop"),
                              schema.ActionRef("NoAction"))),),
        actions=(schema.Action(schema.Named("MyIngress.ipv4_forward"),
                               (schema.Param("dstAddr", 48), schema.Param("port", 9))),
                 schema.Action(schema.Named("MyIngress.drop")), schema.Action(schema.Named("NoAction"))))
    info = p4info.build_p4info(prog)
    assert info.tables[0].preamble.id == 37375156
    assert {a.preamble.name: a.preamble.id for a in info.actions} == {
        "MyIngress.ipv4_forward": 28792405, "MyIngress.drop": 25652968, "NoAction": 21257015}


def test_ids_are_stable_across_runs():
    assert p4info.build_p4info(SMALL_PROGRAM) == p4info.build_p4info(SMALL_PROGRAM)


@pytest.mark.parametrize(("kind", "prefix"), [
    ("tables", 0x02), ("actions", 0x01), ("counters", 0x12), ("direct_counters", 0x13),
    ("registers", 0x16), ("digests", 0x17), ("controller_packet_metadata", 0x04), ("meters", 0x14),
])
def test_every_id_carries_its_type_prefix(kind, prefix):
    objs = getattr(p4info.build_p4info(SMALL_PROGRAM), kind)
    assert objs
    assert all(o.preamble.id >> 24 == prefix for o in objs)


def test_fixed_id_without_prefix_gets_the_prefix_added():
    info = p4info.build_p4info(SMALL_PROGRAM)
    drop = next(a for a in info.actions if a.preamble.name == "MyIngress.drop")
    assert drop.preamble.id == 0x01000010


def test_clashing_fixed_ids_are_an_error():
    prog = schema.Program(actions=(schema.Action(schema.Named("a", fixed_id=5)),
                                   schema.Action(schema.Named("b", fixed_id=5))))
    with pytest.raises(p4info.P4InfoError, match="used twice"):
        p4info.build_p4info(prog)


def test_hash_collision_is_resolved_by_probing_in_name_order():
    low = p4info.jenkins_one_at_a_time(b"x") & 0xFFFFFF
    prog = schema.Program(actions=(schema.Action(schema.Named("y", fixed_id=low)), schema.Action(schema.Named("x"))))
    ids = {a.preamble.name: a.preamble.id for a in p4info.build_p4info(prog).actions}
    assert ids["y"] == 0x01000000 | low
    assert ids["x"] == 0x01000000 | (low + 1)


def test_bitwidths_match_types_and_params():
    info = p4info.build_p4info(SMALL_PROGRAM)
    acl = next(t for t in info.tables if t.preamble.name == "MyIngress.acl")
    assert [(m.name, m.bitwidth, m.match_type) for m in acl.match_fields] == [
        ("hdr.ipv4.src_addr", 32, p4info_pb2.MatchField.TERNARY),
        ("hdr.tcp.dst_port", 16, p4info_pb2.MatchField.RANGE),
        ("standard_metadata.ingress_port", 9, p4info_pb2.MatchField.OPTIONAL)]
    fwd = next(a for a in info.actions if a.preamble.name == "MyIngress.forward")
    assert [(p.id, p.name, p.bitwidth) for p in fwd.params] == [(1, "port", 9), (2, "dmac", 48)]
    assert info.registers[0].type_spec.bitstring.bit.bitwidth == 48


def test_table_properties_and_direct_resources():
    info = p4info.build_p4info(SMALL_PROGRAM)
    t = {x.preamble.name: x for x in info.tables}
    lpm, fixed = t["MyIngress.ipv4_lpm"], t["MyIngress.fixed"]
    assert lpm.size == 4 and lpm.preamble.doc.brief == "routes"
    assert list(lpm.direct_resource_ids) == [info.direct_counters[0].preamble.id]
    assert info.direct_counters[0].direct_table_id == lpm.preamble.id
    assert lpm.action_refs[2].scope == p4info_pb2.ActionRef.DEFAULT_ONLY
    assert fixed.is_const_table and fixed.const_default_action_id == 0x01000010


def test_digest_type_info_holds_the_struct():
    info = p4info.build_p4info(SMALL_PROGRAM)
    assert info.digests[0].type_spec.struct.name == "learn_t"
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("src_mac", 48), ("port", 9)]


def test_aliases_are_shortest_unique_suffixes():
    assert p4info.shortest_unique_suffixes(["c1.t", "c2.t", "c1.u"]) == {"c1.t": "c1.t", "c2.t": "c2.t", "c1.u": "u"}


def test_small_program_matches_golden_text():
    text = p4info.to_text(p4info.build_p4info(SMALL_PROGRAM))
    assert text == GOLDEN.read_text()
    assert p4info.from_text(text) == p4info.build_p4info(SMALL_PROGRAM)


@pytest.mark.slow  # runs the real front end (about a second)
def test_p4info_of_a_real_program_describes_its_control_plane():
    from softswitch import compile as compiler

    program = pathlib.Path(__file__).parent / "programs" / "l2l3.p4"
    info = compiler.compile_program(program).p4info
    tables = {t.preamble.name: t for t in info.tables}
    assert set(tables) == {"MyIngress.smac", "MyIngress.dmac", "MyIngress.ipv4_lpm"}
    lpm = tables["MyIngress.ipv4_lpm"]
    assert (lpm.size, lpm.match_fields[0].name, lpm.match_fields[0].bitwidth) == (65536, "hdr.ipv4.dst_addr", 32)
    assert lpm.match_fields[0].match_type == p4info_pb2.MatchField.LPM
    assert list(lpm.direct_resource_ids) == [info.direct_counters[0].preamble.id]
    actions = {a.preamble.name: a for a in info.actions}
    assert [(p.name, p.bitwidth) for p in actions["MyIngress.route"].params] == [("dmac", 48), ("port", 9)]
    assert "NoAction" in actions
    assert (info.counters[0].preamble.name, info.counters[0].size) == ("MyIngress.port_rx", 512)
    assert info.counters[0].spec.unit == p4info_pb2.CounterSpec.BOTH
    assert (info.registers[0].size, info.registers[0].type_spec.bitstring.bit.bitwidth) == (512, 8)
    headers = {h.preamble.name: [(m.name, m.bitwidth) for m in h.metadata] for h in info.controller_packet_metadata}
    assert headers == {"packet_in": [("ingress_port", 9), ("_pad", 7)], "packet_out": [("egress_port", 9), ("_pad", 7)]}
    members = info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("src_mac", 48), ("ingress_port", 9)]
    assert info.digests[0].preamble.id >> 24 == 0x17


@pytest.mark.slow  # runs the real front end
def test_annotations_and_implicit_default_action_reach_p4info():
    from softswitch.frontend import load_source
    from softswitch.p4runtime.from_ir import program_schema

    src = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct hs_t { h_t h; }
struct m_t { }
parser P(packet_in pk, out hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; } }
control V(inout hs_t hdr, inout m_t m) { apply { } }
control I(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) {
    @id(0x77) action set(bit<9> port) { sm.egress_spec = port; }
    @brief("the only table") @name("renamed") table t {
        key = { hdr.h.a: ternary @name("a_key"); }
        actions = { set; }
    }
    apply { t.apply(); } }
control E(inout hs_t hdr, inout m_t m, inout standard_metadata_t sm) { apply { } }
control C(inout hs_t hdr, inout m_t m) { apply { } }
control D(packet_out pk, in hs_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
    info = p4info.build_p4info(program_schema(load_source(src, "ann.p4")))
    [t] = info.tables
    assert (t.preamble.name, t.preamble.doc.brief, t.match_fields[0].name) == ("I.renamed", "the only table", "a_key")
    actions = {a.preamble.name: a.preamble.id for a in info.actions}
    assert actions["I.set"] == 0x01000077
    refs = {r.id: r.scope for r in t.action_refs}
    assert refs == {actions["I.set"]: p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
                    actions["NoAction"]: p4info_pb2.ActionRef.DEFAULT_ONLY}
