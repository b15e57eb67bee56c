"""What every part of the lowering shares: its errors, the references an l-value lowers to, the emitter of
generated lines, the helpers the generated code calls, the `Lowered` result, and `CompilerState` (the state
each code generator reads and writes while one program is compiled).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from softswitch.frontend import ir
from softswitch.runtime import bits
from softswitch.runtime.externs import CounterArray, MeterArray, RandomSource, RegisterArray
from softswitch.runtime.layout import Allocator, HeaderSlots, Layout
from softswitch.runtime.tables import Table

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
class PyVar:
    """A scalar variable kept as a Python local of the generated function (action/function locals, params)."""

    name: str
    type: ir.Type


@dataclass
class DynHeader:
    """A header whose base slot is computed at run time (a header stack element with a variable index)."""

    code: str
    type: ir.HeaderType


@dataclass
class DynScalar:
    """A scalar field of a header whose slot is computed at run time."""

    code: str
    type: ir.Type


Ref = Layout | PyVar | DynHeader | DynScalar




def signed(t: ir.Type) -> TypeGuard[ir.BitType]:
    """A signed `int<W>` (BitType with signed set)."""
    return isinstance(t, ir.BitType) and t.signed


def wrap_code(code: str, width: int, signed: bool) -> str:
    m = (1 << width) - 1
    if signed:
        h = 1 << (width - 1)
        return f"(((({code}) + {h}) & {m}) - {h})"
    return f"(({code}) & {m})"


def pattern_code(code: str, t: ir.Type) -> str:
    """Code giving the unsigned bit pattern of a scalar value (for keys, packing, emitting)."""
    if isinstance(t, ir.BoolType):
        return f"(1 if {code} else 0)"
    if signed(t):
        return f"({code} & {(1 << t.width) - 1})"
    return code


class Emitter:
    """Lines of generated Python at the current indentation."""

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


_TOKEN = re.compile(r"F\[\d+\]|[A-Za-z_]\w*|\d+|\S")
_PURE_NAME = re.compile(r"(v|p)_\w+|and|or|not|if|else|True|False")


def index_names(code: str) -> set[str]:
    """The slots (`F[n]`) and locals code of `pure_code` reads."""
    return {t for t in _TOKEN.findall(code) if t.startswith("F[") or _PURE_NAME.fullmatch(t)}


def pure_code(code: str) -> bool:
    """Whether generated expression code only reads constant slots and locals (no call, no computed slot):
    evaluating it twice, or once for several statements that do not store into what it reads, gives one value."""
    for t in _TOKEN.findall(code):
        if t.startswith("F["):
            continue
        if t[0].isalpha() or t[0] == "_":
            if not _PURE_NAME.fullmatch(t):
                return False
        elif t == "[" or t == "]" or t == "." or t == "," or t == ":":
            return False
    return True


# ---- helpers the generated code calls (bound in its namespace) ---------------------------------------


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




# ---- the state shared by the code generators ---------------------------------------------------------------


class CompilerState:
    """The compilation state of one program. The code generators (expressions, statements, extern calls,
    parser) are mixins over this class; the declarations under TYPE_CHECKING are the methods each of them
    calls on the others, so every module type-checks on its own."""

    special: dict[str, int]
    """Frame slots the switch uses (set by the compiler's run once the layout is known)."""
    std: dict[str, int]
    """standard_metadata field name → slot."""

    def __init__(self, program: ir.Program, seed: int | None) -> None:
        self.p = program
        self.alloc = Allocator()
        self.out = Emitter()
        self.ns: dict[str, Any] = {
            "ParserError": ParserError, "AssertionFailed": AssertionFailed, "_Exit": _Exit, "_EXIT": _EXIT,
            "_sb": _sb, "_shl": _shl, "_shr": _shr, "_log_msg": _log_msg, "_from_bytes": int.from_bytes,
        }
        self.random = RandomSource(seed)
        self.ns["_rand"] = self.random.between
        self.tmp = 0
        self.scope: dict[str, Ref] = {}
        self.fscope: dict[str, Ref] | None = None
        self.function_kind = "control"  # control | action | function | parser
        self.fn_outs: list[PyVar] = []
        self.action_fn: dict[str, str] = {}
        self.table_fn: dict[str, str] = {}
        self.function_fn: dict[str, str] = {}
        self.inline_fn: dict[str, tuple[list[str], str]] = {}
        """Generated function → (its parameters, the expression it returns): a P4 function of one `return` of
        pure code, which a call inside an expression becomes."""
        self.instances: dict[str, str] = {}
        self.registers: dict[str, RegisterArray] = {}
        self.counters: dict[str, CounterArray] = {}
        self.meters: dict[str, MeterArray] = {}
        self.value_sets: dict[str, ValueSet] = {}
        self.direct_counters: dict[str, str] = {}
        self.err = {name: i for i, name in enumerate(program.errors)}
        self.control: ir.Control | None = None
        self.stage = ""

    def fresh(self, prefix: str = "_t") -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def error_code(self, name: str, loc: ir.SourceLoc | None = None) -> int:
        if name not in self.err:
            raise LoweringError(loc, f"error.{name} is not declared")
        return self.err[name]

    if TYPE_CHECKING:  # implemented by the mixins; declared so each mixin type-checks alone
        def ref(self, e: ir.Expr) -> Ref: ...
        def scalar_code(self, r: Ref, loc: ir.SourceLoc | None = None) -> str: ...
        def ex(self, e: ir.Expr) -> str: ...
        def valid_code(self, r: Ref, loc: ir.SourceLoc | None) -> str: ...
        def store(self, lhs: ir.Expr, value_code: str) -> None: ...
        def assign_composite(self, dst: Ref, rhs: ir.Expr, loc: ir.SourceLoc) -> None: ...
        def declare(self, d: ir.VarDecl, scope: dict[str, Ref], in_function: bool) -> None: ...
        def block(self, b: ir.Block) -> None: ...
        def body(self, b: ir.Block | None) -> None: ...
        def function_call(self, c: ir.FunctionCall, statement: bool = False) -> str: ...
        def table_function(self, qualified: str, loc: ir.SourceLoc | None) -> str: ...
        def action_function_name(self, qualified: str, loc: ir.SourceLoc | None) -> str: ...
        def instance_name(self, name: str, loc: ir.SourceLoc | None) -> str: ...
        def extern_method(self, c: ir.ExternMethodCall, loc: ir.SourceLoc) -> None: ...
        def register_run(self, stmts: Sequence[ir.Stmt], start: int) -> list[ir.ExternMethodCall]: ...
        def register_accesses(self, calls: list[ir.ExternMethodCall], zero_on_skip: dict[str, str] | None = None) -> None: ...
        def register_run_defines(self, run: list[ir.ExternMethodCall], names: set[str]) -> set[str]: ...
        def extern_function(self, c: ir.ExternFunctionCall, loc: ir.SourceLoc) -> None: ...
        def emit(self, r: Ref, loc: ir.SourceLoc) -> None: ...
        def _invalidate_union_siblings(self, header_expr: ir.Expr, r: HeaderSlots) -> None: ...
