"""Rules p4c enforces for BMv2 that go beyond typing, checked on the IR of a control's apply block."""

from __future__ import annotations

import dataclasses

from softswitch.frontend import ir
from softswitch.frontend.errors import P4Error

_NOT_EXPRESSIONS = frozenset({"type", "loc", "type_args", "directions", "annotations"})


def _applies_in(e: object) -> list[ir.TableApply]:
    """Table applications inside an expression, in evaluation order."""
    if isinstance(e, ir.TableApply):
        return [e]
    out: list[ir.TableApply] = []
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        for f in dataclasses.fields(e):
            if f.name in _NOT_EXPRESSIONS:
                continue
            v = getattr(e, f.name)
            if isinstance(v, tuple):
                for x in v:
                    out.extend(_applies_in(x))
            elif dataclasses.is_dataclass(v) and not isinstance(v, ir.Block):
                out.extend(_applies_in(v))
    return out


def check_tables_applied_once(block: ir.Block) -> None:
    def note(applies: list[ir.TableApply], seen: frozenset[str]) -> frozenset[str]:
        for a in applies:
            if a.table in seen:
                raise P4Error(a.loc, f"table '{a.table}' is applied more than once on one path "
                                     f"(p4c: a path from table {a.table} back to itself)")
            seen = seen | {a.table}
        return seen

    def walk(stmts: tuple[ir.Stmt, ...], seen: frozenset[str]) -> tuple[frozenset[str], bool]:
        """Tables possibly applied after `stmts`, and whether every path through them ends (exit/return)."""
        for s in stmts:
            if isinstance(s, ir.If):
                seen = note(_applies_in(s.cond), seen)
                a, ta = walk(s.then.stmts, seen)
                b, tb = walk(s.else_.stmts, seen) if s.else_ is not None else (seen, False)
                if ta and tb:
                    return seen, True
                seen = (a if not ta else frozenset()) | (b if not tb else frozenset())
            elif isinstance(s, ir.Switch):
                seen = note(_applies_in(s.expr), seen)
                outs = [walk(c.body.stmts, seen) for c in s.cases]
                has_default = any(None in c.labels for c in s.cases)
                live = [o for o, t in outs if not t]
                if has_default and not live:
                    return seen, True
                merged = frozenset().union(*live) if live else frozenset()
                seen = merged | (seen if not has_default else frozenset())
            elif isinstance(s, ir.Block):
                seen, term = walk(s.stmts, seen)
                if term:
                    return seen, True
            elif isinstance(s, ir.Exit | ir.Return):
                return seen, True
            else:
                seen = note(_applies_in(s), seen)
        return seen, False

    walk(block.stmts, frozenset())
