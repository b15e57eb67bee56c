"""Lexing and parsing corner cases: literals, angle brackets, operator precedence."""

from __future__ import annotations

import pytest

from softswitch.frontend import ir, load_source
from softswitch.frontend.parser import parse_int_literal
from tests.softswitch.frontend.frontend_programs import program


@pytest.mark.parametrize(("text", "value", "width", "signed"), [
    ("42", 42, None, False),
    ("0x2A", 42, None, False),
    ("0b10_1010", 42, None, False),
    ("0o52", 42, None, False),
    ("8w0xFF", 255, 8, False),
    ("16s5", 5, 16, True),
    ("1_000", 1000, None, False),
])
def test_integer_literals(text: str, value: int, width: int | None, signed: bool) -> None:
    assert parse_int_literal(text) == (value, width, signed)


def test_nested_angle_brackets_close_and_right_shift_still_shifts() -> None:
    ingress = "    register<bit<32>>(8) r;"
    apply = "        meta.c = meta.c >> 2;\n        bit<8> p = (bit<8>)(meta.c >> meta.a);"
    prog = load_source(program(ingress=ingress, apply=apply), "t.p4")
    shift, decl = prog.control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(shift, ir.Assign) and isinstance(shift.rhs, ir.BinaryOp) and shift.rhs.op == ">>"
    assert isinstance(decl, ir.VarDecl) and isinstance(decl.init, ir.Cast)


def test_comparison_is_not_mistaken_for_type_arguments() -> None:
    apply = "        if (meta.a < 3 && meta.b > 4) { meta.c = 1; }"
    (stmt,) = load_source(program(apply=apply), "t.p4").control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(stmt, ir.If) and isinstance(stmt.cond, ir.BinaryOp) and stmt.cond.op == "&&"
    assert [stmt.cond.left.op, stmt.cond.right.op] == ["<", ">"]  # type: ignore[union-attr]


def test_bitwise_operators_bind_tighter_than_comparisons_as_in_p4() -> None:
    apply = "        if (meta.a & 0x0F == 4) { }"
    (stmt,) = load_source(program(apply=apply), "t.p4").control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(stmt, ir.If) and isinstance(stmt.cond, ir.BinaryOp) and stmt.cond.op == "=="
    assert isinstance(stmt.cond.left, ir.BinaryOp) and stmt.cond.left.op == "&"


def test_comments_anywhere_are_ignored() -> None:
    apply = "        /* a\n           block */ meta.a = 1; // trailing\n"
    (stmt,) = load_source(program(apply=apply), "t.p4").control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(stmt, ir.Assign) and stmt.loc.col == 21


def test_annotation_bodies_are_parsed_into_values_and_kept_as_text() -> None:
    types = ('@id(0x01000001) @description("a, b") @size(1 << 10) @pair(k = "v", n = -3) @hidden\n'
             'header anno_h { bit<8> f; }')
    prog = load_source(program(types=types), "t.p4")
    anno = prog.type("anno_h")
    assert anno is not None
    got = {a.name: (a.values, a.body) for a in anno.annotations}  # type: ignore[union-attr]
    assert got["id"] == ((0x01000001,), "0x01000001")
    assert got["description"] == (("a, b",), '"a, b"')
    assert got["size"] == (("1 << 10",), "1 << 10")
    assert got["pair"][0] == ('k = "v"', "n = -3")
    assert got["hidden"] == ((), "")
