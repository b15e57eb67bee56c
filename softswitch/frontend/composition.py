"""Control composition: a control instantiated inside a control, inlined as p4c's front end inlines it.

`Sub(8w4) step;` inside `MyIngress` makes an instance whose tables, actions, extern instances and variables
become `MyIngress`'s, under the control-plane prefix `MyIngress.step` (`@name(".x")` stays absolute, as
in p4c); `step.apply(args)` becomes the body of `Sub`'s apply block in place. The instance's parameters
are bound once, at its first apply, so its actions (which may read them) have one meaning:

- an extern instance (a counter the caller owns, or one the caller was itself given) is that instance;
- an argument that is a plain path (`hdr`, `meta.index`), the same at every apply of the instance, and that
  does not overlap another written argument is used in place (copy-in/copy-out cannot be told apart);
- anything else (a constant, an expression, a path that differs between applies) is copied into a
  variable of the instance (in before the body, out after it), as the P4_16 calling convention says.

A `return` in the instance's apply ends only the instance's body: it sets a flag the rest of the body is
guarded by (`remove_returns`). This module holds the helpers; `checker.Checker` does the checking.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from softswitch.frontend import ast as A
from softswitch.frontend import ir
from softswitch.frontend.ir import BoolConst, BoolType, Constant, VarKind


@dataclass
class ControlParts:
    """What one control (or control instance) declares, and where each of its instances was declared: as
    p4c does, an instance's objects take the place of its declaration (P4Info lists them in that order)."""

    locals: list[ir.VarDecl] = field(default_factory=list)
    instances: list[ir.ExternInstance] = field(default_factory=list)
    actions: list[ir.Action] = field(default_factory=list)
    tables: list[ir.Table] = field(default_factory=list)
    nested: list[tuple[tuple[int, int, int, int], ControlParts]] = field(default_factory=list)
    """Each instance's parts, with the lengths of the four lists where it was declared."""

    def nest(self) -> ControlParts:
        """The parts of an instance declared here, now."""
        child = ControlParts()
        at = (len(self.locals), len(self.instances), len(self.actions), len(self.tables))
        self.nested.append((at, child))
        return child

    def flat(self) -> ControlParts:
        """Every object, the instances' in place of their declarations."""
        out = ControlParts()
        kinds = ("locals", "instances", "actions", "tables")
        children = [(at, child.flat()) for at, child in self.nested]
        for k, kind in enumerate(kinds):
            own: list = getattr(self, kind)
            merged: list = getattr(out, kind)
            pending = list(children)
            for i in range(len(own) + 1):
                while pending and pending[0][0][k] == i:
                    merged.extend(getattr(pending.pop(0)[1], kind))
                if i < len(own):
                    merged.append(own[i])
        return out


Path = tuple[str, ...]


def is_extern_ref(e: ir.Expr) -> bool:
    """An extern instance given to a control: one the program declares, or a directionless extern parameter
    of the control being checked (`counter drops` of a control that hands it on to an instance of its own)."""
    return isinstance(e, ir.ExternInstanceRef) or (isinstance(e, ir.VarRef) and isinstance(e.type, ir.ExternType))


def ir_path(e: ir.Expr) -> Path | None:
    """`meta.index.slot` as ("meta", "index", "slot"); None for anything that is not a plain l-value path
    (a slice, a run-time stack index, an expression)."""
    if isinstance(e, ir.VarRef):
        return (e.name,)
    if isinstance(e, ir.Member):
        base = ir_path(e.expr)
        return None if base is None else (*base, e.member)
    if isinstance(e, ir.StackElement) and isinstance(e.index, Constant):
        base = ir_path(e.stack)
        return None if base is None else (*base, f"[{e.index.value}]")
    return None


def overlaps(a: Path, b: Path) -> bool:
    """Whether two paths name storage in common (one is a prefix of the other)."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def contains_return(s: ir.Stmt) -> bool:
    if isinstance(s, ir.Return):
        return True
    if isinstance(s, ir.Block):
        return any(contains_return(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return contains_return(s.then) or (s.else_ is not None and contains_return(s.else_))
    if isinstance(s, ir.Switch):
        return any(contains_return(c.body) for c in s.cases)
    return False


def remove_returns(b: ir.Block, flag: str) -> ir.Block:
    """`b` without `return`: each sets the bool variable `flag`, and what follows a statement that may
    have returned runs only if `flag` is still false."""
    out: list[ir.Stmt] = []
    stmts = list(b.stmts)
    for i, s in enumerate(stmts):
        if not contains_return(s):
            out.append(s)
            continue
        if isinstance(s, ir.Return):
            out.append(ir.Assign(ir.VarRef(flag, VarKind.LOCAL, BoolType(), s.loc), BoolConst(True, loc=s.loc),
                                 s.loc))
            return ir.Block(tuple(out), b.loc)  # what follows a return never runs
        out.append(_without_returns(s, flag))
        rest = ir.Block(tuple(stmts[i + 1:]), b.loc)
        if rest.stmts:
            not_returned = ir.UnaryOp("!", ir.VarRef(flag, VarKind.LOCAL, BoolType(), s.loc), BoolType(), s.loc)
            out.append(ir.If(not_returned, remove_returns(rest, flag), None, s.loc))
        return ir.Block(tuple(out), b.loc)
    return ir.Block(tuple(out), b.loc)


def _without_returns(s: ir.Stmt, flag: str) -> ir.Stmt:
    if isinstance(s, ir.Block):
        return remove_returns(s, flag)
    if isinstance(s, ir.If):
        return ir.If(s.cond, remove_returns(s.then, flag),
                     None if s.else_ is None else remove_returns(s.else_, flag), s.loc)
    if isinstance(s, ir.Switch):
        return ir.Switch(s.expr, tuple(ir.SwitchCase(c.labels, remove_returns(c.body, flag), c.loc)
                                       for c in s.cases), s.loc)
    raise AssertionError(s)


def ast_shape(n: object) -> object:
    """An AST node without its source locations: two arguments written alike compare equal."""
    if dataclasses.is_dataclass(n) and not isinstance(n, type):
        return (type(n).__name__, tuple(ast_shape(getattr(n, f.name)) for f in dataclasses.fields(n)
                                        if f.name != "loc"))
    if isinstance(n, tuple):
        return tuple(ast_shape(x) for x in n)
    return n


def applied_arguments(block: object, names: set[str]) -> dict[str, list[tuple[object, ...]]]:
    """For each instance in `names`, the arguments (as `ast_shape`s) of every `name.apply(...)` in `block`."""
    found: dict[str, list[tuple[object, ...]]] = {}

    def walk(n: object) -> None:
        if isinstance(n, A.CallExpr) and isinstance(n.callee, A.MemberExpr) and n.callee.member == "apply" \
                and isinstance(n.callee.expr, A.Name) and n.callee.expr.name in names:
            found.setdefault(n.callee.expr.name, []).append(tuple(ast_shape(a) for a in n.args))
        if dataclasses.is_dataclass(n) and not isinstance(n, type):
            for f in dataclasses.fields(n):
                walk(getattr(n, f.name))
        elif isinstance(n, tuple):
            for x in n:
                walk(x)

    walk(block)
    return found
