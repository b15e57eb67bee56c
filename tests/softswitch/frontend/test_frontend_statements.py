"""Statements and less common expressions: switch on values, named arguments, struct expressions, unions."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, ir, load_source
from tests.softswitch.frontend.frontend_programs import program


def _apply(apply: str, **parts: str) -> tuple[ir.Stmt, ...]:
    prog = load_source(program(apply=apply, **parts), "t.p4")
    return prog.control("MyIngress").apply.stmts  # type: ignore[union-attr]


def test_switch_on_an_enum_value_has_enum_member_labels() -> None:
    (sw,) = _apply("        switch (meta.op) {\n            op_t.GET: { meta.a = 1; }\n"
                   "            op_t.PUT: { meta.a = 2; }\n        }",
                   types="enum bit<8> op_t { GET = 1, PUT = 2 }", meta="    op_t op;")
    assert isinstance(sw, ir.Switch)
    assert [c.labels[0].member for c in sw.cases] == ["GET", "PUT"]  # type: ignore[union-attr]


def test_switch_on_bits_with_default_last() -> None:
    (sw,) = _apply("        switch (meta.a) {\n            1: { }\n            2:\n            3: { meta.b = 1; }\n"
                   "            default: { }\n        }")
    assert isinstance(sw, ir.Switch)
    labels = [tuple(None if x is None else x.value for x in c.labels) for c in sw.cases]  # type: ignore[union-attr]
    assert labels == [(1,), (2, 3), (None,)]


def test_default_must_be_the_last_switch_label() -> None:
    with pytest.raises(P4Error, match="'default' must be the last switch label"):
        _apply("        switch (meta.a) {\n            default: { }\n            1: { }\n        }")


def test_named_arguments_are_put_in_parameter_order() -> None:
    ingress = "    action set(in bit<8> x, in bit<16> y) { meta.a = x; meta.b = y; }"
    (call,) = _apply("        set(y = 7, x = meta.a);", ingress=ingress)
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.ActionCall)
    x, y = call.call.args
    assert isinstance(x, ir.Member) and y == ir.Constant(7, ir.BitType(16), y.loc)


def test_struct_expression_and_list_assignment_to_a_header() -> None:
    stmts = _apply("        meta.pair = { y = 2, x = 1 };\n        hdr.eth = { 1, 2, 0x800 };",
                   types="struct pair_t { bit<8> x; bit<8> y; }", meta="    pair_t pair;")
    pair, eth = stmts
    assert isinstance(pair, ir.Assign) and isinstance(pair.rhs, ir.StructInit)
    assert [v.value for v in pair.rhs.values] == [1, 2]  # type: ignore[union-attr]
    assert isinstance(eth, ir.Assign) and isinstance(eth.rhs, ir.StructInit)
    assert eth.rhs.type.name == "ethernet_h" and eth.rhs.values[2].type == ir.BitType(16)


def test_header_union_members_and_validity() -> None:
    types = ("header v4_h { bit<32> addr; }\nheader v6_h { bit<128> addr; }\n"
             "header_union ip_u { v4_h v4; v6_h v6; }")
    (stmt,) = _apply("        if (hdr.ip.isValid()) { hdr.ip.v4.setInvalid(); }", types=types, headers="    ip_u ip;")
    assert isinstance(stmt, ir.If) and isinstance(stmt.cond, ir.HeaderMethodCall)
    assert isinstance(stmt.cond.header.type, ir.HeaderUnionType)
    inner = stmt.then.stmts[0]
    assert isinstance(inner, ir.CallStmt) and isinstance(inner.call, ir.HeaderMethodCall)
    assert inner.call.header.type.name == "v4_h"  # type: ignore[union-attr]


def test_function_out_parameter_needs_an_lvalue() -> None:
    top_fn = "void split(in bit<16> v, out bit<8> hi) { hi = v[15:8]; }"
    (call,) = _apply("        split(meta.b, meta.a);", types=top_fn)
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.FunctionCall)
    assert call.call.directions == (ir.Direction.IN, ir.Direction.OUT)
    with pytest.raises(P4Error, match="not assignable"):
        _apply("        split(meta.b, 3);", types=top_fn)


def test_if_in_parser_state_and_exit_in_action() -> None:
    prog = load_source(program(start="        if (hdr.eth.ether_type == 0) { hdr.eth.setInvalid(); }\n"
                                     "        transition accept;",
                               ingress="    action stop() { exit; }", apply="        stop();"), "t.p4")
    start = prog.parser("MyParser").state("start")  # type: ignore[union-attr]
    assert isinstance(start.body.stmts[1], ir.If)  # type: ignore[union-attr]
    assert isinstance(prog.control("MyIngress").action("stop").body.stmts[0], ir.Exit)  # type: ignore[union-attr]


@pytest.mark.parametrize(("apply", "message"), [
    ("        exit_now();", "undeclared name 'exit_now'"),
    ("        meta.a = meta.a << -1;", "negative shift amount"),
    ("        meta.a = meta.a << meta.b;", "shift amount limited to 8 bits on this target"),
    ("        meta.b = meta.b >> 16w3;", "shift amount limited to 8 bits on this target"),
    ("        meta.a = meta.a ++ 1;", "'++' needs operands with a width"),
    ("        if ((1 << meta.a) == meta.c) { }", "shifting an int literal by a non-constant needs a width"),
    ("        meta.c = meta.a ? 1 : 2;", "type mismatch: expected bool, got bit<8>"),
    ("        meta.a = (bit<8>)(int<16>)meta.b;", "cannot cast int<16> to bit<8>"),
    ("        bool f = meta.a;", "type mismatch: expected bool, got bit<8>"),
    ("        hdr.eth.setValid(1);", "setValid() takes no arguments"),
    ("        standard_metadata.egress_spec = hdr.eth;", "type mismatch"),
])
def test_type_errors_in_statements(apply: str, message: str) -> None:
    with pytest.raises(P4Error, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        _apply(apply)


def test_shift_amounts_p4c_takes_for_bmv2() -> None:
    """An 8-bit amount, or an untyped literal of any size (p4c only warns), passes; wider typed ones do not
    (above: p4c says "shift amount limited to 8 bits on this target")."""
    stmts = _apply("        meta.b = meta.b << meta.a;\n        meta.b = meta.b >> 8w3;\n        meta.b = meta.b << 300;")
    assert len(stmts) == 3
