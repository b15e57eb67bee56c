"""Lower the typed IR (`softswitch.frontend.ir`) to executable Python: one compiled function per parser state,
action, table application, function and control, all reading and writing the flat frame of `layout.py`.

Why generate source instead of nesting closures: a per-packet walk over nested Python closures costs one
call per IR node; generating the same logic as straight-line Python and compiling it once at load time lets
CPython run each action or parser state as a single function with constant slot indices (`F[17]`), which is
what makes tens of thousands of packets per second possible in pure Python. The generated source is kept
on `Lowered.source` (and shown by `SoftSwitch.dump_source()`) so it can be read and debugged.

What the generated functions assume (the contract with `switch.py`):
- `F` is the frame: a list copied from `Lowered.template` per packet; special slots are in `Lowered.special`.
- the parser raises `ParserError(code)` on a parser error; the switch records it in `parser_error`.
- controls catch `exit` themselves; `AssertionFailed` escapes to the switch, which drops the packet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from softswitch.frontend import ir
from softswitch.runtime import bits, hashing
from softswitch.runtime.externs import CounterArray, MeterArray, RandomSource, RegisterArray
from softswitch.runtime.layout import Allocator, HeaderSlots, Layout, Slot, StackSlots, StructSlots
from softswitch.runtime.tables import ActionParam, ActionRef, KeyField, Table
from softswitch.target import Exact, Lpm, Match, OptionalMatch, Range, TableEntry, Ternary

log = logging.getLogger("softswitch.p4")


class LoweringError(Exception):
    """The program uses something the executor does not implement; printed as `file:line:col: message`."""

    def __init__(self, loc: ir.SourceLoc | None, message: str) -> None:
        super().__init__(f"{loc}: {message}" if loc is not None else message)
        self.loc = loc


class ParserError(Exception):
    """A parser error (`PacketTooShort`, `StackOutOfBounds`, a failed `verify`): parsing stops there."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class AssertionFailed(Exception):
    """A P4 `assert`/`assume` evaluated to false: the switch drops the packet and logs it."""


class _Exit(Exception):
    """`exit`: leave the current top-level control."""


_EXIT = _Exit()


class ValueSet:
    """A parser `value_set<T>(size)`: (value, mask) members the control plane adds (P4Runtime ValueSetEntry)."""

    def __init__(self, name: str, size: int, width: int) -> None:
        self.name = name
        self.size = size
        self.width = width
        self.members: list[tuple[int, int]] = []

    def contains(self, key: int) -> bool:
        return any((key & m) == v for v, m in self.members)


# ---- code helpers ---------------------------------------------------------------------------------------


@dataclass
class _PyVar:
    """A scalar variable kept as a Python local of the generated function (action/function locals, params)."""

    name: str
    type: ir.Type


@dataclass
class _DynHeader:
    """A header whose base slot is computed at run time (a header stack element with a variable index)."""

    code: str
    type: ir.HeaderType


@dataclass
class _DynScalar:
    code: str
    type: ir.Type


_Ref = Layout | _PyVar | _DynHeader | _DynScalar




def _signed(t: ir.Type) -> bool:
    return isinstance(t, ir.BitType) and t.signed


def _wrap_code(code: str, width: int, signed: bool) -> str:
    m = (1 << width) - 1
    if signed:
        h = 1 << (width - 1)
        return f"(((({code}) + {h}) & {m}) - {h})"
    return f"(({code}) & {m})"


def _pattern_code(code: str, t: ir.Type) -> str:
    """Code giving the unsigned bit pattern of a scalar value (for keys, packing, emitting)."""
    if isinstance(t, ir.BoolType):
        return f"(1 if {code} else 0)"
    if _signed(t):
        return f"({code} & {(1 << t.width) - 1})"
    return code


class _Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def indent(self) -> None:
        self.level += 1

    def dedent(self) -> None:
        self.level -= 1

    def mark(self) -> int:
        return len(self.lines)

    def ensure_body(self, mark: int) -> None:
        if len(self.lines) == mark:
            self("pass")


def _sb(index: int, base: int, stride: int, n: int, code: int) -> int:
    """Base slot of stack element `index`; out of range is a StackOutOfBounds error."""
    if 0 <= index < n:
        return base + index * stride
    raise ParserError(code)


def _shl(a: int, n: int, width: int, signed: bool) -> int:
    return bits.shl(a, n, width, signed)


def _shr(a: int, n: int, width: int, signed: bool) -> int:
    return bits.shr(a, n, width, signed)


def _log_msg(fmt: str, values: tuple) -> None:
    text = fmt
    for v in values:
        text = text.replace("{}", str(v), 1)
    log.info("log_msg: %s", text)


# ---- the result --------------------------------------------------------------------------------------------


@dataclass
class Lowered:
    """A compiled program: the frame template, the pipeline's functions and the control-plane objects."""

    program: ir.Program
    source: str
    template: list
    special: dict[str, int]
    """frame slots the switch uses: DATA, POS, DLEN, OUT, CLONE, RESUB, RECIRC, DIGEST, TRUNC"""
    std: dict[str, int]
    """standard_metadata field name → slot"""
    metadata_range: tuple[int, int]
    """[start, end) slots of user metadata and standard metadata (what BMv2 resets on resubmit/recirculate/clone)"""
    field_lists: dict[int, tuple[int, ...]]
    """`@field_list(N)` index → user-metadata slots preserved by *_preserving_field_list(N)"""
    parse: Callable
    verify: Callable | None
    """None when the control does nothing (the switch skips the call)"""
    ingress: Callable
    egress: Callable | None
    compute: Callable | None
    deparse: Callable
    tables: dict[str, Table]
    registers: dict[str, RegisterArray]
    counters: dict[str, CounterArray]
    direct_counters: dict[str, str]
    """direct_counter name → table name"""
    meters: dict[str, MeterArray]
    value_sets: dict[str, ValueSet]
    random: RandomSource
    error_codes: dict[str, int] = field(default_factory=dict)


