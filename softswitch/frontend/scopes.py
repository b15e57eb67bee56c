"""Names in scope while checking: the symbols a P4 name can resolve to, nested scopes, and the context of
the body being checked (which block, which names are taken). Internal to the front end."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from softswitch.frontend import ir
from softswitch.frontend.errors import P4Error
from softswitch.frontend.ir import BoolConst, Constant, Direction, SourceLoc, VarKind


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    """The unique IR name."""
    kind: VarKind
    type: ir.Type
    direction: Direction = Direction.INOUT
    """Parameters keep their direction; `in` and directionless ones are read-only."""


@dataclass(frozen=True, slots=True)
class ConstSym:
    value: ir.Expr


@dataclass(frozen=True, slots=True)
class InstanceSym:
    instance: ir.ExternInstance


@dataclass(frozen=True, slots=True)
class ValueSetSym:
    qualified_name: str
    type: ir.Type


@dataclass(frozen=True, slots=True)
class ActionSym:
    action: ir.Action


@dataclass(frozen=True, slots=True)
class TableSym:
    table: ir.Table


@dataclass(frozen=True, slots=True)
class FunctionSym:
    function: ir.Function


@dataclass(frozen=True, slots=True)
class BlockSym:
    kind: str  # "parser" | "control"
    name: str
    params: tuple[ir.Param, ...]
    loc: SourceLoc


Symbol = Var | ConstSym | InstanceSym | ValueSetSym | ActionSym | TableSym | FunctionSym | BlockSym


class Scope:
    """Nested name scopes; lookups walk outwards."""

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, Symbol] = {}

    def lookup(self, name: str) -> Symbol | None:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def declare(self, name: str, sym: Symbol, loc: SourceLoc) -> None:
        if name in self.names:
            raise P4Error(loc, f"redeclaration of '{name}'")
        self.names[name] = sym


@dataclass
class Context:
    """Where a body is being checked: which block, which scope, and the names already used in it."""

    scope: Scope
    block_kind: str  # "parser" | "control" | "function"
    block_name: str
    used_names: set[str]
    in_action: bool = False
    in_state: bool = False
    return_type: ir.Type | None = None
    calls: list[tuple[str, SourceLoc]] = field(default_factory=list)

    def child(self, **changes) -> Context:
        c = dataclasses.replace(self, scope=Scope(self.scope), **changes)
        c.used_names = self.used_names
        c.calls = self.calls
        return c


def is_const(e: ir.Expr) -> bool:
    return isinstance(e, Constant | BoolConst | ir.EnumMember | ir.ErrorConst | ir.StringConst)


def at_loc(e: ir.Expr, loc: SourceLoc) -> ir.Expr:
    """A folded constant re-located to where it is used."""
    return dataclasses.replace(e, loc=loc) if is_const(e) else e
