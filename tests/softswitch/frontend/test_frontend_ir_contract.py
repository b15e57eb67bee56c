"""The IR contract B (executor) and C (P4Info) code against: every node located, every expression typed."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from pathlib import Path

import pytest

from softswitch.frontend import ir

KVSWITCH = Path(__file__).resolve().parents[3] / "p4src" / "kvswitch.p4"
EXPR_CLASSES = typing.get_args(ir.Expr)
STMT_CLASSES = typing.get_args(ir.Stmt)


@pytest.mark.parametrize("cls", EXPR_CLASSES + STMT_CLASSES, ids=lambda c: c.__name__)
def test_every_expression_and_statement_node_is_frozen_and_located(cls: type) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and hasattr(cls, "__slots__")
    names = {f.name for f in dataclasses.fields(cls)}
    assert "loc" in names
    if cls in EXPR_CLASSES:
        assert "type" in names


def _walk(node: object, seen: list[object]) -> None:
    if isinstance(node, tuple):
        for x in node:
            _walk(x, seen)
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return
    seen.append(node)
    for f in dataclasses.fields(node):
        if f.name in ("type", "loc", "type_args", "annotations"):
            continue
        _walk(getattr(node, f.name), seen)


def test_every_expression_of_the_real_program_is_typed_and_located_in_its_files(
        load_cached: Callable[[Path], ir.Program]) -> None:
    prog = load_cached(KVSWITCH)
    nodes: list[object] = []
    for block in (*prog.parsers, *prog.controls, *prog.functions):
        _walk(block, nodes)
    exprs = [n for n in nodes if isinstance(n, EXPR_CLASSES)]
    assert len(exprs) > 100
    for e in exprs:
        assert e.type is not None and not isinstance(e.type, str)  # type: ignore[union-attr]
        assert e.loc.file in prog.files and e.loc.line > 0, e  # type: ignore[union-attr]
    # No int literal is left without a width outside the places P4 keeps `int`.
    for n in nodes:
        if isinstance(n, ir.Assign | ir.VarDecl):
            value = n.rhs if isinstance(n, ir.Assign) else n.init
            assert value is None or not isinstance(value.type, ir.IntType), n
