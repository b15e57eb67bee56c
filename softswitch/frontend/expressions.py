"""Expressions: typing, P4's implicit conversions of int literals, constant folding, and calls (extern
functions and methods, actions, functions, tables, header and stack methods).

`ExpressionChecker` is the expression half of `checker.Checker`, which supplies the declarations it reads
(`types`, `errors`, `digests`) and `_type`, `_const_int`, `_const_of`, `_require_lvalue`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch.frontend import ast as A
from softswitch.frontend import builtins as B
from softswitch.frontend import ir
from softswitch.frontend.constfold import fold_binary, fold_cast, fold_unary, wrap
from softswitch.frontend.errors import P4Error, unsupported
from softswitch.frontend.ir import (
    BitType,
    BoolConst,
    BoolType,
    Constant,
    Direction,
    IntType,
    SourceLoc,
    VoidType,
)
from softswitch.frontend.scopes import (
    ActionSym,
    AliasSym,
    BlockSym,
    ConstSym,
    Context,
    ControlInstanceSym,
    FunctionSym,
    InstanceSym,
    Scope,
    TableSym,
    ValueSetSym,
    Var,
    at_loc,
    is_const,
)

ARITH_OPS = {"+", "-", "*", "|+|", "|-|", "&", "|", "^"}
COMPARE_OPS = {"<", "<=", ">", ">="}


class ExpressionChecker:
    """Checks expressions into typed IR; mixed into `Checker`."""

    types: dict[str, ir.Type]
    errors: list[str]
    digests: dict[str, ir.Digest]

    if TYPE_CHECKING:  # implemented by `Checker`, which this class is mixed into
        def _type(self, t: A.TypeRef) -> ir.Type: ...
        def _const_int(self, n: A.Node, scope: Scope, what: str) -> int: ...
        def _require_lvalue(self, e: ir.Expr, loc: SourceLoc, ctx: Context) -> None: ...

    def _expr(self, n: A.Node, ctx: Context, expected: ir.Type | None = None, statement: bool = False) -> ir.Expr:
        method = getattr(self, "_e_" + type(n).__name__, None)
        if method is None:
            raise unsupported(n.loc, type(n).__name__)  # type: ignore[attr-defined]
        if isinstance(n, A.CallExpr):
            return self._e_CallExpr(n, ctx, expected, statement)
        return method(n, ctx, expected)

    def _e_IntLit(self, n: A.IntLit, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if n.width is None:
            return Constant(n.value, IntType(), n.loc)
        t = BitType(n.width, n.signed)
        if n.width <= 0:
            raise P4Error(n.loc, f"invalid width in literal '{n.text}'")
        if n.value > ((1 << n.width) - 1):
            raise P4Error(n.loc, f"value of '{n.text}' does not fit in {t}")
        return Constant(wrap(n.value, t), t, n.loc)

    def _e_BoolLit(self, n: A.BoolLit, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        return BoolConst(n.value, loc=n.loc)

    def _e_StrLit(self, n: A.StrLit, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        return ir.StringConst(n.value, loc=n.loc)

    def _e_Name(self, n: A.Name, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        sym = ctx.scope.lookup(n.name)
        if sym is None:
            if n.name in B.FUNCTIONS:
                raise P4Error(n.loc, f"'{n.name}' is a function; call it")
            raise P4Error(n.loc, f"undeclared name '{n.name}'")
        if isinstance(sym, Var):
            return ir.VarRef(sym.name, sym.kind, sym.type, n.loc)
        if isinstance(sym, ConstSym):
            return at_loc(sym.value, n.loc)
        if isinstance(sym, InstanceSym):
            return ir.ExternInstanceRef(sym.instance.qualified_name, sym.instance.type, n.loc)
        if isinstance(sym, AliasSym):
            return sym.value
        kind = {ActionSym: "an action", TableSym: "a table", FunctionSym: "a function",
                BlockSym: "a parser or control", ValueSetSym: "a value_set",
                ControlInstanceSym: "a control instance"}.get(type(sym), "not a value")
        raise P4Error(n.loc, f"'{n.name}' is {kind}, not a value")

    def _e_TypeMember(self, n: A.TypeMember, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if n.type_name == "error":
            if n.member not in self.errors:
                raise P4Error(n.loc, f"undeclared error '{n.member}'")
            return ir.ErrorConst(n.member, loc=n.loc)
        t = self.types.get(n.type_name)
        if not isinstance(t, ir.EnumType):
            raise P4Error(n.loc, f"'{n.type_name}' is not an enum type")
        if n.member not in t.members:
            if t.name == "HashAlgorithm" and n.member in B.UNSUPPORTED_HASHES:
                raise unsupported(n.loc, f"HashAlgorithm.{n.member} (not a v1model hash algorithm on BMv2)")
            raise P4Error(n.loc, f"enum {t.name} has no member '{n.member}'")
        return ir.EnumMember(t, n.member, n.loc)

    def _e_MemberExpr(self, n: A.MemberExpr, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if isinstance(n.expr, A.Name):
            sym = ctx.scope.lookup(n.expr.name)
            if isinstance(sym, TableSym | ActionSym | BlockSym):
                raise P4Error(n.loc, f"'{n.expr.name}.{n.member}' must be called")
        base = self._expr(n.expr, ctx)
        t = base.type
        if isinstance(base, ir.TableApply):
            if n.member in ("hit", "miss"):
                return ir.TableHitMiss(base, n.member, loc=n.loc)
            if n.member == "action_run":
                table = self._table_by_qname(base.table, ctx)
                return ir.ActionRun(base, ir.ActionEnumType(base.table, tuple(a.action for a in table.actions)),
                                    n.loc)
            raise P4Error(n.loc, f"a table's apply result has no member '{n.member}'")
        if isinstance(t, ir.HeaderType | ir.StructType | ir.HeaderUnionType):
            f = t.field(n.member)
            if f is None:
                raise P4Error(n.loc, f"{kind_name(t)} {t.name} has no field '{n.member}'")
            return ir.Member(base, n.member, f.type, n.loc)
        if isinstance(t, ir.HeaderStackType):
            if n.member == "next":
                if ctx.block_kind != "parser":
                    raise P4Error(n.loc, "'next' of a header stack is only allowed in a parser")
                return ir.StackNext(base, t.element, n.loc)
            if n.member == "last":
                return ir.StackLast(base, t.element, n.loc)
            if n.member == "size":
                return Constant(t.size, BitType(32), n.loc)
            if n.member == "lastIndex":
                return ir.StackLastIndex(base, loc=n.loc)
            raise unsupported(n.loc, f"header stack member '{n.member}'")
        raise P4Error(n.loc, f"type {t} has no member '{n.member}'")

    def _table_by_qname(self, qname: str, ctx: Context) -> ir.Table:
        s: Scope | None = ctx.scope
        while s is not None:
            for sym in s.names.values():
                if isinstance(sym, TableSym) and sym.table.qualified_name == qname:
                    return sym.table
            s = s.parent
        raise AssertionError(qname)

    def _e_IndexExpr(self, n: A.IndexExpr, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        base = self._expr(n.expr, ctx)
        if not isinstance(base.type, ir.HeaderStackType):
            raise P4Error(n.loc, f"cannot index a value of type {base.type} (use [hi:lo] to slice)")
        idx = self._expr(n.index, ctx, BitType(32))
        if isinstance(idx, Constant):
            if not 0 <= idx.value < base.type.size:
                raise P4Error(n.index.loc, f"index {idx.value} out of bounds for {base.type}")  # type: ignore[attr-defined]
            idx = Constant(idx.value, BitType(32), idx.loc)
        elif not isinstance(idx.type, BitType) or idx.type.signed:
            raise P4Error(n.index.loc, f"header stack index must be bit<W>, not {idx.type}")  # type: ignore[attr-defined]
        return ir.StackElement(base, idx, base.type.element, n.loc)

    def _e_SliceExpr(self, n: A.SliceExpr, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        base = self._expr(n.expr, ctx)
        hi = self._const_int(n.hi, ctx.scope, "a slice bound")
        lo = self._const_int(n.lo, ctx.scope, "a slice bound")
        if not isinstance(base.type, BitType):
            raise P4Error(n.loc, f"cannot slice a value of type {base.type}")
        if not (0 <= lo <= hi < base.type.width):
            raise P4Error(n.loc, f"slice [{hi}:{lo}] out of range for {base.type}")
        t = BitType(hi - lo + 1)
        if isinstance(base, Constant):
            return Constant((base.value >> lo) & ((1 << t.width) - 1), t, n.loc)
        return ir.Slice(base, hi, lo, t, n.loc)

    def _e_Unary(self, n: A.Unary, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if n.op == "!":
            e = self._coerce(self._expr(n.operand, ctx, BoolType()), BoolType(), n.operand.loc)  # type: ignore[attr-defined]
            return fold_unary("!", e, n.loc) if isinstance(e, BoolConst) else ir.UnaryOp("!", e, BoolType(), n.loc)
        e = self._expr(n.operand, ctx, expected)
        if n.op == "~":
            if isinstance(e.type, IntType):
                if isinstance(expected, BitType):
                    e = self._coerce(e, expected, n.loc)
                else:
                    raise P4Error(n.loc, "'~' needs a value with a width (e.g. 8w5)")
            if not isinstance(e.type, BitType):
                raise P4Error(n.loc, f"'~' on a value of type {e.type}")
        elif not isinstance(e.type, BitType | IntType):
            raise P4Error(n.loc, f"'-' on a value of type {e.type}")
        if isinstance(e, Constant):
            return fold_unary(n.op, e, n.loc)
        return ir.UnaryOp(n.op, e, e.type, n.loc)

    def _unify(self, a: ir.Expr, b: ir.Expr, loc: SourceLoc, op: str) -> tuple[ir.Expr, ir.Expr]:
        """Give an int literal the type of the other operand (P4's implicit cast of int literals)."""
        if isinstance(a.type, IntType) and not isinstance(b.type, IntType):
            a = self._coerce(a, b.type, loc, what=f"operand of '{op}'")
        elif isinstance(b.type, IntType) and not isinstance(a.type, IntType):
            b = self._coerce(b, a.type, loc, what=f"operand of '{op}'")
        elif isinstance(a.type, ir.EnumType) and a.type.underlying == b.type:
            a = self._coerce(a, b.type, loc)
        elif isinstance(b.type, ir.EnumType) and b.type.underlying == a.type:
            b = self._coerce(b, a.type, loc)
        if a.type != b.type:
            raise P4Error(loc, f"type mismatch: {a.type} vs {b.type} (operands of '{op}')")
        return a, b

    def _e_Binary(self, n: A.Binary, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        op = n.op
        if op in ("&&", "||"):
            a = self._coerce(self._expr(n.left, ctx, BoolType()), BoolType(), n.left.loc)  # type: ignore[attr-defined]
            b = self._coerce(self._expr(n.right, ctx, BoolType()), BoolType(), n.right.loc)  # type: ignore[attr-defined]
            if isinstance(a, BoolConst) and isinstance(b, BoolConst):
                return fold_binary(op, a, b, BoolType(), n.loc)
            return ir.BinaryOp(op, a, b, BoolType(), n.loc)
        a = self._expr(n.left, ctx)
        b = self._expr(n.right, ctx)
        if op in ("<<", ">>"):
            return self._shift(n, a, b, expected)
        if op == "++":
            if isinstance(a.type, IntType) or isinstance(b.type, IntType):
                raise P4Error(n.loc, "'++' needs operands with a width (e.g. 8w1)")
            if not isinstance(a.type, BitType) or not isinstance(b.type, BitType):
                raise P4Error(n.loc, f"'++' on values of type {a.type} and {b.type}")
            joined = BitType(a.type.width + b.type.width, a.type.signed)
            if isinstance(a, Constant) and isinstance(b, Constant):
                return fold_binary(op, a, b, joined, n.loc)
            return ir.BinaryOp(op, a, b, joined, n.loc)
        if isinstance(a.type, IntType) and isinstance(b.type, IntType) and isinstance(expected, BitType) \
                and op not in ("==", "!=") and op not in COMPARE_OPS:
            a, b = self._coerce(a, expected, n.loc), self._coerce(b, expected, n.loc)
        a, b = self._unify(a, b, n.loc, op)
        t = a.type
        if op in ("==", "!="):
            if isinstance(t, ir.HeaderStackType | ir.ExternType | VoidType):
                raise P4Error(n.loc, f"cannot compare values of type {t}")
            if is_const(a) and is_const(b) and isinstance(a, Constant | BoolConst):
                return fold_binary(op, a, b, BoolType(), n.loc)
            if isinstance(a, ir.EnumMember) and isinstance(b, ir.EnumMember):
                return BoolConst((a.member == b.member) == (op == "=="), loc=n.loc)
            return ir.BinaryOp(op, a, b, BoolType(), n.loc)
        if not isinstance(t, BitType | IntType):
            raise P4Error(n.loc, f"'{op}' on values of type {t}")
        if op in COMPARE_OPS:
            if isinstance(a, Constant) and isinstance(b, Constant):
                return fold_binary(op, a, b, BoolType(), n.loc)
            return ir.BinaryOp(op, a, b, BoolType(), n.loc)
        if op in ("/", "%"):
            if not isinstance(b, Constant):
                raise P4Error(n.loc, f"'{op}' by a non-constant value (p4c for BMv2: could not evaluate "
                                     "expression at compilation time)")
            if b.value == 0:
                raise P4Error(n.loc, "division by zero")
            if isinstance(t, BitType) and t.signed:
                raise unsupported(n.loc, f"'{op}' on signed values")
        if op in ("|+|", "|-|") and isinstance(t, IntType):
            raise P4Error(n.loc, f"'{op}' needs operands with a width")
        if isinstance(a, Constant) and isinstance(b, Constant):
            return fold_binary(op, a, b, t, n.loc)
        if op not in ARITH_OPS and op not in ("/", "%"):
            raise AssertionError(op)
        return ir.BinaryOp(op, a, b, t, n.loc)

    def _shift(self, n: A.Binary, a: ir.Expr, b: ir.Expr, expected: ir.Type | None) -> ir.Expr:
        if isinstance(a.type, IntType) and not isinstance(b, Constant):
            if isinstance(expected, BitType):
                a = self._coerce(a, expected, n.loc)
            else:
                raise P4Error(n.loc, "shifting an int literal by a non-constant needs a width (e.g. 32w1)")
        if not isinstance(a.type, BitType | IntType):
            raise P4Error(n.loc, f"'{n.op}' on a value of type {a.type}")
        if isinstance(b, Constant):
            if b.value < 0:
                raise P4Error(n.right.loc, "negative shift amount")  # type: ignore[attr-defined]
        elif not isinstance(b.type, BitType) or b.type.signed:
            raise P4Error(n.right.loc, f"shift amount must be bit<W>, not {b.type}")  # type: ignore[attr-defined]
        if isinstance(a, Constant) and isinstance(b, Constant):
            return fold_binary(n.op, a, b, a.type, n.loc)
        if isinstance(b.type, BitType) and b.type.width > 8:
            # p4c's BMv2 back end (--Werror=overlimit): a typed amount wider than 8 bits, constant or not; an
            # untyped int literal is fine (what p4c folds), so `x << 3` passes and `x << 16w3` does not.
            raise P4Error(n.loc, f"{n.op} by a bit<{b.type.width}> amount: shift amount limited to 8 bits on this "
                                 f"target (cast it to bit<8>)")
        return ir.BinaryOp(n.op, a, b, a.type, n.loc)

    def _e_CastExpr(self, n: A.CastExpr, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        t = self._type(n.type)
        e = self._expr(n.expr, ctx, t)
        s = e.type
        if s == t:
            return e
        ok = False
        if isinstance(t, BitType):
            ok = isinstance(s, IntType) or (isinstance(s, BitType) and (
                s.signed == t.signed or s.width == t.width)) or (isinstance(s, BoolType) and t.width == 1 and
                                                                 not t.signed) \
                or (isinstance(s, ir.EnumType) and s.underlying is not None and s.underlying == t)
        elif isinstance(t, BoolType):
            ok = (isinstance(s, BitType) and s.width == 1 and not s.signed) or isinstance(s, IntType)
        elif isinstance(t, ir.EnumType) and t.underlying is not None:
            ok = isinstance(s, IntType) or s == t.underlying
            if isinstance(e, Constant):
                v = wrap(e.value, t.underlying)
                if v in (t.values or ()):
                    return ir.EnumMember(t, t.members[t.values.index(v)], n.loc)  # type: ignore[union-attr]
        elif isinstance(t, IntType):
            ok = isinstance(s, IntType)
        elif isinstance(t, ir.StructType | ir.HeaderType) and isinstance(e, ir.ListExpr | ir.StructInit):
            return self._coerce(e, t, n.loc)
        if not ok:
            raise P4Error(n.loc, f"cannot cast {s} to {t}")
        folded = fold_cast(e, t, n.loc)
        if folded is not None:
            return folded
        return ir.Cast(e, t, n.loc)

    def _e_MuxExpr(self, n: A.MuxExpr, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        cond = self._coerce(self._expr(n.cond, ctx, BoolType()), BoolType(), n.cond.loc)  # type: ignore[attr-defined]
        a = self._expr(n.then, ctx, expected)
        b = self._expr(n.else_, ctx, expected)
        if isinstance(a.type, IntType) and isinstance(b.type, IntType) and not isinstance(cond, BoolConst):
            if expected is None or not isinstance(expected, BitType):
                raise P4Error(n.loc, "both branches of '?:' are int literals: give one a width")
            a, b = self._coerce(a, expected, n.loc), self._coerce(b, expected, n.loc)
        a, b = self._unify(a, b, n.loc, "?:")
        if isinstance(cond, BoolConst):
            return a if cond.value else b
        return ir.Mux(cond, a, b, a.type, n.loc)

    def _e_ListLit(self, n: A.ListLit, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if isinstance(expected, ir.StructType | ir.HeaderType):
            if len(n.items) != len(expected.fields):
                raise P4Error(n.loc, f"{kind_name(expected)} {expected.name} has {len(expected.fields)} field(s), "
                                     f"the list has {len(n.items)}")
            vals = tuple(self._coerce(self._expr(i, ctx, f.type), f.type, i.loc)  # type: ignore[attr-defined]
                         for i, f in zip(n.items, expected.fields, strict=True))
            return ir.StructInit(vals, expected, n.loc)
        items = tuple(self._expr(i, ctx) for i in n.items)
        for i, e in zip(n.items, items, strict=True):
            if isinstance(e.type, IntType):
                raise P4Error(i.loc, "int literal in a list needs a width (e.g. 32w5)")  # type: ignore[attr-defined]
        return ir.ListExpr(items, ir.TupleType(tuple(e.type for e in items)), n.loc)

    def _e_StructLit(self, n: A.StructLit, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        if not isinstance(expected, ir.StructType | ir.HeaderType):
            raise P4Error(n.loc, "cannot tell the type of this struct expression; cast it: (T){ ... }")
        given = dict(n.fields)
        if len(given) != len(n.fields):
            raise P4Error(n.loc, "duplicate field in struct expression")
        missing = [f.name for f in expected.fields if f.name not in given]
        extra = [k for k in given if expected.field(k) is None]
        if missing or extra:
            raise P4Error(n.loc, f"struct expression for {expected.name}: "
                                 + (f"missing {', '.join(missing)}" if missing else f"no field {extra[0]}"))
        vals = tuple(self._coerce(self._expr(given[f.name], ctx, f.type), f.type, given[f.name].loc)  # type: ignore[attr-defined]
                     for f in expected.fields)
        return ir.StructInit(vals, expected, n.loc)

    def _e_ConstructorCall(self, n: A.ConstructorCall, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        raise unsupported(n.loc, f"constructor call {n.type.name}(...) in an expression")

    def _e_NamedArg(self, n: A.NamedArg, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        raise P4Error(n.loc, "named argument outside a call")

    def _e_DontCare(self, n: A.DontCare, ctx: Context, expected: ir.Type | None) -> ir.Expr:
        raise unsupported(n.loc, "don't-care argument '_'")

    # ---- calls ------------------------------------------------------------------------------------------

    def _named_args(self, args: tuple[A.Node, ...], params: tuple, loc: SourceLoc) -> list[A.Node]:
        """Positional order of `args`, reordering named arguments by parameter name."""
        if not any(isinstance(a, A.NamedArg) for a in args):
            return list(args)
        if not all(isinstance(a, A.NamedArg) for a in args):
            raise P4Error(loc, "mixing named and positional arguments")
        by_name = {a.name: a.value for a in args}  # type: ignore[attr-defined]
        out = []
        for p in params:
            if p.name not in by_name:
                raise P4Error(loc, f"missing argument '{p.name}'")
            out.append(by_name.pop(p.name))
        if by_name:
            raise P4Error(loc, f"no parameter called '{next(iter(by_name))}'")
        return out

    def _e_CallExpr(self, n: A.CallExpr, ctx: Context, expected: ir.Type | None, statement: bool = False) -> ir.Expr:
        callee = n.callee
        type_args = tuple(self._type(t) for t in n.type_args)
        if isinstance(callee, A.Name):
            sym = ctx.scope.lookup(callee.name)
            if sym is None and callee.name in B.FUNCTIONS:
                return self._extern_function(n, callee.name, type_args, ctx, expected)
            if isinstance(sym, ActionSym):
                return self._action_call(n, sym.action, ctx)
            if isinstance(sym, FunctionSym):
                return self._function_call(n, sym.function, ctx)
            if sym is None:
                raise P4Error(callee.loc, f"undeclared name '{callee.name}'")
            raise P4Error(callee.loc, f"'{callee.name}' is not callable")
        if isinstance(callee, A.MemberExpr):
            method = callee.member
            if isinstance(callee.expr, A.Name):
                sym = ctx.scope.lookup(callee.expr.name)
                if isinstance(sym, TableSym):
                    if method != "apply":
                        raise P4Error(callee.loc, f"tables have no method '{method}'")
                    if n.args:
                        raise P4Error(n.loc, "apply() takes no arguments")
                    if ctx.in_action:
                        raise P4Error(n.loc, "tables cannot be applied inside an action")
                    if ctx.block_kind != "control":
                        raise P4Error(n.loc, f"tables cannot be applied in a {ctx.block_kind}")
                    t = sym.table
                    return ir.TableApply(t.qualified_name, ir.TableApplyResultType(t.qualified_name), n.loc)
                if isinstance(sym, ControlInstanceSym):
                    raise P4Error(n.loc, f"{callee.expr.name}.{method}() is a statement, not a value"
                                  if method == "apply" else f"control instances have no method '{method}'")
                if isinstance(sym, BlockSym | ActionSym):
                    raise unsupported(n.loc, f"{callee.expr.name}.{method}()")
            base = self._expr(callee.expr, ctx)
            bt = base.type
            if isinstance(bt, ir.HeaderType | ir.HeaderUnionType) and method in ("isValid", "setValid",
                                                                                 "setInvalid"):
                if n.args:
                    raise P4Error(n.loc, f"{method}() takes no arguments")
                if isinstance(bt, ir.HeaderUnionType) and method != "isValid":
                    raise unsupported(n.loc, f"header_union {method}()")
                if method != "isValid":
                    self._require_lvalue(base, callee.loc, ctx)
                rtype = BoolType() if method == "isValid" else VoidType()
                return ir.HeaderMethodCall(base, method, rtype, n.loc)
            if isinstance(bt, ir.HeaderStackType) and method in ("push_front", "pop_front"):
                if len(n.args) != 1:
                    raise P4Error(n.loc, f"{method}() takes one argument")
                count = self._const_int(n.args[0], ctx.scope, f"the {method} count")
                if count <= 0:
                    raise P4Error(n.loc, f"{method} count must be positive")
                self._require_lvalue(base, callee.loc, ctx)
                return ir.StackMethodCall(base, method, count, loc=n.loc)
            if isinstance(bt, ir.ExternType):
                return self._extern_method(n, base, bt, method, type_args, ctx, expected)
            raise P4Error(callee.loc, f"type {bt} has no method '{method}'")
        raise P4Error(n.loc, "expression is not callable")

    def _bind_args(self, n: A.CallExpr, params: tuple[B.ParamSpec, ...], bindings: dict[str, ir.Type],
                   ctx: Context, what: str) -> tuple[tuple[ir.Expr, ...], tuple[Direction, ...]]:
        args_ast = self._named_args(n.args, params, n.loc)
        if len(args_ast) != len(params):
            raise P4Error(n.loc, f"{what} takes {len(params)} argument(s), got {len(args_ast)}")
        checked: list[ir.Expr | None] = [None] * len(params)

        def concrete(p: B.ParamSpec) -> ir.Type | None:
            return bindings.get(p.type) if isinstance(p.type, str) else p.type

        # First the arguments whose parameter type is known or that bind a type variable.
        for i, (a, p) in enumerate(zip(args_ast, params, strict=True)):
            t = concrete(p)
            e = self._expr(a, ctx, t)
            if t is None and isinstance(p.type, str) and not isinstance(e.type, IntType):
                bindings[p.type] = e.type
            checked[i] = e
        out = []
        for i, (a, p) in enumerate(zip(args_ast, params, strict=True)):
            checked_arg = checked[i]
            assert checked_arg is not None
            e = checked_arg
            t = concrete(p)
            if t is None:
                raise P4Error(a.loc, f"cannot infer the width of argument '{p.name}' of {what}; "  # type: ignore[attr-defined]
                                     "give the literal a width (e.g. 32w0)")
            if isinstance(e, ir.ListExpr) and isinstance(t, ir.StructType | ir.HeaderType):
                e = self._expr(a, ctx, t)
            e = self._coerce(e, t, a.loc, what=f"argument '{p.name}' of {what}")  # type: ignore[attr-defined]
            if p.direction in (Direction.OUT, Direction.INOUT):
                self._require_lvalue(e, a.loc, ctx)  # type: ignore[attr-defined]
            if p.direction is Direction.NONE and not is_const(e):
                raise P4Error(a.loc, f"argument '{p.name}' of {what} must be a compile-time constant")  # type: ignore[attr-defined]
            out.append(e)
        return tuple(out), tuple(p.direction for p in params)

    def _extern_function(self, n: A.CallExpr, name: str, type_args: tuple[ir.Type, ...], ctx: Context,
                         expected: ir.Type | None) -> ir.Expr:
        sigs = B.FUNCTIONS[name]
        sig = next((s for s in sigs if len(s.params) == len(n.args)), sigs[0])
        if name in B.PARSER_ONLY_FUNCTIONS and ctx.block_kind != "parser":
            raise P4Error(n.loc, f"{name}() may only be called in a parser")
        if ctx.block_kind == "parser" and name in B.CONTROL_ONLY_FUNCTIONS:
            raise P4Error(n.loc, f"{name}() cannot be called in a parser")
        if type_args and len(type_args) != len(sig.type_params):
            raise P4Error(n.loc, f"{name} takes {len(sig.type_params)} type argument(s), got {len(type_args)}")
        bindings = dict(zip(sig.type_params, type_args, strict=False))
        args, dirs = self._bind_args(n, sig.params, bindings, ctx, f"{name}()")
        if name == "digest":
            t = bindings.get("T")
            if not isinstance(t, ir.StructType):
                raise P4Error(n.loc, f"digest data must be a struct (write digest<T>(...)), not {t}")
            if t.name not in self.digests:
                self.digests[t.name] = ir.Digest(t.name, t, t.annotations, n.loc)
        if name == "hash":
            for i in (0, 2, 4):
                if not isinstance(args[i].type, BitType):
                    raise P4Error(n.args[i].loc, f"hash argument {i + 1} must be bit<W>, not {args[i].type}")  # type: ignore[attr-defined]
            if not isinstance(args[1], ir.EnumMember):
                raise P4Error(n.args[1].loc, "hash algorithm must be a constant HashAlgorithm member")  # type: ignore[attr-defined]
        if name in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                    "update_checksum_with_payload") and not isinstance(args[2].type, BitType):
            raise P4Error(n.args[2].loc, f"checksum field must be bit<W>, not {args[2].type}")  # type: ignore[attr-defined]
        ctx.calls.append((name, n.loc))
        rtype = sig.returns if not isinstance(sig.returns, str) else bindings[sig.returns]
        return ir.ExternFunctionCall(name, args, dirs, rtype, tuple(bindings[t] for t in sig.type_params
                                                                    if t in bindings), n.loc)

    def _extern_method(self, n: A.CallExpr, base: ir.Expr, bt: ir.ExternType, method: str,
                       type_args: tuple[ir.Type, ...], ctx: Context, expected: ir.Type | None) -> ir.Expr:
        spec = B.EXTERNS.get(bt.name)
        if bt.name == "value_set" or spec is None:
            raise P4Error(n.loc, f"{bt.name} has no method '{method}'")
        sig = spec.method(method, len(n.args))
        if sig is None:
            raise P4Error(n.callee.loc, f"{bt.name} has no method '{method}'")  # type: ignore[attr-defined]
        bindings: dict[str, ir.Type] = dict(zip(spec.type_params, bt.type_args, strict=False))
        if type_args:
            if len(type_args) != len(sig.type_params):
                raise P4Error(n.loc, f"{method} takes {len(sig.type_params)} type argument(s)")
            bindings.update(zip(sig.type_params, type_args, strict=True))
        params = sig.params
        if bt.name == "register" and len(bt.type_args) == 2:
            params = tuple(B.ParamSpec(p.name, p.direction, bt.type_args[1]) if p.name == "index" else p
                           for p in params)
        if bt.name == "register":
            idx_pos = next(i for i, p in enumerate(params) if p.name == "index")
            if idx_pos < len(n.args):
                idx = self._expr(n.args[idx_pos], ctx, params[idx_pos].type)  # type: ignore[arg-type]
                want = params[idx_pos].type
                if isinstance(idx.type, BitType) and idx.type != want:
                    raise P4Error(n.args[idx_pos].loc, f"register index must be {want}, not {idx.type} "  # type: ignore[attr-defined]
                                                       f"(cast it: ({want})...)")
        if method == "lookahead":
            if "T" not in bindings:
                raise P4Error(n.loc, "lookahead needs a type argument: packet.lookahead<T>()")
            if not isinstance(bindings["T"], BitType | ir.HeaderType):
                raise unsupported(n.loc, f"lookahead of {bindings['T']}")
        args, dirs = self._bind_args(n, params, bindings, ctx, f"{bt.name}.{method}()")
        if method == "extract" and not isinstance(args[0].type, ir.HeaderType):
            raise P4Error(n.args[0].loc, f"extract needs a header, not {args[0].type}")  # type: ignore[attr-defined]
        if method == "emit" and not emittable(args[0].type):
            raise P4Error(n.args[0].loc, f"emit needs a header, header stack or struct of them, not {args[0].type}")  # type: ignore[attr-defined]
        rtype = sig.returns if not isinstance(sig.returns, str) else bindings[sig.returns]
        used_type_args = tuple(bindings[t] for t in sig.type_params if t in bindings)
        return ir.ExternMethodCall(base, bt.name, method, args, dirs, rtype, used_type_args, n.loc)

    def _action_call(self, n: A.CallExpr, action: ir.Action, ctx: Context) -> ir.Expr:
        if ctx.block_kind != "control":
            raise P4Error(n.loc, f"actions cannot be called from a {ctx.block_kind}")
        if n.type_args:
            raise P4Error(n.loc, "actions take no type arguments")
        params = tuple(B.ParamSpec(p.name, Direction.IN if p.direction is Direction.NONE else p.direction, p.type)
                       for p in action.params)
        args, dirs = self._bind_args(n, params, {}, ctx, f"action '{action.name}'")
        return ir.ActionCall(action.qualified_name, args, dirs, loc=n.loc)

    def _function_call(self, n: A.CallExpr, fn: ir.Function, ctx: Context) -> ir.Expr:
        params = tuple(B.ParamSpec(p.name, p.direction, p.type) for p in fn.params)
        args, dirs = self._bind_args(n, params, {}, ctx, f"function '{fn.name}'")
        return ir.FunctionCall(fn.name, args, dirs, fn.return_type, n.loc)

    # ---- implicit conversions ---------------------------------------------------------------------------

    def _coerce(self, e: ir.Expr, t: ir.Type, loc: SourceLoc, what: str = "") -> ir.Expr:
        s = e.type
        if s == t:
            return e
        if isinstance(e, Constant) and isinstance(s, IntType) and isinstance(t, BitType):
            fits = t.min <= e.value <= t.max if t.signed else -(1 << t.width) <= e.value < (1 << t.width)
            if not fits:
                raise P4Error(e.loc, f"value {e.value} does not fit in {t}")
            return Constant(wrap(e.value, t), t, e.loc)
        if isinstance(s, ir.EnumType) and s.underlying is not None and s.underlying == t:
            folded = fold_cast(e, t, e.loc)  # type: ignore[attr-defined]
            return folded if folded is not None else ir.Cast(e, t, e.loc)  # type: ignore[attr-defined]
        if isinstance(e, ir.ListExpr) and isinstance(t, ir.TupleType) and len(e.items) == len(t.elements):
            items = tuple(self._coerce(i, et, loc) for i, et in zip(e.items, t.elements, strict=True))
            return ir.ListExpr(items, t, e.loc)
        if isinstance(e, ir.ListExpr) and isinstance(t, ir.StructType | ir.HeaderType) and \
                len(e.items) == len(t.fields):
            vals = tuple(self._coerce(i, f.type, loc) for i, f in zip(e.items, t.fields, strict=True))
            return ir.StructInit(vals, t, e.loc)
        where = f" ({what})" if what else ""
        raise P4Error(loc, f"type mismatch: expected {t}, got {s}{where}")


# ---- helpers --------------------------------------------------------------------------------------------


def kind_name(t: ir.Type) -> str:
    return {ir.HeaderType: "header", ir.StructType: "struct", ir.HeaderUnionType: "header_union"}.get(
        type(t), "type")


def emittable(t: ir.Type) -> bool:
    if isinstance(t, ir.HeaderType | ir.HeaderStackType | ir.HeaderUnionType):
        return True
    if isinstance(t, ir.StructType):
        return all(emittable(f.type) for f in t.fields)
    return False


def expr_text(n: A.Node) -> str:
    """A key expression as P4Info names key fields (p4c prints the expression)."""
    if isinstance(n, A.Name):
        return n.name
    if isinstance(n, A.MemberExpr):
        return f"{expr_text(n.expr)}.{n.member}"
    if isinstance(n, A.SliceExpr):
        return f"{expr_text(n.expr)}[{expr_text(n.hi)}:{expr_text(n.lo)}]"
    if isinstance(n, A.IndexExpr):
        return f"{expr_text(n.expr)}[{expr_text(n.index)}]"
    if isinstance(n, A.IntLit):
        return n.text
    if isinstance(n, A.CallExpr):
        return f"{expr_text(n.callee)}()"
    if isinstance(n, A.TypeMember):
        return f"{n.type_name}.{n.member}"
    if isinstance(n, A.CastExpr):
        return f"({type_text(n.type)}){expr_text(n.expr)}"
    if isinstance(n, A.Binary):
        return f"{expr_text(n.left)} {n.op} {expr_text(n.right)}"
    return type(n).__name__


def type_text(t: A.TypeRef) -> str:
    if isinstance(t, A.BaseTypeRef):
        if t.width is None:
            return t.kind
        return f"{'int' if t.kind == 'signed' else t.kind}<{expr_text(t.width)}>"
    if isinstance(t, A.TypeName):
        return t.name
    return "?"
