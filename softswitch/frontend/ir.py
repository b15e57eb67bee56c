"""The typed intermediate representation (IR) that the front end produces and every later pass consumes.

The front end (preprocess → parse → resolve/check) turns a P4_16 v1model program into one `Program`.
The executor (`softswitch.runtime`) lowers it to closures; `softswitch.p4runtime` derives P4Info from it.
All nodes are frozen dataclasses with slots; nothing here changes after the checker returns.

Conventions (the contract with the executor and the P4Info generator)
--------------------------------------------------------------------
Locations
    Every declaration, statement and expression has `loc: SourceLoc(file, line, col)`, 1-based, naming the
    original file (after `#include` expansion).

Types
    * `BitType(width, signed)`: `bit<W>` is `signed=False`, `int<W>` is `signed=True`. Typedefs are resolved
      away (`typedef bit<32> ip4_t` becomes `BitType(32, False)`; the typedef's name is lost in the IR, but
      `Field.type_name` / `Param.type_name` keep the type name as written, for information).
    * `IntType()` is P4's arbitrary-precision `int`. After checking it appears only on `Constant`s in places
      where P4 keeps it: shift amounts, and `const int` declarations in `Program.constants`.
      Everywhere else int literals are implicitly cast to the width of the other operand / the target.
    * Named types (`HeaderType`, `StructType`, `HeaderUnionType`, `EnumType`) are embedded by value with their
      ordered fields; equality is structural. `HeaderStackType(element, size)`.
    * `EnumType.underlying` is a `BitType` for serializable enums (`enum bit<8> Op {...}`), with `values`
      giving each member's integer value in member order; it is None for plain enums (then members have no
      numeric value; the executor may number them in declaration order).
    * `ErrorType()`; its constants are `ErrorConst(name)`. `Program.errors` lists every error name in
      BMv2's numbering order (core.p4's first: NoError=0, PacketTooShort=1, ...), so `Program.error_code()`.
    * `ExternType(name, type_args)`, e.g. `register<bit<64>>` is `ExternType("register", (BitType(64),))`;
      `packet_in`/`packet_out` params are `ExternType("packet_in", ())`.
    * `TableApplyResultType(table)` is the type of `t.apply()`; `ActionEnumType(table, actions)` the type of
      `t.apply().action_run`.

Values
    * `Constant.value` is the mathematical value inside the type's range: `bit<W>` in [0, 2**W),
      `int<W>` in [-2**(W-1), 2**(W-1)). Constant expressions (including `const` declarations and `#define`s)
      are folded to one `Constant` / `BoolConst` with width. Runtime values should follow the same rule.
    * Arithmetic `+ - *` and shifts wrap modulo 2**W (two's complement for int<W>); `|+| |-|` saturate;
      `/ %` appear only with a constant right operand (v1model rejects the rest); `++` concatenates (result width
      is the sum, signedness of the left operand); comparisons of int<W> are signed.
    * Casts are explicit `Cast(expr, type)` nodes. The checker adds them for P4's implicit conversions
      (int literals: folded into the Constant; a serializable enum value used as its underlying bit<W>:
      a `Cast`), so an executor can assume both operands of a binary op have the same type, except shifts
      (right operand any unsigned bit<W> or a non-negative IntType Constant) and `++`.
      `==`/`!=` compare any two values of one type (bit, bool, enum, error, header, struct); `< <= > >=`
      only bit<W>/int<W>; `&& || !` only bool.
    * `stack.size` is folded to a bit<32> Constant; `for` loops (constant bounds only) are unrolled into
      consecutive `Block`s with the loop variable folded to a Constant in each.

Names
    * Every name is resolved. `VarRef(name, kind, type)`: `kind` tells locals (`LOCAL`), parser/control
      parameters (`BLOCK_PARAM`), action parameters (`ACTION_PARAM`, with their direction on the `Action`)
      and function parameters (`FUNCTION_PARAM`) apart. Within one parser, control, function or top-level
      action, every `LOCAL` name is unique and differs from the block's parameter names: the checker renames
      a shadowing declaration to `name__N` (action parameters keep their names; they live per call).
    * `hdr.kvp.opcode` is `Member(Member(VarRef("hdr"), "kvp"), "opcode")`, each node typed.
    * Parser/control/table/action/extern-instance references use *qualified names* as P4Info needs them:
      objects declared inside a control/parser are `Control.local` (`MyIngress.kv_index`); top-level objects keep
      their bare name (`NoAction`). An `@name("x")` annotation replaces the local part (`MyIngress.x`), and
      `@name(".x")` makes it absolute (`x`), as p4c does.

L-values
    The left of `Assign` and any `out`/`inout` argument is one of: `VarRef`, `Member`, `Slice` (of an
    l-value), `StackElement` (constant or run-time index), `StackLast`, and in parsers `StackNext`.
    `Slice(expr, hi, lo)` has constant `hi >= lo` (Python ints); its type is `bit<hi-lo+1>`.
    Writes to `in` parameters and to action data (directionless) parameters are rejected by the checker.

Calls
    * `ExternMethodCall(target, extern, method, args, directions, type_args)`: `target` is an
      `ExternInstanceRef` (a register, counter, ... declared in the program) or a `VarRef` of `ExternType`
      (`packet`, the `packet_in`/`packet_out` parameter). `directions[i]` is the `Direction` of `args[i]`;
      every parameter has its argument (named arguments are put in parameter order). A list `{a, b}`
      passed where a struct is expected (`digest<T>(r, {a, b})`) arrives as a `StructInit` of that struct.
    * `ExternFunctionCall(name, args, directions, type_args)` for v1model/core functions: `mark_to_drop`,
      `digest` (type_args[0] the struct type), `hash`, `random`, `verify`, `verify_checksum`, ..., `log_msg`.
    * `HeaderMethodCall(header, method)` for `isValid()/setValid()/setInvalid()` (also on header unions for
      `isValid`); `StackMethodCall(stack, method, count)` for `push_front/pop_front`.
    * `TableApply(table)` applies a table; `.hit`/`.miss` are `TableHitMiss(apply, "hit"|"miss")`;
      `switch (t.apply().action_run)` is `Switch(ActionRun(apply), cases)` whose labels are action qualified
      names.
    * `ActionCall(action, args, directions)` calls an action directly (from apply or another action).
    * `FunctionCall(function, args, directions)` calls a top-level function.

Declarations
    `Program.constants` are the top-level `const`s (their uses are already folded in place; constants
    declared inside a block are folded and not listed). Control- and parser-level variables are in
    `Control.locals` / `Parser.locals`; variables declared inside bodies are `VarDecl` statements in place.
    Every declaration keeps its annotations (`@name`, `@id`, `@brief`, ...) as `Annotation`s.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# ---- locations and annotations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A 1-based position in an original source file (before `#include` expansion)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_LOC = SourceLoc("<builtin>", 0, 0)


@dataclass(frozen=True, slots=True)
class Annotation:
    """`@name(args)`: `values` are the parsed arguments (str for string literals, int, bool, or the raw token
    text for anything else); `body` is the text between the parentheses as written."""

    name: str
    values: tuple[str | int | bool, ...] = ()
    body: str = ""
    loc: SourceLoc = NO_LOC


def find_annotation(annotations: tuple[Annotation, ...], name: str) -> Annotation | None:
    """The first annotation called `name`, or None."""
    for a in annotations:
        if a.name == name:
            return a
    return None


# ---- types ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BitType:
    """`bit<W>` (signed=False) or `int<W>` (signed=True)."""

    width: int
    signed: bool = False

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


@dataclass(frozen=True, slots=True)
class IntType:
    """P4's arbitrary-precision compile-time `int`."""

    def __str__(self) -> str:
        return "int"


