"""Parser states, select keysets, header stacks and lookahead in the IR."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, ir, load_source
from tests.softswitch.frontend.frontend_programs import program

STATES = """
    state parse_vlan {
        packet.extract(hdr.vlans.next);
        bit<4> peek = packet.lookahead<bit<4>>();
        transition select(hdr.vlans.last.tpid, peek) {
            (0x8100, _): parse_vlan;
            (0x0800 &&& 0xFF00, 4): accept;
            (0x9000 .. 0x90FF, 0 .. 3): reject;
            (ports, _): accept;
            default: accept;
        }
    }
"""
START = """
        transition select(hdr.eth.ether_type) {
            0x8100: parse_vlan;
            default: accept;
        }"""


@pytest.fixture(scope="module")
def parser() -> ir.Parser:
    prog = load_source(program(types="header vlan_h { bit<16> tpid; bit<16> tci; }",
                               headers="    vlan_h[2] vlans;",
                               parser_locals="    value_set<bit<16>>(4) ports;",
                               start=START, states=STATES,
                               deparser="        packet.emit(hdr.vlans);"), "t.p4")
    p = prog.parser("MyParser")
    assert p is not None
    return p


def test_states_and_transitions(parser: ir.Parser) -> None:
    assert [s.name for s in parser.states] == ["start", "parse_vlan"]
    start = parser.state("start")
    assert start is not None and isinstance(start.transition, ir.Select)
    assert [c.next_state for c in start.transition.cases] == ["parse_vlan", "accept"]
    exact = start.transition.cases[0].keysets[0]
    assert isinstance(exact, ir.KeysetExact) and exact.value == ir.Constant(0x8100, ir.BitType(16), exact.value.loc)


def test_select_keysets_cover_masks_ranges_tuples_value_sets_and_default(parser: ir.Parser) -> None:
    vlan = parser.state("parse_vlan")
    assert vlan is not None and isinstance(vlan.transition, ir.Select)
    keys = vlan.transition.keys
    assert [k.type for k in keys] == [ir.BitType(16), ir.BitType(4)]
    assert isinstance(keys[0], ir.Member) and isinstance(keys[0].expr, ir.StackLast)
    c = vlan.transition.cases
    assert isinstance(c[0].keysets[1], ir.KeysetDefault)
    mask = c[1].keysets[0]
    assert isinstance(mask, ir.KeysetMask) and (mask.value.value, mask.mask.value) == (0x0800, 0xFF00)  # type: ignore[union-attr]
    assert c[1].keysets[1].value == ir.Constant(4, ir.BitType(4), c[1].keysets[1].value.loc)  # type: ignore[union-attr]
    rng = c[2].keysets[0]
    assert isinstance(rng, ir.KeysetRange) and (rng.low.value, rng.high.value) == (0x9000, 0x90FF)  # type: ignore[union-attr]
    assert c[2].next_state == "reject"
    assert c[3].keysets[0] == ir.KeysetValueSet("MyParser.ports", c[3].keysets[0].loc)
    assert all(isinstance(k, ir.KeysetDefault) for k in c[4].keysets) and len(c[4].keysets) == 2
    assert parser.instances[0].type == ir.ExternType("value_set", (ir.BitType(16),))


def test_extract_into_stack_next_and_lookahead_with_type_argument(parser: ir.Parser) -> None:
    vlan = parser.state("parse_vlan")
    assert vlan is not None
    extract, peek = vlan.body.stmts
    assert isinstance(extract, ir.CallStmt) and isinstance(extract.call, ir.ExternMethodCall)
    assert extract.call.extern == "packet_in" and extract.call.method == "extract"
    assert isinstance(extract.call.args[0], ir.StackNext) and extract.call.directions == (ir.Direction.OUT,)
    assert extract.call.type_args == (extract.call.args[0].type,)
    assert isinstance(peek, ir.VarDecl) and isinstance(peek.init, ir.ExternMethodCall)
    assert peek.init.method == "lookahead" and peek.init.type == ir.BitType(4)
    assert peek.init.type_args == (ir.BitType(4),)


def test_state_without_transition_goes_to_reject() -> None:
    prog = load_source(program(start="        transition parse_x;", states="    state parse_x { }"), "t.p4")
    st = prog.parser("MyParser").state("parse_x")  # type: ignore[union-attr]
    assert st is not None and st.transition == ir.Goto("reject", st.transition.loc)


def test_verify_in_parser_uses_error_constants() -> None:
    prog = load_source(program(top="", types="error { BadType }",
                               start="        verify(hdr.eth.ether_type != 0, error.BadType);\n"
                                     "        transition accept;"), "t.p4")
    start = prog.parser("MyParser").state("start")  # type: ignore[union-attr]
    call = start.body.stmts[1]  # type: ignore[union-attr]
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.ExternFunctionCall)
    assert call.call.name == "verify" and call.call.args[1] == ir.ErrorConst("BadType", loc=call.call.args[1].loc)


def test_header_stack_index_and_push_front_in_a_control() -> None:
    prog = load_source(program(types="header vlan_h { bit<16> tpid; bit<16> tci; }",
                               headers="    vlan_h[2] vlans;",
                               apply="        hdr.vlans.push_front(1);\n        hdr.vlans[0].tpid = 0x8100;\n"
                                     "        hdr.vlans[meta.a].setValid();"), "t.p4")
    push, assign, dyn = prog.control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(push, ir.CallStmt) and push.call == ir.StackMethodCall(
        push.call.stack, "push_front", 1, loc=push.call.loc)  # type: ignore[union-attr]
    assert isinstance(assign, ir.Assign) and isinstance(assign.lhs, ir.Member)
    elem = assign.lhs.expr
    assert isinstance(elem, ir.StackElement) and elem.index == ir.Constant(0, ir.BitType(32), elem.index.loc)
    assert isinstance(dyn, ir.CallStmt) and isinstance(dyn.call, ir.HeaderMethodCall)
    assert isinstance(dyn.call.header, ir.StackElement) and dyn.call.header.index.type == ir.BitType(8)


def test_stack_next_outside_a_parser_is_rejected() -> None:
    with pytest.raises(P4Error, match="only allowed in a parser"):
        load_source(program(types="header vlan_h { bit<16> tpid; }", headers="    vlan_h[2] vlans;",
                            apply="        hdr.vlans.next.tpid = 1;"), "t.p4")


def test_parser_without_start_state_is_rejected() -> None:
    text = program().replace("state start", "state begin")
    with pytest.raises(P4Error, match="has no 'start' state"):
        load_source(text, "t.p4")


def test_explicit_transition_to_reject_loads_with_a_warning() -> None:
    prog = load_source(program(start="        transition reject;"), "t.p4")
    (warning,) = prog.warnings
    assert (warning.loc.line, warning.loc.col) == (24, 20) and "transition to reject" in warning.message
    assert str(warning).startswith("t.p4:24:20: warning: ")