# ---- the compiler -----------------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, program: ir.Program, seed: int | None) -> None:
        self.p = program
        self.alloc = Allocator()
        self.out = _Emitter()
        self.ns: dict[str, Any] = {
            "ParserError": ParserError, "AssertionFailed": AssertionFailed, "_Exit": _Exit, "_EXIT": _EXIT,
            "_sb": _sb, "_shl": _shl, "_shr": _shr, "_log_msg": _log_msg, "_from_bytes": int.from_bytes,
        }
        self.random = RandomSource(seed)
        self.ns["_rand"] = self.random.between
        self.tmp = 0
        self.scope: dict[str, _Ref] = {}
        self.fscope: dict[str, _Ref] | None = None
        self.function_kind = "control"  # control | action | function | parser
        self.fn_outs: list[_PyVar] = []
        self.action_fn: dict[str, str] = {}
        self.table_fn: dict[str, str] = {}
        self.function_fn: dict[str, str] = {}
        self.instances: dict[str, str] = {}
        self.registers: dict[str, RegisterArray] = {}
        self.counters: dict[str, CounterArray] = {}
        self.meters: dict[str, MeterArray] = {}
        self.value_sets: dict[str, ValueSet] = {}
        self.direct_counters: dict[str, str] = {}
        self.err = {name: i for i, name in enumerate(program.errors)}
        self.control: ir.Control | None = None
        self.stage = ""

    # -- naming
    def fresh(self, prefix: str = "_t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def error_code(self, name: str, loc: ir.SourceLoc | None = None) -> int:
        if name not in self.err:
            raise LoweringError(loc, f"error.{name} is not declared")
        return self.err[name]

    # ---- references --------------------------------------------------------------------------------

    def ref(self, e: ir.Expr) -> _Ref:
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
            if isinstance(base, _DynHeader):
                off = 1 + [f.name for f in base.type.fields].index(e.member)
                return _DynScalar(f"F[{base.code} + {off}]", e.type)
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
            return _DynHeader(code, e.type)
        if isinstance(e, ir.StackNext | ir.StackLast):
            st = self.ref(e.stack)
            assert isinstance(st, StackSlots)
            idx = f"F[{st.base}]" if isinstance(e, ir.StackNext) else f"F[{st.base}] - 1"
            return _DynHeader(f"_sb({idx}, {st.base + 1}, {st.stride}, {st.type.size}, {self._soob()})", e.type)
        raise LoweringError(getattr(e, "loc", None), f"{type(e).__name__} is not a variable")

    def _soob(self) -> int:
        return self.err.get("StackOutOfBounds", 0)

    def scalar_code(self, r: _Ref, loc: ir.SourceLoc | None = None) -> str:
        if isinstance(r, Slot):
            return f"F[{r.index}]"
        if isinstance(r, _PyVar):
            return r.name
        if isinstance(r, _DynScalar):
            return r.code
        raise LoweringError(loc, "a composite value is used where a scalar is expected")

    # ---- expressions -------------------------------------------------------------------------------

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

    def valid_code(self, r: _Ref, loc: ir.SourceLoc | None) -> str:
        if isinstance(r, HeaderSlots):
            return f"F[{r.base}]"
        if isinstance(r, _DynHeader):
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
            return _wrap_code(f"-{a}", t.width, t.signed)
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
                a, b = self.ref(e.left), self.ref(e.right)
                if not (hasattr(a, "base") and hasattr(b, "base")):
                    raise LoweringError(e.loc, "comparison of these composite values is not supported")
                code = f"(F[{a.base}:{a.base + a.size}] == F[{b.base}:{b.base + b.size}])"
                return code if op == "==" else f"(not {code})"
            return f"({self.ex(e.left)} {op} {self.ex(e.right)})"
        t = e.type
        if op == "++":
            rt = e.right.type
            a = _pattern_code(self.ex(e.left), lt)
            b = _pattern_code(self.ex(e.right), rt)
            code = f"(({a} << {ir.bit_width(rt)}) | {b})"
            if _signed(t):
                code = _wrap_code(code, t.width, True)
            return code
        if not isinstance(t, ir.BitType):
            raise LoweringError(e.loc, f"operator {op} on {t}")
        w, s = t.width, t.signed
        a = self.ex(e.left)
        if op in ("<<", ">>"):
            if isinstance(e.right, ir.Constant):
                n = e.right.value
                if op == "<<":
                    return "0" if n >= w else _wrap_code(f"{a} << {n}", w, s)
                if n >= w:
                    return f"(-1 if {a} < 0 else 0)" if s else "0"
                return f"({a} >> {n})"
            b = self.ex(e.right)
            return f"_shl({a}, {b}, {w}, {s})" if op == "<<" else f"_shr({a}, {b}, {w}, {s})"
        b = self.ex(e.right)
        if op in ("+", "-", "*"):
            return _wrap_code(f"{a} {op} {b}", w, s)
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
                    return _wrap_code(a, dst.width, True) if src.width >= dst.width else a
                if dst.width >= src.width:
                    return a
                return _wrap_code(a, dst.width, dst.signed)
            if isinstance(src, ir.IntType):
                return _wrap_code(a, dst.width, dst.signed)
        if isinstance(dst, ir.EnumType):
            return a
        raise LoweringError(e.loc, f"cast from {src} to {dst} is not supported")

    # ---- stores ------------------------------------------------------------------------------------

    def store(self, lhs: ir.Expr, value_code: str) -> None:
        """Emit `lhs = value` for a scalar l-value (slices included)."""
        if isinstance(lhs, ir.Slice):
            base_t = lhs.expr.type
            target = self.scalar_code(self.ref(lhs.expr), lhs.loc)
            m = ((1 << (lhs.hi - lhs.lo + 1)) - 1) << lhs.lo
            w = ir.bit_width(base_t)
            full = (1 << w) - 1
            new = f"(({_pattern_code(target, base_t)} & {full ^ m}) | (({value_code}) << {lhs.lo} & {m}))"
            if _signed(base_t):
                new = _wrap_code(new, w, True)
            self.out(f"{target} = {new}")
            return
        target = self.scalar_code(self.ref(lhs), getattr(lhs, "loc", None))
        self.out(f"{target} = {value_code}")

    def assign(self, lhs: ir.Expr, rhs: ir.Expr, loc: ir.SourceLoc) -> None:
        t = lhs.type
        if isinstance(t, ir.HeaderType | ir.StructType | ir.HeaderStackType | ir.HeaderUnionType):
            self.assign_composite(self.ref(lhs), rhs, loc)
            return
        self.store(lhs, self.ex(rhs))

    def assign_composite(self, dst: _Ref, rhs: ir.Expr, loc: ir.SourceLoc) -> None:
        if isinstance(rhs, ir.StructInit):
            t = rhs.type
            if isinstance(dst, HeaderSlots | _DynHeader):
                base = str(dst.base) if isinstance(dst, HeaderSlots) else dst.code
                vals = ", ".join(self.ex(v) for v in rhs.values)
                if isinstance(dst, HeaderSlots):
                    self.out(f"F[{dst.base}:{dst.base + dst.size}] = (True, {vals})")
                else:
                    b = self.fresh("_b")
                    self.out(f"{b} = {base}")
                    self.out(f"F[{b}:{b} + {1 + len(t.fields)}] = (True, {vals})")
                return
            assert isinstance(dst, StructSlots)
            for f, v in zip(t.fields, rhs.values, strict=True):
                member = dst.members[f.name]
                if isinstance(member, Slot):
                    self.out(f"F[{member.index}] = {self.ex(v)}")
                else:
                    self.assign_composite(member, v, loc)
            return
        src = self.ref(rhs)
        if isinstance(dst, _DynHeader) or isinstance(src, _DynHeader):
            n = 1 + len(dst.type.fields)
            d, s = self.fresh("_d"), self.fresh("_s")
            self.out(f"{d} = {dst.base if isinstance(dst, HeaderSlots) else dst.code}")
            self.out(f"{s} = {src.base if isinstance(src, HeaderSlots) else src.code}")
            self.out(f"F[{d}:{d} + {n}] = F[{s}:{s} + {n}]")
            return
        if not (hasattr(dst, "base") and hasattr(src, "base")):
            raise LoweringError(loc, "this composite assignment is not supported")
        self.out(f"F[{dst.base}:{dst.base + dst.size}] = F[{src.base}:{src.base + src.size}]")

    # ---- declarations ------------------------------------------------------------------------------

    def declare(self, d: ir.VarDecl, scope: dict[str, _Ref], in_function: bool) -> None:
        t = d.type
        scalar = isinstance(t, ir.BitType | ir.BoolType | ir.EnumType | ir.ErrorType | ir.IntType)
        if in_function and scalar:
            v = _PyVar(self.fresh("v_"), t)
            scope[d.name] = v
            self.out(f"{v.name} = {self.ex(d.init) if d.init is not None else ('False' if isinstance(t, ir.BoolType) else '0')}")
            return
        if d.name not in scope:
            scope[d.name] = self.alloc.allocate(t, f"{self.stage}.{d.name}")
        r = scope[d.name]
        if d.init is not None:
            if scalar:
                self.out(f"{self.scalar_code(r)} = {self.ex(d.init)}")
            else:
                self.assign_composite(r, d.init, d.loc)
        else:
            base, size = (r.base, r.size)  # type: ignore[union-attr]
            zeros = self.alloc.template[base:base + size]
            name = self.fresh("_Z")
            self.ns[name] = list(zeros)
            self.out(f"F[{base}:{base + size}] = {name}")

    # ---- statements --------------------------------------------------------------------------------

    def block(self, b: ir.Block) -> None:
        for s in b.stmts:
            self.stmt(s)

    def body(self, b: ir.Block | None) -> None:
        self.out.indent()
        m = self.out.mark()
        if b is not None:
            self.block(b)
        self.out.ensure_body(m)
        self.out.dedent()

    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.VarDecl):
            scope = self.fscope if self.fscope is not None else self.scope
            self.declare(s, scope, self.fscope is not None)
        elif isinstance(s, ir.Assign):
            self.assign(s.lhs, s.rhs, s.loc)
        elif isinstance(s, ir.Block):
            self.block(s)
        elif isinstance(s, ir.If):
            self.out(f"if {self.ex(s.cond)}:")
            self.body(s.then)
            if s.else_ is not None and s.else_.stmts:
                self.out("else:")
                self.body(s.else_)
        elif isinstance(s, ir.Switch):
            self.switch(s)
        elif isinstance(s, ir.Exit):
            self.out("raise _EXIT")
        elif isinstance(s, ir.Return):
            if self.function_kind == "function":
                outs = ", ".join(v.name for v in self.fn_outs)
                val = self.ex(s.value) if s.value is not None else "None"
                self.out(f"return ({val}, {outs})" if self.fn_outs else f"return {val}")
            elif self.function_kind == "parser":
                raise LoweringError(s.loc, "return in a parser state")
            else:
                self.out("return")
        elif isinstance(s, ir.CallStmt):
            self.call(s.call, s.loc)
        else:
            raise LoweringError(getattr(s, "loc", None), f"statement {type(s).__name__} is not supported")

    def switch(self, s: ir.Switch) -> None:
        if isinstance(s.expr, ir.ActionRun):
            fn = self.table_function(s.expr.apply.table, s.loc)
            v = self.fresh("_a")
            self.out(f"{v} = {fn}(F).action")
            def label_code(lbl: object) -> str:
                return repr(lbl)
        else:
            v = self.fresh("_s")
            self.out(f"{v} = {self.ex(s.expr)}")
            def label_code(lbl: object) -> str:
                return self.ex(lbl)  # type: ignore[arg-type]
        first = True
        default: ir.SwitchCase | None = None
        for case in s.cases:
            labels = [lbl for lbl in case.labels if lbl is not None]
            if len(labels) != len(case.labels):
                default = case
                if not labels:
                    continue
            cond = " or ".join(f"{v} == {label_code(lbl)}" for lbl in labels)
            self.out(f"{'if' if first else 'elif'} {cond}:")
            first = False
            self.body(case.body)
        if default is not None:
            if first:
                self.block(default.body)
            else:
                self.out("else:")
                self.body(default.body)

    def call(self, c: ir.Expr, loc: ir.SourceLoc) -> None:
        if isinstance(c, ir.HeaderMethodCall):
            r = self.ref(c.header)
            if c.method == "isValid":
                return
            if isinstance(r, HeaderSlots):
                if c.method == "setValid":
                    zeros = ", ".join("0" for _ in r.type.fields)
                    self.out(f"if not F[{r.base}]:")
                    self.out(f"    F[{r.base}:{r.base + r.size}] = (True, {zeros})")
                    self._invalidate_union_siblings(c.header, r)
                elif c.method == "setInvalid":
                    self.out(f"F[{r.base}] = False")
                return
            if isinstance(r, _DynHeader):
                self.out(f"F[{r.code}] = {'True' if c.method == 'setValid' else 'False'}")
                return
            raise LoweringError(loc, f"{c.method}() on something that is not a header")
        if isinstance(c, ir.StackMethodCall):
            self.stack_op(c)
            return
        if isinstance(c, ir.TableApply):
            self.out(f"{self.table_function(c.table, loc)}(F)")
            return
        if isinstance(c, ir.TableHitMiss | ir.ActionRun):
            self.out(f"{self.table_function(c.apply.table, loc)}(F)")
            return
        if isinstance(c, ir.ActionCall):
            fn = self.action_function_name(c.action, loc)
            args = ", ".join(self.ex(a) for a in c.args)
            self.out(f"{fn}(F{', ' if args else ''}{args})")
            return
        if isinstance(c, ir.FunctionCall):
            self.function_call(c, statement=True)
            return
        if isinstance(c, ir.ExternMethodCall):
            self.extern_method(c, loc)
            return
        if isinstance(c, ir.ExternFunctionCall):
            self.extern_function(c, loc)
            return
        raise LoweringError(loc, f"call {type(c).__name__} is not supported")

    def _invalidate_union_siblings(self, header_expr: ir.Expr, r: HeaderSlots) -> None:
        if isinstance(header_expr, ir.Member) and isinstance(header_expr.expr.type, ir.HeaderUnionType):
            u = self.ref(header_expr.expr)
            assert isinstance(u, StructSlots)
            for m in u.members.values():
                if m is not r:
                    self.out(f"F[{m.base}] = False")

    def stack_op(self, c: ir.StackMethodCall) -> None:
        st = self.ref(c.stack)
        assert isinstance(st, StackSlots)
        n, size, stride = c.count, st.type.size, st.stride
        first = st.base + 1
        end = first + size * stride
        invalid = self.fresh("_Z")
        self.ns[invalid] = list(self.alloc.template[first:first + min(n, size) * stride])
        k = min(n, size) * stride
        if c.method == "push_front":
            if n < size:
                self.out(f"F[{first + k}:{end}] = F[{first}:{end - k}]")
            self.out(f"F[{first}:{first + k}] = {invalid}")
            self.out(f"F[{st.base}] = min(F[{st.base}] + {n}, {size})")
        else:
            if n < size:
                self.out(f"F[{first}:{end - k}] = F[{first + k}:{end}]")
            self.out(f"F[{end - k}:{end}] = {invalid}")
            self.out(f"F[{st.base}] = max(F[{st.base}] - {n}, 0)")

    # -- externs
    def instance_name(self, name: str, loc: ir.SourceLoc | None) -> str:
        if name not in self.instances:
            raise LoweringError(loc, f"extern instance {name} is not known")
        return self.instances[name]

    def extern_method(self, c: ir.ExternMethodCall, loc: ir.SourceLoc) -> None:
        ext, m = c.extern, c.method
        if ext == "packet_in":
            if m == "extract":
                if len(c.args) != 1:
                    raise LoweringError(loc, "extract with a variable-size (varbit) argument is not supported")
                self.extract(c.args[0], loc)
            elif m == "advance":
                self.out(f"_advance(F, {self.ex(c.args[0])})")
            elif m == "lookahead":
                self.out(f"{self.ex(c)}")
            else:
                raise LoweringError(loc, f"packet_in.{m} is not supported")
            return
        if ext == "packet_out":
            if m != "emit":
                raise LoweringError(loc, f"packet_out.{m} is not supported")
            self.emit(self.ref(c.args[0]), loc)
            return
        target = c.target
        if not isinstance(target, ir.ExternInstanceRef):
            raise LoweringError(loc, f"{ext}.{m} on a non-instance")
        obj = self.instance_name(target.name, loc)
        if ext == "register":
            reg = self.registers[target.name]
            if m == "read":
                idx = self.fresh("_i")
                self.out(f"{idx} = {self.ex(c.args[1])}")
                self.out(f"if {idx} < {reg.size}:")
                self.out.indent()
                self.store(c.args[0], f"{obj}[{idx}]")
                self.out.dedent()
                self.out("else:")
                self.out(f"    _oob({target.name!r}, {idx})")
            elif m == "write":
                idx = self.fresh("_i")
                self.out(f"{idx} = {self.ex(c.args[0])}")
                self.out(f"if {idx} < {reg.size}:")
                self.out(f"    {obj}[{idx}] = {self.ex(c.args[1])}")
                self.out("else:")
                self.out(f"    _oob({target.name!r}, {idx})")
            else:
                raise LoweringError(loc, f"register.{m} is not supported")
            return
        if ext == "counter" and m == "count":
            self.out(f"{obj}.count({self.ex(c.args[0])}, F[{self.std['packet_length']}])")
            return
        if ext == "direct_counter" and m == "count":
            return  # counted on every hit of the table's entry (BMv2 does the same)
        if ext == "meter" and m == "execute_meter":
            self.store(c.args[1], f"{obj}.execute({self.ex(c.args[0])}, F[{self.std['packet_length']}], _now_us())")
            return
        if ext == "direct_meter" and m == "read":
            self.store(c.args[0], "0")
            return
        raise LoweringError(loc, f"{ext}.{m} is not supported")

    def extract(self, arg: ir.Expr, loc: ir.SourceLoc) -> None:
        r = self.ref(arg)
        if isinstance(r, HeaderSlots | _DynHeader):
            ht = r.type
        else:
            raise LoweringError(loc, "extract of something that is not a header")
        w = ir.bit_width(ht)
        if w % 8:
            raise LoweringError(loc, f"header {ht.name} is {w} bits, not a whole number of bytes")
        nb = w // 8
        sp = self.special
        self.out(f"_p = F[{sp['POS']}]")
        self.out(f"_e = _p + {nb}")
        self.out(f"if _e > F[{sp['DLEN']}]:")
        self.out(f"    raise ParserError({self.err.get('PacketTooShort', 1)})")
        self.out(f"_v = _from_bytes(F[{sp['DATA']}][_p:_e], 'big')")
        parts = []
        shift = w
        for f in ht.fields:
            fw = ir.bit_width(f.type)
            shift -= fw
            code = "_v" if shift == 0 else f"(_v >> {shift})"
            if shift + fw < w:
                code = f"({code} & {(1 << fw) - 1})"
            if _signed(f.type):
                code = _wrap_code(code, fw, True)
            elif isinstance(f.type, ir.BoolType):
                code = f"({code} != 0)"
            parts.append(code)
        vals = ", ".join(parts)
        if isinstance(r, HeaderSlots):
            self.out(f"F[{r.base}:{r.base + r.size}] = (True, {vals})")
            self._invalidate_union_siblings(arg, r)
        else:
            self.out(f"_b = {r.code}")
            self.out(f"F[_b:_b + {1 + len(ht.fields)}] = (True, {vals})")
        self.out(f"F[{sp['POS']}] = _e")
        if isinstance(arg, ir.StackNext):
            st = self.ref(arg.stack)
            assert isinstance(st, StackSlots)
            self.out(f"F[{st.base}] += 1")

    def header_pack_code(self, base: str, ht: ir.HeaderType) -> str:
        w = ir.bit_width(ht)
        parts = []
        shift = w
        for i, f in enumerate(ht.fields):
            fw = ir.bit_width(f.type)
            shift -= fw
            slot = f"F[{base} + {1 + i}]" if not base.isdigit() else f"F[{int(base) + 1 + i}]"
            v = _pattern_code(slot, f.type)
            parts.append(v if shift == 0 else f"({v} << {shift})")
        return " | ".join(parts) if parts else "0"

    def emit(self, r: _Ref, loc: ir.SourceLoc) -> None:
        if isinstance(r, HeaderSlots | _DynHeader):
            ht = r.type
            if ir.bit_width(ht) % 8:
                raise LoweringError(loc, f"header {ht.name} is {ir.bit_width(ht)} bits, not a whole number of bytes")
            if isinstance(r, HeaderSlots):
                base = str(r.base)
            else:
                base = self.fresh("_b")
                self.out(f"{base} = {r.code}")
            self.out(f"if F[{base}]:")
            self.out(f"    _o.append(({self.header_pack_code(base, ht)}).to_bytes({ir.bit_width(ht) // 8}, 'big'))")
        elif isinstance(r, StructSlots):
            for m in r.members.values():
                self.emit(m, loc)
        elif isinstance(r, StackSlots):
            for elem in r.elements:
                self.emit(elem, loc)
        else:
            raise LoweringError(loc, "emit of something that is not a header, stack or struct of them")

    # -- field lists (hash, checksum, digest)
    def flatten(self, e: ir.Expr) -> list[tuple[str | None, str, int]]:
        """(validity condition or None, value code as a bit pattern, width) for each field of a field list."""
        if isinstance(e, ir.ListExpr):
            return [x for item in e.items for x in self.flatten(item)]
        if isinstance(e, ir.StructInit):
            return [x for v in e.values for x in self.flatten(v)]
        t = e.type
        if isinstance(t, ir.HeaderType | ir.StructType | ir.HeaderStackType | ir.HeaderUnionType):
            return self.flatten_ref(self.ref(e), None)
        cond = None
        if isinstance(e, ir.Member) and isinstance(e.expr.type, ir.HeaderType):
            cond = self.valid_code(self.ref(e.expr), e.loc)
        return [(cond, _pattern_code(self.ex(e), t), ir.bit_width(t))]

    def flatten_ref(self, r: _Ref, cond: str | None) -> list[tuple[str | None, str, int]]:
        if isinstance(r, HeaderSlots):
            c = f"F[{r.base}]"
            return [(c, _pattern_code(f"F[{r.base + 1 + i}]", f.type), ir.bit_width(f.type)) for i, f in enumerate(r.type.fields)]
        if isinstance(r, StructSlots):
            return [x for m in r.members.values() for x in self.flatten_ref(m, cond)]
        if isinstance(r, StackSlots):
            return [x for elem in r.elements for x in self.flatten_ref(elem, cond)]
        if isinstance(r, Slot):
            return [(cond, _pattern_code(f"F[{r.index}]", r.type), ir.bit_width(r.type))]
        raise LoweringError(None, "this field list element is not supported")

    def pack_int(self, data: ir.Expr) -> tuple[str, str]:
        """Emit code computing the field list as one integer; returns (value code, bit-count code).

        Fields of invalid headers are left out, as BMv2's BufBuilder does; when no field depends on a
        header's validity the width is a constant and no per-packet bookkeeping is generated.
        """
        items = self.flatten(data)
        groups: list[tuple[str | None, list[tuple[str, int]]]] = []
        for cond, code, w in items:
            if groups and groups[-1][0] == cond:
                groups[-1][1].append((code, w))
            else:
                groups.append((cond, [(code, w)]))

        def concat(members: list[tuple[str, int]]) -> str:
            parts, shift = [], sum(w for _, w in members)
            for code, w in members:
                shift -= w
                parts.append(f"({code} << {shift})" if shift else code)
            return " | ".join(parts) if parts else "0"

        if all(cond is None for cond, _ in groups):
            self.out(f"_acc = {concat([(c, w) for _, c, w in items])}")
            return "_acc", str(sum(w for _, _, w in items))
        if len(groups) == 1:
            cond, members = groups[0]
            self.out(f"if {cond}:")
            self.out(f"    _acc = {concat(members)}; _nb = {sum(w for _, w in members)}")
            self.out("else:")
            self.out("    _acc = 0; _nb = 0")
            return "_acc", "_nb"
        self.out("_acc = 0")
        self.out("_nb = 0")
        for cond, members in groups:
            gw = sum(w for _, w in members)
            line = f"_acc = (_acc << {gw}) | {concat(members)}; _nb += {gw}"
            if cond is None:
                self.out(line)
            else:
                self.out(f"if {cond}:")
                self.out(f"    {line}")
        return "_acc", "_nb"

    def pack(self, data: ir.Expr, out_var: str, with_payload: bool = False) -> None:
        """Emit code leaving in `out_var` the bytes BMv2 would hash for this field list."""
        acc, nb = self.pack_int(data)
        if nb.isdigit():
            total = int(nb)
            pad = -total % 8
            self.out(f"{out_var} = ({acc} << {pad}).to_bytes({(total + pad) // 8}, 'big')")
        else:
            self.out(f"{out_var} = ({acc} << (-{nb} % 8)).to_bytes(({nb} + 7) >> 3, 'big')")
        if with_payload:
            self.out(f"{out_var} += F[{self.special['DATA']}][F[{self.special['POS']}]:]")

    def digest_of(self, algo: ir.Expr, data: ir.Expr, loc: ir.SourceLoc, with_payload: bool = False) -> str:
        """Emit the packing of a field list and return code for its hash (csum16 straight from the integer)."""
        if isinstance(algo, ir.EnumMember) and algo.member == "csum16" and not with_payload:
            acc, nb = self.pack_int(data)
            self.ns["_csum16_int"] = hashing.csum16_int
            return f"_csum16_int({acc}, {nb})"
        fn = self.algo(algo, loc)
        self.pack(data, "_buf", with_payload=with_payload)
        return f"{fn}(_buf)"

    def algo(self, e: ir.Expr, loc: ir.SourceLoc) -> str:
        if not isinstance(e, ir.EnumMember):
            raise LoweringError(loc, "hash algorithm must be a HashAlgorithm constant")
        try:
            fn = hashing.algorithm(e.member)
        except KeyError as exc:
            raise LoweringError(loc, str(exc.args[0])) from None
        name = f"H_{e.member}"
        self.ns[name] = fn
        return name

    def extern_function(self, c: ir.ExternFunctionCall, loc: ir.SourceLoc) -> None:
        n, a = c.name, c.args
        sp = self.special
        if n == "mark_to_drop":
            sm = self.ref(a[0]) if a else None
            if isinstance(sm, StructSlots):
                self.out(f"F[{sm.members['egress_spec'].base}] = 511")
                if "mcast_grp" in sm.members:
                    self.out(f"F[{sm.members['mcast_grp'].base}] = 0")
            else:
                self.out(f"F[{self.std['egress_spec']}] = 511")
                self.out(f"F[{self.std['mcast_grp']}] = 0")
        elif n in ("verify_checksum", "update_checksum", "verify_checksum_with_payload",
                   "update_checksum_with_payload"):
            cond, data, csum, algo = a[0], a[1], a[2], a[3]
            self.algo(algo, loc)  # validates the algorithm name
            self.out(f"if {self.ex(cond)}:")
            self.out.indent()
            value = self.digest_of(algo, data, loc, with_payload=n.endswith("_with_payload"))
            if n.startswith("verify"):
                self.out(f"if {value} != {_pattern_code(self.ex(csum), csum.type)}:")
                self.out(f"    F[{self.std['checksum_error']}] = 1")
            else:
                self.store(csum, f"{value} & {(1 << ir.bit_width(csum.type)) - 1}")
            self.out.dedent()
        elif n == "hash":
            result, algo, base, data, max_ = a
            self.algo(algo, loc)
            value = self.digest_of(algo, data, loc)
            w = ir.bit_width(result.type)
            self.store(result, f"({self.ex(base)} + {value} % ({self.ex(max_)} or 1)) & {(1 << w) - 1}")
        elif n == "random":
            w = ir.bit_width(a[0].type)
            self.store(a[0], f"_rand({self.ex(a[1])}, {self.ex(a[2])}) & {(1 << w) - 1}")
        elif n == "verify":
            err = a[1]
            code = self.ex(err)
            self.out(f"if not {self.ex(a[0])}:")
            self.out(f"    raise ParserError({code})")
        elif n == "digest":
            t = c.type_args[0] if c.type_args else a[1].type
            if not isinstance(t, ir.StructType):
                raise LoweringError(loc, "digest data must be a struct")
            items = self.flatten(a[1])
            names = [f.name for f in t.fields]
            if len(items) != len(names):
                raise LoweringError(loc, "digest of a struct with nested structs or headers is not supported")
            pairs = ", ".join(f"({nm!r}, {code})" for nm, (_, code, _) in zip(names, items, strict=True))
            self.out(f"F[{sp['DIGEST']}] = ({t.name!r}, ({pairs},))")
        elif n in ("clone", "clone3", "clone_preserving_field_list"):
            session = self.ex(a[1])
            fl = self.ex(a[2]) if n == "clone_preserving_field_list" else "None"
            self.out(f"F[{sp['CLONE']}] = ({session}, {fl})")
        elif n in ("resubmit", "resubmit_preserving_field_list"):
            fl = self.ex(a[0]) if n.endswith("field_list") else "None"
            self.out(f"F[{sp['RESUB']}] = ({fl},)")
        elif n in ("recirculate", "recirculate_preserving_field_list"):
            fl = self.ex(a[0]) if n.endswith("field_list") else "None"
            self.out(f"F[{sp['RECIRC']}] = ({fl},)")
        elif n == "truncate":
            self.out(f"F[{sp['TRUNC']}] = {self.ex(a[0])}")
        elif n == "log_msg":
            fmt = a[0].value if isinstance(a[0], ir.StringConst) else ""
            vals = ", ".join(code for _, code, _ in self.flatten(a[1])) if len(a) > 1 else ""
            self.out(f"_log_msg({fmt!r}, ({vals}{',' if vals else ''}))")
        elif n in ("assert", "assume"):
            self.out(f"if not {self.ex(a[0])}:")
            self.out(f"    raise AssertionFailed({str(loc) + ': ' + n + ' failed'!r})")
        else:
            raise LoweringError(loc, f"extern function {n} is not supported")

    # ---- functions and actions ---------------------------------------------------------------------

    def function_call(self, c: ir.FunctionCall, statement: bool = False) -> str:
        f = self.p.function(c.function)
        if f is None:
            raise LoweringError(c.loc, f"function {c.function} not found")
        fn = self.function_fn[c.function]
        ins = [self.ex(arg) for arg, p in zip(c.args, f.params, strict=True) if p.direction in (ir.Direction.IN, ir.Direction.NONE, ir.Direction.INOUT)]
        call = f"{fn}(F{', ' if ins else ''}{', '.join(ins)})"
        outs = [(arg, p) for arg, p in zip(c.args, f.params, strict=True) if p.direction in (ir.Direction.OUT, ir.Direction.INOUT)]
        if not outs:
            if statement:
                self.out(call)
            return call
        if not statement:
            raise LoweringError(c.loc, f"function {c.function} with out parameters used inside an expression")
        r = self.fresh("_r")
        self.out(f"{r} = {call}")
        for k, (arg, _) in enumerate(outs):
            self.store(arg, f"{r}[{k + 1}]")
        return r

    def compile_function(self, f: ir.Function) -> None:
        name = self.function_fn[f.name]
        saved = (self.fscope, self.function_kind, self.fn_outs)
        self.fscope = {}
        self.function_kind = "function"
        self.fn_outs = []
        args = []
        for p in f.params:
            if not isinstance(p.type, ir.BitType | ir.BoolType | ir.EnumType | ir.ErrorType):
                raise LoweringError(p.loc, f"function parameter {p.name} of type {p.type} is not supported")
            v = _PyVar(f"p_{p.name}", p.type)
            self.fscope[p.name] = v
            if p.direction is ir.Direction.OUT:
                self.fn_outs.append(v)
            else:
                args.append(v.name)
                if p.direction is ir.Direction.INOUT:
                    self.fn_outs.append(v)
        self.out(f"def {name}(F{', ' if args else ''}{', '.join(args)}):")
        self.out.indent()
        for v in self.fn_outs:
            if v.name not in args:
                self.out(f"{v.name} = 0")
        m = self.out.mark()
        self.block(f.body)
        if self.fn_outs:
            self.out(f"return (None, {', '.join(v.name for v in self.fn_outs)})")
        self.out.ensure_body(m)
        self.out.dedent()
        self.out("")
        self.fscope, self.function_kind, self.fn_outs = saved

    def action_function_name(self, qualified: str, loc: ir.SourceLoc | None) -> str:
        if qualified not in self.action_fn:
            raise LoweringError(loc, f"action {qualified} is not known")
        return self.action_fn[qualified]

    def compile_action(self, act: ir.Action) -> None:
        name = self.action_fn[act.qualified_name]
        saved = (self.fscope, self.function_kind)
        self.fscope = {}
        self.function_kind = "action"
        args = []
        for p in act.params:
            if p.direction in (ir.Direction.OUT, ir.Direction.INOUT):
                raise LoweringError(p.loc, f"action {act.name}: out/inout parameters are not supported")
            if not isinstance(p.type, ir.BitType | ir.BoolType | ir.EnumType):
                raise LoweringError(p.loc, f"action {act.name}: parameter of type {p.type} is not supported")
            v = _PyVar(f"p_{p.name}", p.type)
            self.fscope[p.name] = v
            args.append(v.name)
        self.out(f"def {name}(F{', ' if args else ''}{', '.join(args)}):")
        self.body(act.body)
        self.out("")
        self.fscope, self.function_kind = saved

    # ---- tables ------------------------------------------------------------------------------------

    def table_function(self, qualified: str, loc: ir.SourceLoc | None) -> str:
        if qualified not in self.table_fn:
            raise LoweringError(loc, f"table {qualified} is not known")
        return self.table_fn[qualified]

    def compile_table(self, t: ir.Table) -> None:
        fn = self.table_fn[t.qualified_name]
        obj = f"T_{fn[4:]}"
        keys = []
        for k in t.keys:
            if k.match_kind == "selector":
                raise LoweringError(k.loc, "action selectors are not supported")
            keys.append(_pattern_code(self.ex(k.expr), k.expr.type))
        key_code = "(" + ", ".join(keys) + ("," if len(keys) == 1 else "") + ")"
        self.out(f"def {fn}(F):")
        self.out.indent()
        self.out(f"_o = {obj}.lookup({key_code})")
        if t.counters:
            self.out("_c = _o.counter")
            self.out("if _c is not None:")
            self.out("    _c.packets += 1")
            self.out(f"    _c.bytes += F[{self.std['packet_length']}]")
        self.out("_o.fn(F, *_o.args)")
        self.out("return _o")
        self.out.dedent()
        self.out("")

    def build_table(self, t: ir.Table) -> Table:
        keys = []
        for k in t.keys:
            keys.append(KeyField(k.name, k.match_kind, ir.bit_width(k.expr.type)))
        refs = []
        for ar in t.actions:
            act = self.p.action(ar.action)
            if act is None:
                raise LoweringError(ar.loc, f"table {t.qualified_name}: action {ar.action} not found")
            params = tuple(ActionParam(p.name, ir.bit_width(p.type), _signed(p.type)) for p in act.data_params)
            names = {a.name for a in ar.annotations} | {a.name for a in act.annotations}
            refs.append(ActionRef(act.qualified_name, params, "tableonly" in names, "defaultonly" in names))
        if t.default_action.action not in {r.name for r in refs}:
            # p4c's implicit `default_action = NoAction()` for a table that does not list NoAction
            act = self.p.action(t.default_action.action)
            if act is None:
                raise LoweringError(t.loc, f"table {t.qualified_name}: default action {t.default_action.action} not found")
            params = tuple(ActionParam(p.name, ir.bit_width(p.type), _signed(p.type)) for p in act.data_params)
            refs.append(ActionRef(act.qualified_name, params, default_only=True))
        ns = self.ns

        def bind(action: str) -> Callable:
            return ns[self.action_fn[action]]

        default = self._action_args(t.default_action, t)
        table = Table(t.qualified_name, keys, refs, bind, default, size=t.size or 1024,
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
            action, params = self._action_args(ce.action, t)
            table.insert(TableEntry(t.qualified_name, match, action, params, prio), force=True)
        table.const_entries = bool(t.entries) and t.entries_const
        return table

    def _action_args(self, ar: ir.ActionRef, t: ir.Table) -> tuple[str, dict[str, int]]:
        act = self.p.action(ar.action)
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
            return self.error_code(e.name, e.loc)
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
            return {"exact": Exact(v), "lpm": Lpm(v, w), "ternary": Ternary(v, full),
                    "range": Range(v, v), "optional": OptionalMatch(v)}[k.match_kind]
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

    # ---- parsers -----------------------------------------------------------------------------------

    def keyset_cond(self, key: str, key_t: ir.Type, ks: ir.Keyset) -> str:
        if isinstance(ks, ir.KeysetDefault):
            return "True"
        if isinstance(ks, ir.KeysetExact):
            return f"{key} == {self.ex(ks.value)}"
        if isinstance(ks, ir.KeysetMask):
            m = self.ex(ks.mask)
            return f"({key} & {m}) == ({self.ex(ks.value)} & {m})"
        if isinstance(ks, ir.KeysetRange):
            return f"{self.ex(ks.low)} <= {key} <= {self.ex(ks.high)}"
        if isinstance(ks, ir.KeysetValueSet):
            vs = self.instance_name(ks.value_set, ks.loc)
            return f"{vs}.contains({key})"
        raise LoweringError(None, f"keyset {type(ks).__name__}")

    def compile_parser(self, p: ir.Parser) -> None:
        self.function_kind = "parser"
        self.stage = p.name
        state_fn = {s.name: f"ps_{self.fresh('')}_{s.name}" for s in p.states}
        for s in p.states:
            self.out(f"def {state_fn[s.name]}(F):")
            self.out.indent()
            self.block(s.body)
            tr = s.transition
            if isinstance(tr, ir.Goto):
                self.out(f"return {self._next(tr.state, state_fn, tr.loc)}")
            else:
                keys = []
                for k in tr.keys:
                    v = self.fresh("_k")
                    self.out(f"{v} = {_pattern_code(self.ex(k), k.type) if isinstance(k.type, ir.BoolType) else self.ex(k)}")
                    keys.append((v, k.type))
                for case in tr.cases:
                    if len(case.keysets) == 1 and isinstance(case.keysets[0], ir.KeysetDefault):
                        cond = "True"
                    elif len(case.keysets) == 1 and len(keys) > 1 and isinstance(case.keysets[0], ir.KeysetValueSet):
                        raise LoweringError(case.loc, "a value_set over several select keys is not supported")
                    else:
                        conds = [self.keyset_cond(k, kt, ks) for (k, kt), ks in zip(keys, case.keysets, strict=True)]
                        conds = [c for c in conds if c != "True"] or ["True"]
                        cond = " and ".join(conds)
                    if cond == "True":
                        self.out(f"return {self._next(case.next_state, state_fn, case.loc)}")
                        break
                    self.out(f"if {cond}:")
                    self.out(f"    return {self._next(case.next_state, state_fn, case.loc)}")
                else:
                    # no case matched and no default: BMv2 goes on as if the parser had accepted
                    self.out("return None")

            self.out.dedent()
            self.out("")
        locals_init = []
        for d in p.locals:
            self.scope[d.name] = self.alloc.allocate(d.type, f"{p.name}.{d.name}")
            locals_init.append(d)
        self.out("def parse(F):")
        self.out.indent()
        for d in locals_init:
            self.declare(d, self.scope, False)
        # states call their successor directly; a parser loop that never ends hits Python's recursion
        # limit, which the switch turns into a dropped packet
        self.out(f"{state_fn['start']}(F)")
        self.out.dedent()
        self.out("")

    def _next(self, state: str, state_fn: dict[str, str], loc: ir.SourceLoc | None) -> str:
        """Code that continues parsing at `state` (the value returned by the current state function)."""
        if state in ("accept", "reject"):
            # BMv2 (p4c warns "explicit transition to reject not supported"): both end parsing, no error
            return "None"
        if state not in state_fn:
            raise LoweringError(loc, f"parser state {state} does not exist")
        return f"{state_fn[state]}(F)"

    # ---- controls ----------------------------------------------------------------------------------

    def compile_control(self, c: ir.Control, fn_name: str, deparser: bool = False) -> None:
        self.control = c
        self.stage = c.name
        self.function_kind = "control"
        for d in c.locals:
            if d.name not in self.scope:
                self.scope[d.name] = self.alloc.allocate(d.type, f"{c.name}.{d.name}")
        for a in c.actions:
            self.compile_action(a)
        for t in c.tables:
            self.compile_table(t)
        self.out(f"def {fn_name}(F):")
        self.out.indent()
        if deparser:
            self.out(f"F[{self.special['OUT']}] = _o = []")
        self.out("try:")
        self.out.indent()
        for d in c.locals:
            self.declare(d, self.scope, False)
        m = self.out.mark()
        self.block(c.apply)
        self.out.ensure_body(m)
        self.out.dedent()
        self.out("except _Exit:")
        self.out("    pass")
        self.out.dedent()
        self.out("")

    # ---- whole program -----------------------------------------------------------------------------

    def instances_setup(self) -> None:
        for inst in self.p.all_instances():
            n = self.fresh("X")
            t = inst.type
            self.instances[inst.qualified_name] = n
            if t.name == "register":
                et = t.type_args[0] if t.type_args else ir.BitType(32)
                if not isinstance(et, ir.BitType):
                    raise LoweringError(inst.loc, "only registers of bit<W> or int<W> are supported")
                reg = RegisterArray(inst.qualified_name, inst.size or 0, et.width, et.signed)
                self.registers[inst.qualified_name] = reg
                self.ns[n] = reg.cells
            elif t.name == "counter":
                kind = next((a.member for a in inst.args if isinstance(a, ir.EnumMember)), "packets_and_bytes")
                self.ns[n] = self.counters[inst.qualified_name] = CounterArray(inst.qualified_name, inst.size or 0, kind)
            elif t.name == "meter":
                kind = next((a.member for a in inst.args if isinstance(a, ir.EnumMember)), "packets")
                self.ns[n] = self.meters[inst.qualified_name] = MeterArray(inst.qualified_name, inst.size or 0, kind)
            elif t.name == "value_set":
                et = t.type_args[0] if t.type_args else ir.BitType(32)
                w = ir.bit_width(et) if not isinstance(et, ir.StructType) else sum(ir.bit_width(f.type) for f in et.fields)
                self.ns[n] = self.value_sets[inst.qualified_name] = ValueSet(inst.qualified_name, inst.size or 0, w)
            elif t.name in ("direct_counter", "direct_meter"):
                self.ns[n] = None
            else:
                raise LoweringError(inst.loc, f"extern {t.name} is not supported")

    def run(self) -> Lowered:
        p = self.p
        main = p.main
        names = {slot: main.slot(slot) for slot in ir.V1SWITCH_SLOTS}
        if any(v is None for v in names.values()):
            raise LoweringError(main.loc, "main must be a V1Switch with parser, verifyChecksum, ingress, egress, "
                                "computeChecksum and deparser")
        parser = p.parser(names["p"])  # type: ignore[arg-type]
        if parser is None:
            raise LoweringError(main.loc, f"parser {names['p']} not found")
        data_params = [prm for prm in parser.params if not isinstance(prm.type, ir.ExternType)]
        if len(data_params) != 3:
            raise LoweringError(parser.loc, "the V1Switch parser must take (packet_in, out H, inout M, inout standard_metadata_t)")
        h_t, m_t, sm_t = (prm.type for prm in data_params)
        # user metadata and standard metadata first and contiguous: BMv2 resets exactly these on resubmit etc.
        meta = self.alloc.allocate(m_t, "meta")
        sm = self.alloc.allocate(sm_t, "standard_metadata")
        md_end = len(self.alloc)
        hdr = self.alloc.allocate(h_t, "hdr")
        assert isinstance(sm, StructSlots)
        self.std = {name: r.base for name, r in sm.members.items()}
        for needed in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length"):
            if needed not in self.std:
                raise LoweringError(parser.loc, f"standard_metadata_t has no field {needed}")
        self.special = {k: self.alloc.scalar(ir.BitType(32), f"${k}") for k in
                        ("DATA", "POS", "DLEN", "OUT", "CLONE", "RESUB", "RECIRC", "DIGEST", "TRUNC")}
        self.alloc.template[self.special["DATA"]] = b""
        field_lists = self._field_lists(meta)
        self.instances_setup()
        self.ns["_oob"] = lambda name, idx: log.error("register %s: index %d out of range, ignored", name, idx)
        self.ns["_lookahead"] = self._make_lookahead()
        self.ns["_advance"] = self._make_advance()
        import time as _time
        t0 = _time.monotonic_ns()
        self.ns["_now_us"] = lambda: (_time.monotonic_ns() - t0) // 1000

        for a in p.all_actions():
            self.action_fn[a.qualified_name] = f"act_{self.fresh('')}_{a.name}"
        for t in p.all_tables():
            self.table_fn[t.qualified_name] = f"tbl_{self.fresh('')}_{t.name}"
        for f in p.functions:
            self.function_fn[f.name] = f"fn_{self.fresh('')}_{f.name}"

        self.out("# generated by softswitch.runtime.lower — one function per state/action/table/control")
        self.out("")
        for f in p.functions:
            self.scope = {}
            self.compile_function(f)
        for a in p.actions:
            self.scope = {}
            self.compile_action(a)

        def bind_params(block: ir.Parser | ir.Control) -> None:
            self.scope = {}
            layouts = iter([hdr, meta, sm])
            for prm in block.params:
                if isinstance(prm.type, ir.ExternType):
                    continue
                # match by type: parser/ingress/egress take (H, M, SM), checksums (H, M), deparser (H)
                lay = next(layouts)
                while lay.type != prm.type:  # type: ignore[union-attr]
                    lay = next(layouts)
                self.scope[prm.name] = lay

        bind_params(parser)
        self.compile_parser(parser)
        controls = {}
        for slot, fn_name in (("vr", "verify"), ("ig", "ingress"), ("eg", "egress"), ("ck", "compute"), ("dep", "deparse")):
            c = p.control(names[slot])  # type: ignore[arg-type]
            if c is None:
                raise LoweringError(main.loc, f"control {names[slot]} not found")
            controls[slot] = c
            bind_params(c)
            self.compile_control(c, fn_name, deparser=(slot == "dep"))

        def empty_or(slot: str, fn_name: str) -> Callable | None:
            c = controls[slot]
            return None if not c.apply.stmts and not c.locals else self.ns[fn_name]

        source = "\n".join(self.out.lines) + "\n"
        code = compile(source, f"<softswitch:{p.files[0] if p.files else 'program'}>", "exec")
        exec(code, self.ns)
        tables = {}
        for t in p.all_tables():
            table = self.build_table(t)
            tables[t.qualified_name] = table
            self.ns[f"T_{self.table_fn[t.qualified_name][4:]}"] = table
            if t.counters:
                self.direct_counters[t.counters] = t.qualified_name
        return Lowered(
            program=p, source=source, template=self.alloc.template, special=self.special, std=self.std,
            metadata_range=(0, md_end), field_lists=field_lists,
            parse=self.ns["parse"], verify=empty_or("vr", "verify"), ingress=self.ns["ingress"],
            egress=empty_or("eg", "egress"), compute=empty_or("ck", "compute"), deparse=self.ns["deparse"],
            tables=tables, registers=self.registers, counters=self.counters,
            direct_counters=self.direct_counters, meters=self.meters, value_sets=self.value_sets,
            random=self.random, error_codes=dict(self.err),
        )

    def _field_lists(self, meta: Layout) -> dict[int, tuple[int, ...]]:
        lists: dict[int, list[int]] = {}

        def walk(lay: Layout, annotations: tuple[ir.Annotation, ...]) -> None:
            ids = [v for a in annotations if a.name == "field_list" for v in a.values if isinstance(v, int)]
            if isinstance(lay, StructSlots):
                for f in lay.type.fields:
                    walk(lay.members[f.name], f.annotations + annotations)
                return
            for i in ids:
                lists.setdefault(i, []).extend(range(lay.base, lay.base + lay.size))  # type: ignore[union-attr]

        walk(meta, ())
        return {k: tuple(v) for k, v in lists.items()}

    def _make_lookahead(self) -> Callable[[list, int], int]:
        sp = self.special
        too_short = self.err.get("PacketTooShort", 1)
        data_i, pos_i, dlen_i = sp["DATA"], sp["POS"], sp["DLEN"]

        def lookahead(F: list, width: int) -> int:
            nbytes = (width + 7) // 8
            p = F[pos_i]
            if p + nbytes > F[dlen_i]:
                raise ParserError(too_short)
            return int.from_bytes(F[data_i][p:p + nbytes], "big") >> (nbytes * 8 - width)

        return lookahead

    def _make_advance(self) -> Callable[[list, int], None]:
        sp = self.special
        too_short = self.err.get("PacketTooShort", 1)
        pos_i, dlen_i = sp["POS"], sp["DLEN"]

        def advance(F: list, nbits: int) -> None:
            p = F[pos_i] + nbits // 8
            if p > F[dlen_i]:
                raise ParserError(too_short)
            F[pos_i] = p

        return advance


def lower(program: ir.Program, seed: int | None = None) -> Lowered:
    """Compile a checked program; raises `LoweringError` (file:line:col: message) for unsupported constructs."""
    return _Compiler(program, seed).run()