@dataclass(frozen=True, slots=True)
class BoolType:
    def __str__(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class StringType:
    """The type of a string literal (only `log_msg` and annotations use them)."""

    def __str__(self) -> str:
        return "string"


@dataclass(frozen=True, slots=True)
class VoidType:
    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True, slots=True)
class VarbitType:
    """`varbit<N>`: declared for completeness; the checker rejects it as unsupported."""

    max_width: int

    def __str__(self) -> str:
        return f"varbit<{self.max_width}>"


@dataclass(frozen=True, slots=True)
class ErrorType:
    def __str__(self) -> str:
        return "error"


@dataclass(frozen=True, slots=True)
class MatchKindType:
    def __str__(self) -> str:
        return "match_kind"


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a header, struct or header union, in declaration order."""

    name: str
    type: Type
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC
    type_name: str | None = None
    """The typedef / named type written in the source, if any (P4Info's `type_name` for user types)."""


@dataclass(frozen=True, slots=True)
class HeaderType:
    name: str
    fields: tuple[Field, ...]
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def __str__(self) -> str:
        return self.name

    @property
    def width(self) -> int:
        """Total width in bits of the fields (bit<W>, int<W>, bool, serializable enums)."""
        return sum(bit_width(f.type) for f in self.fields)

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True, slots=True)
class StructType:
    name: str
    fields: tuple[Field, ...]
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def __str__(self) -> str:
        return self.name

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True, slots=True)
class HeaderUnionType:
    name: str
    fields: tuple[Field, ...]
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def __str__(self) -> str:
        return self.name

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True, slots=True)
class HeaderStackType:
    """`H[size]`."""

    element: HeaderType
    size: int

    def __str__(self) -> str:
        return f"{self.element.name}[{self.size}]"


