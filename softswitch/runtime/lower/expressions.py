"""Expression code generation: an IR expression becomes one Python expression over the frame `F`.

Also the l-value references (`ref`): a slot, a Python local, or a header whose base is computed at run time.
"""

from __future__ import annotations

from softswitch.frontend import ir
from softswitch.runtime import bits
from softswitch.runtime.layout import HeaderSlots, Layout, Slot, StackSlots, StructSlots
from softswitch.runtime.lower.common import (
    CompilerState,
    DynHeader,
    DynScalar,
    LoweringError,
    PyVar,
    Ref,
    pattern_code,
    pure_code,
    signed,
    wrap_code,
)


class ExpressionCodegen(CompilerState):
    """Expression code generation: an IR expression becomes one Python expression over the frame `F`."""

    def ref(self, e: ir.Expr) -> Ref:
        if isinstance(e, ir.VarRef):
            if self.fscope is not None and e.name in self.fscope:
                return self.fscope[e.name]
            if e.name in self.scope:
                return self.scope[e.name]
            raise LoweringError(e.loc, f"variable {e.name} is not in scope here")
        if isinstance(e, ir.Member):
            base = self.ref(e.expr)
            if isinstance(base, StructSlots):
                return base.members[e.member]
            if isinstance(base, HeaderSlots):
                return Slot(base.base + base.offsets[e.member], e.type)
            if isinstance(base, DynHeader):
                off = 1 + [f.name for f in base.type.fields].index(e.member)
                return DynScalar(f"F[{base.code} + {off}]", e.type)
            raise LoweringError(e.loc, f"cannot take member {e.member} here")
        if isinstance(e, ir.StackElement):
            st = self.ref(e.stack)
            assert isinstance(st, StackSlots)
            if isinstance(e.index, ir.Constant):
                k = e.index.value
                if not 0 <= k < st.type.size:
                    raise LoweringError(e.loc, f"stack index {k} out of range [0, {st.type.size})")
                return st.elements[k]
            code = f"_sb({self.ex(e.index)}, {st.base + 1}, {st.stride}, {st.type.size}, {self._soob()})"
            return DynHeader(code, e.type)
        if isinstance(e, ir.StackNext | ir.StackLast):
            st = self.ref(e.stack)
            assert isinstance(st, StackSlots)
            idx = f"F[{st.base}]" if isinstance(e, ir.StackNext) else f"F[{st.base}] - 1"
            return DynHeader(f"_sb({idx}, {st.base + 1}, {st.stride}, {st.type.size}, {self._soob()})", e.type)
        raise LoweringError(getattr(e, "loc", None), f"{type(e).__name__} is not a variable")

    def _soob(self) -> int:
        return self.err.get("StackOutOfBounds", 0)

    def scalar_code(self, r: Ref, loc: ir.SourceLoc | None = None) -> str:
        if isinstance(r, Slot):
            return f"F[{r.index}]"
        if isinstance(r, PyVar):
            return r.name
        if isinstance(r, DynScalar):
            return r.code
        raise LoweringError(loc, "a composite value is used where a scalar is expected")

    def ex(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Constant):
            return f"({e.value})" if e.value < 0 else str(e.value)
        if isinstance(e, ir.BoolConst):
            return "True" if e.value else "False"
        if isinstance(e, ir.EnumMember):
            return str(e.type.value_of(e.member))
        if isinstance(e, ir.ErrorConst):
            return str(self.error_code(e.name, e.loc))
        if isinstance(e, ir.VarRef | ir.Member | ir.StackElement | ir.StackNext | ir.StackLast):
            if isinstance(e, ir.Member) and isinstance(e.expr.type, ir.HeaderStackType) and e.member == "size":
                return str(e.expr.type.size)
            return self.scalar_code(self.ref(e), getattr(e, "loc", None))
        if isinstance(e, ir.Slice):
            return f"(({self.ex(e.expr)} >> {e.lo}) & {(1 << (e.hi - e.lo + 1)) - 1})"
        if isinstance(e, ir.StackLastIndex):
            st = self.ref(e.stack)
            assert isinstance(st, StackSlots)
            return f"((F[{st.base}] - 1) & 4294967295)"
        if isinstance(e, ir.UnaryOp):
            return self.unary(e)
        if isinstance(e, ir.BinaryOp):
            return self.binary(e)
        if isinstance(e, ir.Cast):
            return self.cast(e)
        if isinstance(e, ir.Mux):
            return f"({self.ex(e.then)} if {self.ex(e.cond)} else {self.ex(e.else_)})"
        if isinstance(e, ir.HeaderMethodCall):
            if e.method != "isValid":
                raise LoweringError(e.loc, f"{e.method}() used as a value")
            return self.valid_code(self.ref(e.header), e.loc)
        if isinstance(e, ir.TableHitMiss):
            fn = self.table_function(e.apply.table, e.loc)
            return f"{fn}(F).hit" if e.which == "hit" else f"(not {fn}(F).hit)"
        if isinstance(e, ir.FunctionCall):
            return self.function_call(e)
        if isinstance(e, ir.ExternMethodCall):
            if e.extern == "packet_in" and e.method == "lookahead":
                t = e.type_args[0] if e.type_args else e.type
                if not isinstance(t, ir.BitType):
                    raise LoweringError(e.loc, f"lookahead<{t}> is not supported (only bit<W>)")
                return f"_lookahead(F, {t.width})"
            if e.extern == "packet_in" and e.method == "length":
                return f"F[{self.special['DLEN']}]"
        raise LoweringError(getattr(e, "loc", None), f"expression {type(e).__name__} is not supported here")

    def valid_code(self, r: Ref, loc: ir.SourceLoc | None) -> str:
        if isinstance(r, HeaderSlots):
            return f"F[{r.base}]"
        if isinstance(r, DynHeader):
            return f"F[{r.code}]"
        if isinstance(r, StructSlots) and isinstance(r.type, ir.HeaderUnionType):
            parts = [f"F[{m.base}]" for m in r.members.values()]
            return "(" + " or ".join(parts) + ")"
        raise LoweringError(loc, "isValid() of something that is not a header")

    def unary(self, e: ir.UnaryOp) -> str:
        a = self.ex(e.operand)
        if e.op == "!":
            return f"(not {a})"
        t = e.type
        if not isinstance(t, ir.BitType):
            raise LoweringError(e.loc, f"unary {e.op} on {t}")
        if e.op == "~":
            return f"(~{a})" if t.signed else f"({a} ^ {(1 << t.width) - 1})"
        if e.op == "-":
            return wrap_code(f"-{a}", t.width, t.signed)
        raise LoweringError(e.loc, f"unary operator {e.op}")

    def binary(self, e: ir.BinaryOp) -> str:
        op = e.op
        if op == "&&":
            return f"({self.ex(e.left)} and {self.ex(e.right)})"
        if op == "||":
            return f"({self.ex(e.left)} or {self.ex(e.right)})"
        lt = e.left.type
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if isinstance(lt, ir.HeaderType | ir.StructType | ir.HeaderStackType | ir.HeaderUnionType):
                ra, rb = self.ref(e.left), self.ref(e.right)
                if not (isinstance(ra, Layout) and isinstance(rb, Layout)):
                    raise LoweringError(e.loc, "comparison of these composite values is not supported")
                code = f"(F[{ra.base}:{ra.base + ra.size}] == F[{rb.base}:{rb.base + rb.size}])"
                return code if op == "==" else f"(not {code})"
            return f"({self.ex(e.left)} {op} {self.ex(e.right)})"
        t = e.type
        if op == "++":
            rt = e.right.type
            a = pattern_code(self.ex(e.left), lt)
            b = pattern_code(self.ex(e.right), rt)
            code = f"(({a} << {ir.bit_width(rt)}) | {b})"
            if signed(t):
                code = wrap_code(code, t.width, True)
            return code
        if not isinstance(t, ir.BitType):
            raise LoweringError(e.loc, f"operator {op} on {t}")
        w, s = t.width, t.signed
        a = self.ex(e.left)
        if op in ("<<", ">>"):
            if isinstance(e.right, ir.Constant):
                n = e.right.value
                if op == "<<":
                    return "0" if n >= w else wrap_code(f"{a} << {n}", w, s)
                if n >= w:
                    return f"(-1 if {a} < 0 else 0)" if s else "0"
                return f"({a} >> {n})"
            b = self.ex(e.right)
            rt = e.right.type
            if not s and isinstance(rt, ir.BitType) and not rt.signed:
                # inline for bit<W> (a < 2**W): `a >> b` is 0 from b >= W on by itself; `<<` masks, and is 0
                # from b >= W on without building a huge int (b is read twice: only for pure code)
                if op == ">>":
                    return f"({a} >> {b})"
                if pure_code(b):
                    return f"(({a} << {b}) & {(1 << w) - 1} if {b} < {w} else 0)"
            return f"_shl({a}, {b}, {w}, {s})" if op == "<<" else f"_shr({a}, {b}, {w}, {s})"
        b = self.ex(e.right)
        if op in ("+", "-", "*"):
            return wrap_code(f"{a} {op} {b}", w, s)
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op == "/":
            return f"({a} // {b})"
        if op == "%":
            return f"({a} % {b})"
        lo, hi = bits.bounds(w, s)
        if op == "|+|":
            return f"min({a} + {b}, {hi})" if not s else f"min(max({a} + {b}, {lo}), {hi})"
        if op == "|-|":
            return f"max({a} - {b}, {lo})" if not s else f"min(max({a} - {b}, {lo}), {hi})"
        raise LoweringError(e.loc, f"binary operator {op}")

    def cast(self, e: ir.Cast) -> str:
        src, dst = e.expr.type, e.type
        if isinstance(e.expr, ir.Constant) and isinstance(dst, ir.BitType):
            return str(bits.wrap(e.expr.value, dst.width, dst.signed))
        a = self.ex(e.expr)
        if isinstance(dst, ir.BoolType):
            return a if isinstance(src, ir.BoolType) else f"({a} != 0)"
        if isinstance(dst, ir.BitType):
            if isinstance(src, ir.BoolType):
                return f"(1 if {a} else 0)"
            if isinstance(src, ir.EnumType):
                return a
            if isinstance(src, ir.BitType):
                m = (1 << dst.width) - 1
                if src.signed and not dst.signed:
                    return f"({a} & {m})"
                if not src.signed and dst.signed:
                    return wrap_code(a, dst.width, True) if src.width >= dst.width else a
                if dst.width >= src.width:
                    return a
                return wrap_code(a, dst.width, dst.signed)
            if isinstance(src, ir.IntType):
                return wrap_code(a, dst.width, dst.signed)
        if isinstance(dst, ir.EnumType):
            return a
        raise LoweringError(e.loc, f"cast from {src} to {dst} is not supported")
