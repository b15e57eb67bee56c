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
    ctor_params: tuple[ir.Param, ...] = ()


@dataclass(frozen=True, slots=True)
class AliasSym:
    """A parameter of an inlined control instance, used in place of the argument (composition.py)."""

    value: ir.Expr
    direction: Direction


@dataclass(slots=True)
class ControlInstanceSym:
    """`Sub(...) name;` inside a control: inlined where it is applied (composition.py)."""

    name: str
    prefix: str
    """Its control-plane prefix: tables inside are `{prefix}.{table}`."""
    control: object
    """The instantiated control's `ast.ControlA`."""
    constants: dict[str, ir.Expr]
    """Its constructor arguments by parameter name."""
    loc: SourceLoc
    params: tuple[ir.Param, ...] = ()
    arguments: tuple[ir.Expr, ...] = ()
    """What its first apply passed (later applies must pass the same)."""
    scope: Scope | None = None
    """Its names (constructor arguments, parameters, locals); None until its first apply."""
    copies: dict[str, str] = field(default_factory=dict)
    """Parameters copied in and out at each apply: parameter name -> variable name."""
    parts: object = None
    """Its `composition.ControlParts`: where its objects go, in place of its declaration."""
    varying: set[int] = field(default_factory=set)
    """Positions of the arguments that differ between the applies of this instance (always copied)."""


Symbol = (Var | ConstSym | InstanceSym | ValueSetSym | ActionSym | TableSym | FunctionSym | BlockSym | AliasSym
          | ControlInstanceSym)


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
    read_only: tuple[tuple[tuple[str, ...], str], ...] = ()
    """Paths an inlined instance may not write (its `in` parameters used in place), with the name of each."""
    parts: object = None
    """The `composition.ControlParts` of the top-level control being checked (None outside controls)."""

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