@dataclass(frozen=True, slots=True)
class EnumType:
    """`enum E {A, B}` (underlying None) or serializable `enum bit<8> E {A = 1, B = 2}`."""

    name: str
    members: tuple[str, ...]
    underlying: BitType | None = None
    values: tuple[int, ...] | None = None
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def __str__(self) -> str:
        return self.name

    def value_of(self, member: str) -> int:
        """The member's integer value (its declaration index for a plain enum)."""
        i = self.members.index(member)
        return self.values[i] if self.values is not None else i


@dataclass(frozen=True, slots=True)
class ExternType:
    """An extern object type with its type arguments: `register<bit<32>>`, `counter`, `packet_in`, ..."""

    name: str
    type_args: tuple[Type, ...] = ()

    def __str__(self) -> str:
        if self.type_args:
            return f"{self.name}<{', '.join(map(str, self.type_args))}>"
        return self.name


@dataclass(frozen=True, slots=True)
class TupleType:
    """The type of a list expression `{a, b}` (hash inputs, digest data, select keys)."""

    elements: tuple[Type, ...]

    def __str__(self) -> str:
        return f"tuple<{', '.join(map(str, self.elements))}>"


@dataclass(frozen=True, slots=True)
class TableApplyResultType:
    table: str

    def __str__(self) -> str:
        return f"apply_result({self.table})"


@dataclass(frozen=True, slots=True)
class ActionEnumType:
    table: str
    actions: tuple[str, ...]

    def __str__(self) -> str:
        return f"action_list({self.table})"


Type = (
    BitType | IntType | BoolType | StringType | VoidType | VarbitType | ErrorType | MatchKindType |
    HeaderType | StructType | HeaderUnionType | HeaderStackType | EnumType | ExternType | TupleType |
    TableApplyResultType | ActionEnumType
)
def bit_width(t: Type) -> int:
    """Bits a value of `t` occupies on the wire or in P4Runtime: bit<W>/int<W>, bool (1), a serializable enum
    (its underlying width), a header (its fields). Raises TypeError for any other type."""
    if isinstance(t, BitType):
        return t.width
    if isinstance(t, BoolType):
        return 1
    if isinstance(t, EnumType) and t.underlying is not None:
        return t.underlying.width
    if isinstance(t, HeaderType):
        return t.width
    raise TypeError(f"type {t} has no bit width")



NamedType = (
    HeaderType | StructType | HeaderUnionType | EnumType
)


# ---- expressions ----------------------------------------------------------------------------------------


