"""Table construction: an IR table becomes a `softswitch.runtime.tables.Table` object (keys, action refs, the
default action, `const entries`). Unlike the code generators this builds objects, not code; the table's
apply function (statements.py) looks entries up in it at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from softswitch.frontend import ir
from softswitch.runtime.lower.common import LoweringError, signed
from softswitch.runtime.tables import ActionParam, ActionRef, KeyField, Table
from softswitch.target import Exact, Lpm, Match, OptionalMatch, Range, TableEntry, Ternary


@dataclass(frozen=True)
class TableBuilder:
    """Builds the tables of one compiled program."""

    program: ir.Program
    bind: Callable[[str], Callable]
    """Action qualified name → its compiled function."""
    error_codes: Mapping[str, int]
    """`error.X` → its number (a const entry may match on an error)."""

    def build_table(self, t: ir.Table) -> Table:
        """The table with its key fields, action refs, default action and `const entries` installed."""
        keys = []
        for k in t.keys:
            keys.append(KeyField(k.name, k.match_kind, ir.bit_width(k.expr.type)))
        refs = []
        for ar in t.actions:
            act = self.program.action(ar.action)
            if act is None:
                raise LoweringError(ar.loc, f"table {t.qualified_name}: action {ar.action} not found")
            params = tuple(ActionParam(p.name, ir.bit_width(p.type), signed(p.type)) for p in act.data_params)
            names = {a.name for a in ar.annotations} | {a.name for a in act.annotations}
            refs.append(ActionRef(act.qualified_name, params, "tableonly" in names, "defaultonly" in names))
        if t.default_action.action not in {r.name for r in refs}:
            # p4c's implicit `default_action = NoAction()` for a table that does not list NoAction
            act = self.program.action(t.default_action.action)
            if act is None:
                raise LoweringError(t.loc, f"table {t.qualified_name}: default action {t.default_action.action} not found")
            params = tuple(ActionParam(p.name, ir.bit_width(p.type), signed(p.type)) for p in act.data_params)
            refs.append(ActionRef(act.qualified_name, params, default_only=True))
        default = self._action_args(t.default_action, t)
        table = Table(t.qualified_name, keys, refs, self.bind, default, size=t.size or 1024,
                      const_default=t.default_action_const, direct_counter=t.counters)
        n = len(t.entries)
        for i, ce in enumerate(t.entries):
            match: dict[str, Match] = {}
            for k, ks in zip(t.keys, ce.keysets, strict=True):
                m = self._keyset_match(k, ks)
                if m is not None:
                    match[k.name] = m
            prio = 0
            if table.needs_priority:
                prio = ce.priority if ce.priority is not None else n - i
            action, args = self._action_args(ce.action, t)
            table.insert(TableEntry(t.qualified_name, match, action, args, prio), force=True)
        table.const_entries = bool(t.entries) and t.entries_const
        return table

    def _action_args(self, ar: ir.ActionRef, t: ir.Table) -> tuple[str, dict[str, int]]:
        act = self.program.action(ar.action)
        if act is None:
            raise LoweringError(ar.loc, f"table {t.qualified_name}: action {ar.action} not found")
        params = {}
        for p, v in zip(act.data_params, ar.args, strict=False):
            if not isinstance(v, ir.Constant | ir.BoolConst | ir.EnumMember):
                raise LoweringError(ar.loc, "action arguments in a table must be constants")
            params[p.name] = self._const_value(v) & ((1 << ir.bit_width(p.type)) - 1)
        return act.qualified_name, params

    def _const_value(self, e: ir.Expr) -> int:
        if isinstance(e, ir.Constant):
            return e.value
        if isinstance(e, ir.BoolConst):
            return int(e.value)
        if isinstance(e, ir.EnumMember):
            return e.type.value_of(e.member)
        if isinstance(e, ir.ErrorConst):
            if e.name not in self.error_codes:
                raise LoweringError(e.loc, f"error.{e.name} is not declared")
            return self.error_codes[e.name]
        raise LoweringError(getattr(e, "loc", None), "a constant is required here")

    def _keyset_match(self, k: ir.TableKey, ks: ir.Keyset) -> Match | None:
        w = ir.bit_width(k.expr.type)
        full = (1 << w) - 1
        if isinstance(ks, ir.KeysetDefault):
            if k.match_kind == "exact":
                raise LoweringError(ks.loc, f"key {k.name} is exact: a value is required")
            return None
        if isinstance(ks, ir.KeysetExact):
            v = self._const_value(ks.value) & full
            by_kind: dict[str, Match] = {"exact": Exact(v), "lpm": Lpm(v, w), "ternary": Ternary(v, full),
                                         "range": Range(v, v), "optional": OptionalMatch(v)}
            return by_kind[k.match_kind]
        if isinstance(ks, ir.KeysetMask):
            v, m = self._const_value(ks.value) & full, self._const_value(ks.mask) & full
            if k.match_kind == "lpm":
                plen = bin(m).count("1")
                return Lpm(v & m, plen)
            if k.match_kind == "ternary":
                return Ternary(v & m, m)
        if isinstance(ks, ir.KeysetRange) and k.match_kind == "range":
            return Range(self._const_value(ks.low) & full, self._const_value(ks.high) & full)
        raise LoweringError(getattr(ks, "loc", None), f"this keyset does not fit key {k.name} ({k.match_kind})")
