"""The untyped syntax tree the parser builds from lark's parse tree: what was written, names unresolved.

Every node is a frozen dataclass carrying `loc` (original file:line:col). The checker turns it into the
typed IR (`ir.py`). Annotations reuse `ir.Annotation`.
"""

from __future__ import annotations

from dataclasses import dataclass

from softswitch.frontend.ir import Annotation, SourceLoc

Annots = tuple[Annotation, ...]


# ---- type references ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BaseTypeRef:
    """bool, error, string, void, match_kind, int, bit<W>, int<W>, varbit<W>; `width` None for unsized."""

    kind: str
    width: Node | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class TypeName:
    name: str
    args: tuple[TypeRef, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class StackTypeRef:
    element: TypeName
    size: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class TupleTypeRef:
    elements: tuple[TypeRef, ...]
    loc: SourceLoc


TypeRef = BaseTypeRef | TypeName | StackTypeRef | TupleTypeRef


# ---- expressions ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class IntLit:
    value: int
    width: int | None
    signed: bool
    text: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class BoolLit:
    value: bool
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class StrLit:
    value: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class Name:
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class TypeMember:
    """`Type.member` (enum members; `error.X` has type_name "error")."""

    type_name: str
    member: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class MemberExpr:
    expr: Node
    member: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class IndexExpr:
    expr: Node
    index: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SliceExpr:
    expr: Node
    hi: Node
    lo: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class CallExpr:
    callee: Node
    type_args: tuple[TypeRef, ...]
    args: tuple[Node, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ConstructorCall:
    type: TypeName
    args: tuple[Node, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class NamedArg:
    name: str
    value: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class DontCare:
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class CastExpr:
    type: TypeRef
    expr: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class MuxExpr:
    cond: Node
    then: Node
    else_: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Node, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class StructLit:
    fields: tuple[tuple[str, Node], ...]
    loc: SourceLoc


# ---- keysets --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class KsExact:
    value: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KsMask:
    value: Node
    mask: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KsRange:
    low: Node
    high: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KsDefault:
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KsTuple:
    items: tuple[Node, ...]
    loc: SourceLoc


# ---- statements -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AssignStmt:
    lhs: Node
    rhs: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class CallStmt:
    call: CallExpr
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class IfStmt:
    cond: Node
    then: Node
    else_: Node | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class BlockStmt:
    stmts: tuple[Node, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SwitchCaseA:
    label: Node | None
    """Name / IntLit / TypeMember, or None for `default`."""
    body: BlockStmt | None
    """None for a fall-through label."""
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SwitchStmt:
    expr: Node
    cases: tuple[SwitchCaseA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ForStmt:
    """`for (init; cond; updates) body`; the checker unrolls it (bounds must be compile-time constants)."""

    init: tuple[Node, ...]
    """VarDeclA (the loop variables) or AssignStmt."""
    cond: Node
    updates: tuple[AssignStmt, ...]
    body: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ForInStmt:
    """`for (T v in low .. high) body`, inclusive bounds; unrolled like ForStmt."""

    type: TypeRef
    name: str
    low: Node
    high: Node
    body: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ExitStmt:
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ReturnStmt:
    value: Node | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class EmptyStmt:
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class VarDeclA:
    annotations: Annots
    type: TypeRef
    name: str
    init: Node | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ConstDeclA:
    annotations: Annots
    type: TypeRef
    name: str
    value: Node
    loc: SourceLoc


# ---- declarations ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TypedefA:
    annotations: Annots
    type: TypeRef
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class FieldA:
    annotations: Annots
    type: TypeRef
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class StructLikeA:
    """header, header_union or struct (`kind`)."""

    kind: str
    annotations: Annots
    name: str
    fields: tuple[FieldA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class EnumA:
    annotations: Annots
    name: str
    members: tuple[tuple[str, Node | None, SourceLoc], ...]
    width: Node | None
    """The underlying bit width expression of a serializable enum, else None."""
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ErrorA:
    names: tuple[tuple[str, SourceLoc], ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class MatchKindA:
    names: tuple[tuple[str, SourceLoc], ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ParamA:
    annotations: Annots
    direction: str
    type: TypeRef
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ActionA:
    annotations: Annots
    name: str
    params: tuple[ParamA, ...]
    body: BlockStmt
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class FunctionA:
    annotations: Annots
    return_type: TypeRef
    name: str
    params: tuple[ParamA, ...]
    body: BlockStmt
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class InstantiationA:
    annotations: Annots
    type: TypeRef
    args: tuple[Node, ...]
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ValueSetA:
    annotations: Annots
    type: TypeRef
    size: Node
    name: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class GotoA:
    state: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SelectCaseA:
    keyset: Node
    state: str
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SelectA:
    keys: tuple[Node, ...]
    cases: tuple[SelectCaseA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class StateA:
    annotations: Annots
    name: str
    stmts: tuple[Node, ...]
    transition: GotoA | SelectA | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ParserA:
    annotations: Annots
    name: str
    params: tuple[ParamA, ...]
    locals: tuple[Node, ...]
    states: tuple[StateA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KeyElementA:
    expr: Node
    match_kind: str
    annotations: Annots
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ActionRefA:
    annotations: Annots
    name: str
    args: tuple[Node, ...] | None
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class EntryA:
    keyset: Node
    action: Node
    annotations: Annots
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class KeyPropA:
    annotations: Annots
    elements: tuple[KeyElementA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ActionsPropA:
    annotations: Annots
    actions: tuple[ActionRefA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class EntriesPropA:
    annotations: Annots
    const: bool
    entries: tuple[EntryA, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class SimplePropA:
    annotations: Annots
    const: bool
    name: str
    value: Node
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class TableA:
    annotations: Annots
    name: str
    properties: tuple[Node, ...]
    loc: SourceLoc


@dataclass(frozen=True, slots=True)
class ControlA:
    annotations: Annots
    name: str
    params: tuple[ParamA, ...]
    locals: tuple[Node, ...]
    apply: BlockStmt
    loc: SourceLoc
    ctor_params: tuple[ParamA, ...] = ()
    """`control C(...)(bit<32> size)`: compile-time values given where C is instantiated."""


@dataclass(frozen=True, slots=True)
class ProgramA:
    declarations: tuple[Node, ...]


Node = object
"""Any AST node (the checker dispatches on the class)."""