class VarKind(enum.Enum):
    LOCAL = "local"
    """A variable declared in a parser, control, action, state, apply block or function body."""
    BLOCK_PARAM = "block_param"
    """A parameter of the enclosing parser or control (`hdr`, `meta`, `standard_metadata`, `packet`)."""
    ACTION_PARAM = "action_param"
    FUNCTION_PARAM = "function_param"


class Direction(enum.Enum):
    NONE = ""
    """Directionless: action data (set by the control plane) or a constructor/compile-time argument."""
    IN = "in"
    OUT = "out"
    INOUT = "inout"


@dataclass(frozen=True, slots=True)
class Constant:
    value: int
    type: BitType | IntType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class BoolConst:
    value: bool
    type: BoolType = BoolType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StringConst:
    value: str
    type: StringType = StringType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class EnumMember:
    """`Op.GET`; for a serializable enum `type.value_of(member)` gives the number."""

    type: EnumType
    member: str
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ErrorConst:
    """`error.NoMatch`; `Program.error_code(name)` gives its number."""

    name: str
    type: ErrorType = ErrorType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class VarRef:
    name: str
    kind: VarKind
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ExternInstanceRef:
    """A reference to a declared extern instance, by its qualified name (see `Program.instance`)."""

    name: str
    type: ExternType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Member:
    """Field access on a header, struct or header union (`hdr.kvp`, `hdr.kvp.opcode`)."""

    expr: Expr
    member: str
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Slice:
    """`expr[hi:lo]`, bits hi..lo inclusive; hi and lo are constants with hi >= lo."""

    expr: Expr
    hi: int
    lo: int
    type: BitType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StackElement:
    """`stack[index]`; `index` is a Constant or a bit<W> expression."""

    stack: Expr
    index: Expr
    type: HeaderType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StackNext:
    """`stack.next` (parser only: the element at nextIndex)."""

    stack: Expr
    type: HeaderType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StackLast:
    """`stack.last` (the element at nextIndex - 1)."""

    stack: Expr
    type: HeaderType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StackLastIndex:
    """`stack.lastIndex` (nextIndex - 1, bit<32>)."""

    stack: Expr
    type: BitType = BitType(32)
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class UnaryOp:
    """`op` is one of "-", "~", "!"."""

    op: str
    operand: Expr
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class BinaryOp:
    """`op` is one of + - * / % |+| |-| << >> & | ^ ++ == != < <= > >= && ||."""

    op: str
    left: Expr
    right: Expr
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Cast:
    expr: Expr
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Mux:
    """`cond ? then : else_`."""

    cond: Expr
    then: Expr
    else_: Expr
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ListExpr:
    """`{a, b, c}` used as a tuple (hash/digest data, select keys)."""

    items: tuple[Expr, ...]
    type: TupleType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StructInit:
    """A list or `{f = e, ...}` expression assigned to a struct/header: `values` in the type's field order."""

    values: tuple[Expr, ...]
    type: StructType | HeaderType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class HeaderMethodCall:
    """`h.isValid()` (type bool), `h.setValid()`, `h.setInvalid()` (type void)."""

    header: Expr
    method: str
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class StackMethodCall:
    """`stack.push_front(count)` / `stack.pop_front(count)`."""

    stack: Expr
    method: str
    count: int
    type: VoidType = VoidType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ExternMethodCall:
    """`target.method(args)` on an extern instance or a packet_in/packet_out parameter.

    `extern` is the extern type name ("register", "packet_in", ...). `type_args` holds explicit or inferred type
    arguments of generic methods (`packet.lookahead<T>()` has `type_args == (T,)`).
    """

    target: Expr
    extern: str
    method: str
    args: tuple[Expr, ...]
    directions: tuple[Direction, ...]
    type: Type
    type_args: tuple[Type, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ExternFunctionCall:
    """A core/v1model function (`mark_to_drop`, `digest`, `hash`, `verify`, `update_checksum`, ...)."""

    name: str
    args: tuple[Expr, ...]
    directions: tuple[Direction, ...]
    type: Type
    type_args: tuple[Type, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A call of a top-level P4 function (`Program.functions`)."""

    function: str
    args: tuple[Expr, ...]
    directions: tuple[Direction, ...]
    type: Type
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ActionCall:
    """A direct call of an action by its qualified name; `args` cover all its parameters in order, a
    directionless parameter being passed like `in` (its `directions` entry is `Direction.IN`)."""

    action: str
    args: tuple[Expr, ...]
    directions: tuple[Direction, ...]
    type: VoidType = VoidType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class TableApply:
    """`t.apply()` with `table` the table's qualified name."""

    table: str
    type: TableApplyResultType
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class TableHitMiss:
    """`t.apply().hit` / `t.apply().miss` (applies the table, then tests the result)."""

    apply: TableApply
    which: str
    type: BoolType = BoolType()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ActionRun:
    """`t.apply().action_run`, only as the expression of a `switch`."""

    apply: TableApply
    type: ActionEnumType
    loc: SourceLoc = NO_LOC


Expr = (
    Constant | BoolConst | StringConst | EnumMember | ErrorConst | VarRef | ExternInstanceRef |
    Member | Slice | StackElement | StackNext | StackLast | StackLastIndex | UnaryOp | BinaryOp |
    Cast | Mux | ListExpr | StructInit | HeaderMethodCall | StackMethodCall | ExternMethodCall |
    ExternFunctionCall | FunctionCall | ActionCall | TableApply | TableHitMiss | ActionRun
)


# ---- statements -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VarDecl:
    """A local variable; `init` None means uninitialised (BMv2 reads such values as 0)."""

    name: str
    type: Type
    init: Expr | None = None
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Assign:
    lhs: Expr
    rhs: Expr
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class CallStmt:
    """A call used as a statement (extern/header/stack method, extern function, action, function, t.apply())."""

    call: Expr
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Block:
    stmts: tuple[Stmt, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Block
    else_: Block | None = None
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class SwitchCase:
    """`labels` are action qualified names (for `action_run`) or Constant/EnumMember expressions; `None` in
    labels is `default`. Fall-through labels (`a: b: {...}`) are merged into one case."""

    labels: tuple[str | Expr | None, ...]
    body: Block
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Switch:
    expr: Expr
    cases: tuple[SwitchCase, ...]
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Exit:
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None = None
    loc: SourceLoc = NO_LOC


Stmt = (
    VarDecl | Assign | CallStmt | Block | If | Switch | Exit | Return
)


# ---- parsers --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeysetExact:
    value: Expr
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class KeysetMask:
    """`value &&& mask`."""

    value: Expr
    mask: Expr
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class KeysetRange:
    """`low .. high`, inclusive."""

    low: Expr
    high: Expr
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class KeysetDefault:
    """`default` or `_`: matches anything."""

    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class KeysetValueSet:
    """A `value_set` instance by qualified name (`Program.instance`)."""

    value_set: str
    loc: SourceLoc = NO_LOC


Keyset = (
    KeysetExact | KeysetMask | KeysetRange | KeysetDefault | KeysetValueSet
)


@dataclass(frozen=True, slots=True)
class SelectCase:
    """One case of a select; `keysets` has one element per select key (a `default` covers all keys)."""

    keysets: tuple[Keyset, ...]
    next_state: str
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Goto:
    """`transition s;` — "accept" and "reject" are the final states."""

    state: str
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Select:
    keys: tuple[Expr, ...]
    cases: tuple[SelectCase, ...]
    loc: SourceLoc = NO_LOC


Transition = (
    Goto | Select
)


@dataclass(frozen=True, slots=True)
class ParserState:
    name: str
    body: Block
    transition: Transition
    """A state without a `transition` statement goes to reject (P4_16), represented as `Goto("reject")`."""
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


# ---- controls, actions, tables --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: Type
    direction: Direction
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC
    type_name: str | None = None
    """The typedef / named type written in the source, if any."""


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    """The name as declared."""
    qualified_name: str
    """`Control.action` (or `@name`-derived) — the P4Info name; bare for top-level actions like `NoAction`."""
    params: tuple[Param, ...]
    body: Block
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    @property
    def data_params(self) -> tuple[Param, ...]:
        """Directionless parameters: the action data the control plane supplies."""
        return tuple(p for p in self.params if p.direction is Direction.NONE)


@dataclass(frozen=True, slots=True)
class ActionRef:
    """An action named in a table: in `actions` (args empty), as `default_action`, or in a const entry.

    `args` are the action-data arguments (folded Constants, in `Action.data_params` order).
    `annotations` carry `@tableonly` / `@defaultonly` written in the actions list.
    """

    action: str
    args: tuple[Expr, ...] = ()
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class TableKey:
    expr: Expr
    match_kind: str
    """"exact", "lpm", "ternary", "range", "optional" or "selector"."""
    name: str
    """The P4Info key-field name: the `@name` annotation if present, else the expression as written
    (`hdr.kvp.prefix_hash`, `meta.x[15:0]`, `hdr.ipv4.isValid()`)."""
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class TableConstEntry:
    """One of `const entries`: a keyset per key (KeysetDefault for `_`/`default`)."""

    keysets: tuple[Keyset, ...]
    action: ActionRef
    priority: int | None = None
    """Explicit `priority = N` if given; otherwise entries earlier in the list win."""
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    qualified_name: str
    keys: tuple[TableKey, ...]
    actions: tuple[ActionRef, ...]
    default_action: ActionRef
    """`NoAction` with loc NO_LOC when the program gives none (p4c's default); NoAction is then also in
    `actions` (appended with a synthetic `@defaultonly` annotation if the program did not list it)."""
    default_action_const: bool = False
    size: int | None = None
    entries: tuple[TableConstEntry, ...] = ()
    entries_const: bool = True
    counters: str | None = None
    """Qualified name of the `direct_counter` instance bound by `counters = ...`."""
    meters: str | None = None
    """Qualified name of the `direct_meter` instance bound by `meters = ...`."""
    support_timeout: bool = False
    implementation: str | None = None
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ExternInstance:
    """A declared extern object: `register<bit<32>>(4096) slots;`, `counter(1024, CounterType.packets) c;`,
    `direct_counter(CounterType.packets_and_bytes) dc;`, `meter(...)`, `direct_meter<T>(...)`, `value_set`.

    `args` are the folded constructor arguments, coerced to the constructor's parameter types (a bit<32>
    Constant for sizes; EnumMember for CounterType/MeterType). `size` is the first integer argument for
    register/counter/meter/value_set. A `value_set<bit<W>>(N)` is `ExternType("value_set", (bit<W>,))`.
    """

    name: str
    qualified_name: str
    type: ExternType
    args: tuple[Expr, ...] = ()
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    @property
    def size(self) -> int | None:
        for a in self.args:
            if isinstance(a, Constant):
                return a.value
        return None


@dataclass(frozen=True, slots=True)
class Parser:
    name: str
    params: tuple[Param, ...]
    locals: tuple[VarDecl, ...]
    instances: tuple[ExternInstance, ...]
    states: tuple[ParserState, ...]
    """In declaration order; `start` is among them."""
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def state(self, name: str) -> ParserState | None:
        return next((s for s in self.states if s.name == name), None)


@dataclass(frozen=True, slots=True)
class Control:
    name: str
    params: tuple[Param, ...]
    locals: tuple[VarDecl, ...]
    """Control-level variables, initialised (or zeroed) each time the control runs."""
    instances: tuple[ExternInstance, ...]
    actions: tuple[Action, ...]
    tables: tuple[Table, ...]
    apply: Block
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC

    def table(self, name: str) -> Table | None:
        """By qualified name, declared name, or the last part of the qualified name (`@name`)."""
        return next((t for t in self.tables
                     if name in (t.qualified_name, t.name, t.qualified_name.rsplit(".", 1)[-1])), None)

    def action(self, name: str) -> Action | None:
        """By qualified name, declared name, or the last part of the qualified name (`@name`)."""
        return next((a for a in self.actions
                     if name in (a.qualified_name, a.name, a.qualified_name.rsplit(".", 1)[-1])), None)


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    return_type: Type
    params: tuple[Param, ...]
    body: Block
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class ConstDecl:
    """A top-level (or control-local) `const T NAME = value;`, `value` folded."""

    name: str
    type: Type
    value: Expr
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class Digest:
    """A `digest<T>(receiver, data)` call site's type: one entry per distinct T (P4Info's digest list)."""

    name: str
    """The struct type's name, as P4Info names the digest."""
    type: StructType
    annotations: tuple[Annotation, ...] = ()
    loc: SourceLoc = NO_LOC


@dataclass(frozen=True, slots=True)
class PackageInstance:
    """`V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;`"""

    type_name: str
    name: str
    slots: tuple[tuple[str, str], ...]
    """(slot name, parser/control name) in the package's parameter order: ("p", "MyParser"), ("vr", ...),
    ("ig", ...), ("eg", ...), ("ck", ...), ("dep", ...)."""
    loc: SourceLoc = NO_LOC

    def slot(self, name: str) -> str | None:
        return dict(self.slots).get(name)


V1SWITCH_SLOTS = ("p", "vr", "ig", "eg", "ck", "dep")
"""V1Switch's parameter names, in order: parser, verifyChecksum, ingress, egress, computeChecksum, deparser."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A warning about a program that loads (p4c would warn too), e.g. an explicit `transition reject`."""

    loc: SourceLoc
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: warning: {self.message}"


@dataclass(frozen=True, slots=True)
class Program:
    types: tuple[NamedType, ...]
    """Every named type, declaration order, built-ins (standard_metadata_t, CounterType, ...) included."""
    constants: tuple[ConstDecl, ...]
    errors: tuple[str, ...]
    """All error names in numbering order (core.p4's 7 first)."""
    match_kinds: tuple[str, ...]
    actions: tuple[Action, ...]
    """Top-level actions (`NoAction` is always there)."""
    functions: tuple[Function, ...]
    parsers: tuple[Parser, ...]
    controls: tuple[Control, ...]
    instances: tuple[ExternInstance, ...]
    """Top-level extern instances (register/counter/... declared outside any control)."""
    digests: tuple[Digest, ...]
    main: PackageInstance
    controller_headers: tuple[tuple[str, HeaderType], ...] = ()
    """("packet_in" | "packet_out", header type) for each `@controller_header(...)` header."""
    files: tuple[str, ...] = field(default=())
    """The source files read, main file first."""
    warnings: tuple[Diagnostic, ...] = ()
    """What p4c for BMv2 would warn about; the program still loads."""

    # -- look-ups (linear; programs are small)
    def type(self, name: str) -> NamedType | None:
        return next((t for t in self.types if t.name == name), None)

    def constant(self, name: str) -> ConstDecl | None:
        return next((c for c in self.constants if c.name == name), None)

    def error_code(self, name: str) -> int:
        return self.errors.index(name)

    def parser(self, name: str) -> Parser | None:
        return next((p for p in self.parsers if p.name == name), None)

    def control(self, name: str) -> Control | None:
        return next((c for c in self.controls if c.name == name), None)

    def all_actions(self) -> tuple[Action, ...]:
        """Top-level and control-local actions."""
        return self.actions + tuple(a for c in self.controls for a in c.actions)

    def action(self, qualified_name: str) -> Action | None:
        return next((a for a in self.all_actions() if a.qualified_name == qualified_name), None)

    def all_tables(self) -> tuple[Table, ...]:
        return tuple(t for c in self.controls for t in c.tables)

    def table(self, qualified_name: str) -> Table | None:
        return next((t for t in self.all_tables() if t.qualified_name == qualified_name), None)

    def all_instances(self) -> tuple[ExternInstance, ...]:
        """Top-level, parser-local and control-local extern instances."""
        return (self.instances + tuple(i for p in self.parsers for i in p.instances)
                + tuple(i for c in self.controls for i in c.instances))

    def instance(self, qualified_name: str) -> ExternInstance | None:
        return next((i for i in self.all_instances() if i.qualified_name == qualified_name), None)

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)

    def controller_header(self, kind: str) -> HeaderType | None:
        """The header annotated `@controller_header(kind)` ("packet_in" / "packet_out")."""
        return dict(self.controller_headers).get(kind)
