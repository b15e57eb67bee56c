"""Resolve names and check types: turn the AST into the typed IR (`ir.Program`).

One pass over the declarations in order (P4 declares before use). Every expression gets its type, int
literals take the width of their context, constant expressions are folded, and anything outside the
supported subset or refused by p4c for BMv2 raises a located `P4Error`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

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
    ErrorType,
    IntType,
    SourceLoc,
    VarKind,
    VoidType,
)

# ---- symbols (checker-internal) -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Var:
    name: str
    """The unique IR name."""
    kind: VarKind
    type: ir.Type
    direction: Direction = Direction.INOUT
    """Parameters keep their direction; `in` and directionless ones are read-only."""


@dataclass(frozen=True, slots=True)
class _Const:
    value: ir.Expr


@dataclass(frozen=True, slots=True)
class _Instance:
    instance: ir.ExternInstance


@dataclass(frozen=True, slots=True)
class _ValueSet:
    qualified_name: str
    type: ir.Type


@dataclass(frozen=True, slots=True)
class _ActionSym:
    action: ir.Action


@dataclass(frozen=True, slots=True)
class _TableSym:
    table: ir.Table


@dataclass(frozen=True, slots=True)
class _FunctionSym:
    function: ir.Function


@dataclass(frozen=True, slots=True)
class _BlockSym:
    kind: str  # "parser" | "control"
    name: str
    params: tuple[ir.Param, ...]
    loc: SourceLoc


_Sym = _Var | _Const | _Instance | _ValueSet | _ActionSym | _TableSym | _FunctionSym | _BlockSym


class _Scope:
    """Nested name scopes; lookups walk outwards."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.names: dict[str, _Sym] = {}

    def lookup(self, name: str) -> _Sym | None:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def declare(self, name: str, sym: _Sym, loc: SourceLoc) -> None:
        if name in self.names:
            raise P4Error(loc, f"redeclaration of '{name}'")
        self.names[name] = sym


@dataclass
class _Ctx:
    """Where a body is being checked: which block, which scope, and the names already used in it."""

    scope: _Scope
    block_kind: str  # "parser" | "control" | "function"
    block_name: str
    used_names: set[str]
    in_action: bool = False
    in_state: bool = False
    return_type: ir.Type | None = None
    calls: list[tuple[str, SourceLoc]] = field(default_factory=list)

    def child(self, **changes) -> _Ctx:
        c = dataclasses.replace(self, scope=_Scope(self.scope), **changes)
        c.used_names = self.used_names
        c.calls = self.calls
        return c


_ARITH = {"+", "-", "*", "|+|", "|-|", "&", "|", "^"}
_MAX_UNROLL = 256
"""Most iterations a for loop may unroll to."""
_COMPARE = {"<", "<=", ">", ">="}
_LVALUE_TYPES = (ir.VarRef, ir.Member, ir.Slice, ir.StackElement, ir.StackLast, ir.StackNext)


def _is_const(e: ir.Expr) -> bool:
    return isinstance(e, Constant | BoolConst | ir.EnumMember | ir.ErrorConst | ir.StringConst)


def _at(e: ir.Expr, loc: SourceLoc) -> ir.Expr:
    """A folded constant re-located to where it is used."""
    return dataclasses.replace(e, loc=loc) if _is_const(e) else e


class Checker:
    """Checks one program; create one per program (it accumulates the program's declarations)."""

    def __init__(self, files: tuple[str, ...] = ()) -> None:
        self.files = files
        self.types: dict[str, ir.Type] = {t.name: t for t in B.BUILTIN_TYPES}
        self.type_decls: list[ir.NamedType] = list(B.BUILTIN_TYPES)
        self.errors: list[str] = list(B.CORE_ERRORS)
        self.match_kinds: list[str] = list(B.CORE_MATCH_KINDS + B.V1MODEL_MATCH_KINDS)
        self.globals = _Scope()
        self.globals.names["NoAction"] = _ActionSym(B.NO_ACTION)
        self.constants: list[ir.ConstDecl] = []
        self.actions: list[ir.Action] = [B.NO_ACTION]
        self.functions: list[ir.Function] = []
        self.parsers: list[ir.Parser] = []
        self.controls: list[ir.Control] = []
        self.instances: list[ir.ExternInstance] = []
        self.digests: dict[str, ir.Digest] = {}
        self.controller_headers: list[tuple[str, ir.HeaderType]] = []
        self.main: ir.PackageInstance | None = None
        self.block_calls: dict[str, list[tuple[str, SourceLoc]]] = {}
        self.warnings: list[ir.Diagnostic] = []

    # ==== program ========================================================================================

    def check(self, prog: A.ProgramA) -> ir.Program:
        for d in prog.declarations:
            self._declaration(d)
        if self.main is None:
            loc = SourceLoc(self.files[0] if self.files else "<input>", 1, 1)
            raise P4Error(loc, "no package instantiation: expected 'V1Switch(...) main;'")
        self._check_egress_only_calls()
        self._check_unique_control_plane_names()
        return ir.Program(
            types=tuple(self.type_decls), constants=tuple(self.constants), errors=tuple(self.errors),
            match_kinds=tuple(self.match_kinds), actions=tuple(self.actions), functions=tuple(self.functions),
            parsers=tuple(self.parsers), controls=tuple(self.controls), instances=tuple(self.instances),
            digests=tuple(self.digests.values()), main=self.main,
            controller_headers=tuple(self.controller_headers), files=self.files, warnings=tuple(self.warnings))

    def _declaration(self, d: A.Node) -> None:
        if isinstance(d, A.ConstDeclA):
            self.constants.append(self._const_decl(d, self.globals, None))
        elif isinstance(d, A.TypedefA):
            self._typedef(d)
        elif isinstance(d, A.StructLikeA):
            self._struct_like(d)
        elif isinstance(d, A.EnumA):
            self._enum(d)
        elif isinstance(d, A.ErrorA):
            for name, loc in d.names:
                if name in self.errors:
                    raise P4Error(loc, f"redeclaration of error '{name}'")
                self.errors.append(name)
        elif isinstance(d, A.MatchKindA):
            for name, loc in d.names:
                raise P4Error(loc, f"unsupported construct 'match_kind {name}' (only v1model's match kinds)")
        elif isinstance(d, A.ActionA):
            ctx = _Ctx(_Scope(self.globals), "control", "", set())
            action = self._action(d, ctx, "")
            self.actions.append(action)
            self.globals.declare(d.name, _ActionSym(action), d.loc)
        elif isinstance(d, A.FunctionA):
            self._function(d)
        elif isinstance(d, A.ParserA):
            self._parser(d)
        elif isinstance(d, A.ControlA):
            self._control(d)
        elif isinstance(d, A.InstantiationA):
            if isinstance(d.type, A.TypeName) and d.type.name == "V1Switch":
                self._package(d)
            else:
                inst = self._instantiation(d, self.globals, "")
                self.instances.append(inst)
        else:
            raise unsupported(getattr(d, "loc", ir.NO_LOC), type(d).__name__)

    # ==== types ==========================================================================================

    def _type(self, t: A.TypeRef) -> ir.Type:
        if isinstance(t, A.BaseTypeRef):
            simple = {"bool": BoolType(), "error": ErrorType(), "string": ir.StringType(), "void": VoidType(),
                      "match_kind": ir.MatchKindType(), "int": IntType()}
            if t.kind in simple:
                return simple[t.kind]
            if t.kind == "varbit":
                raise unsupported(t.loc, "varbit")
            assert t.width is not None
            w = self._const_int(t.width, self.globals, "a type width")
            if w <= 0 or (t.kind == "signed" and w < 1):
                raise P4Error(t.loc, f"invalid width {w}")
            return BitType(w, t.kind == "signed")
        if isinstance(t, A.TypeName):
            if t.name in B.EXTERNS or t.name in B.UNSUPPORTED_EXTERNS:
                if t.name in B.UNSUPPORTED_EXTERNS:
                    raise unsupported(t.loc, t.name)
                spec = B.EXTERNS[t.name]
                args = tuple(self._type(a) for a in t.args)
                if len(args) != len(spec.type_params) and not (t.name == "register" and len(args) == 2):
                    raise P4Error(t.loc, f"{t.name} expects {len(spec.type_params)} type argument(s), "
                                         f"got {len(args)}")
                return ir.ExternType(t.name, args)
            if t.args:
                raise unsupported(t.loc, f"generic type {t.name}<...>")
            found = self.types.get(t.name)
            if found is None:
                raise P4Error(t.loc, f"undeclared type '{t.name}'")
            return found
        if isinstance(t, A.StackTypeRef):
            elem = self._type(t.element)
            if not isinstance(elem, ir.HeaderType):
                raise P4Error(t.loc, f"header stack of non-header type {elem}")
            size = self._const_int(t.size, self.globals, "a header stack size")
            if size <= 0:
                raise P4Error(t.loc, "header stack size must be positive")
            return ir.HeaderStackType(elem, size)
        if isinstance(t, A.TupleTypeRef):
            return ir.TupleType(tuple(self._type(e) for e in t.elements))
        raise AssertionError(t)

    @staticmethod
    def _type_name(t: A.TypeRef) -> str | None:
        return t.name if isinstance(t, A.TypeName) else None

    def _declare_type(self, name: str, t: ir.Type, loc: SourceLoc) -> None:
        if name in self.types or self.globals.lookup(name) is not None:
            raise P4Error(loc, f"redeclaration of '{name}'")
        self.types[name] = t

    def _typedef(self, d: A.TypedefA) -> None:
        t = self._type(d.type)
        if isinstance(t, ir.ExternType):
            raise unsupported(d.loc, "typedef of an extern type")
        self._declare_type(d.name, t, d.loc)

    def _struct_like(self, d: A.StructLikeA) -> None:
        fields: list[ir.Field] = []
        seen: set[str] = set()
        for f in d.fields:
            if f.name in seen:
                raise P4Error(f.loc, f"duplicate field '{f.name}'")
            seen.add(f.name)
            t = self._type(f.type)
            if d.kind == "header":
                ok = isinstance(t, BitType | BoolType) or (isinstance(t, ir.EnumType) and t.underlying)
                if not ok:
                    raise P4Error(f.loc, f"header field '{f.name}' has type {t}; headers hold bit<W>, int<W>,"
                                         " bool or serializable enums")
            elif d.kind == "header_union" and not isinstance(t, ir.HeaderType):
                raise P4Error(f.loc, f"header_union field '{f.name}' must be a header")
            elif isinstance(t, ir.ExternType | VoidType | IntType | ir.StringType):
                raise P4Error(f.loc, f"struct field '{f.name}' cannot have type {t}")
            fields.append(ir.Field(f.name, t, f.annotations, f.loc, self._type_name(f.type)))
        cls = {"header": ir.HeaderType, "struct": ir.StructType, "header_union": ir.HeaderUnionType}[d.kind]
        t = cls(d.name, tuple(fields), d.annotations, d.loc)
        self._declare_type(d.name, t, d.loc)
        self.type_decls.append(t)
        ch = ir.find_annotation(d.annotations, "controller_header")
        if ch is not None:
            if d.kind != "header" or not ch.values or ch.values[0] not in ("packet_in", "packet_out"):
                raise P4Error(ch.loc, '@controller_header takes "packet_in" or "packet_out" on a header')
            self.controller_headers.append((str(ch.values[0]), t))  # type: ignore[arg-type]

    def _enum(self, d: A.EnumA) -> None:
        names = [m[0] for m in d.members]
        for i, (name, _v, loc) in enumerate(d.members):
            if name in names[:i]:
                raise P4Error(loc, f"duplicate enum member '{name}'")
        if d.width is None:
            t = ir.EnumType(d.name, tuple(names), None, None, d.annotations, d.loc)
        else:
            w = self._const_int(d.width, self.globals, "an enum width")
            under = BitType(w)
            values = []
            for name, v, loc in d.members:
                if v is None:
                    raise P4Error(loc, f"serializable enum member '{name}' needs a value")
                value = self._const_int(v, self.globals, "an enum value")
                if not 0 <= value <= under.max:
                    raise P4Error(loc, f"enum value {value} does not fit in {under}")
                values.append(value)
            t = ir.EnumType(d.name, tuple(names), under, tuple(values), d.annotations, d.loc)
        self._declare_type(d.name, t, d.loc)
        self.type_decls.append(t)

    # ==== constants ======================================================================================

    def _const_ctx(self, scope: _Scope) -> _Ctx:
        return _Ctx(scope, "function", "", set())

    def _const_int(self, n: A.Node, scope: _Scope, what: str) -> int:
        e = self._expr(n, self._const_ctx(scope))
        if not isinstance(e, Constant):
            raise P4Error(n.loc, f"{what} must be a compile-time integer constant")  # type: ignore[attr-defined]
        return e.value

    def _const_decl(self, d: A.ConstDeclA, scope: _Scope, ctx: _Ctx | None) -> ir.ConstDecl:
        t = self._type(d.type)
        c = ctx or self._const_ctx(scope)
        value = self._coerce(self._expr(d.value, c, t), t, d.value.loc)  # type: ignore[attr-defined]
        if not (_is_const(value) or (isinstance(value, ir.StructInit) and all(_is_const(v) for v in value.values))):
            raise P4Error(d.loc, f"initializer of const '{d.name}' is not a compile-time constant")
        scope.declare(d.name, _Const(value), d.loc)
        if d.name in self.types:
            raise P4Error(d.loc, f"redeclaration of '{d.name}'")
        return ir.ConstDecl(d.name, t, value, d.annotations, d.loc)

    # ==== qualified names ================================================================================

    @staticmethod
    def _qualify(local: str, annotations: tuple[ir.Annotation, ...], prefix: str) -> str:
        a = ir.find_annotation(annotations, "name")
        if a is not None and a.values and isinstance(a.values[0], str):
            n = a.values[0]
            if n.startswith("."):
                return n[1:]
            local = n
        return f"{prefix}.{local}" if prefix else local

    # ==== extern instances ===============================================================================

    def _instantiation(self, d: A.InstantiationA, scope: _Scope, prefix: str) -> ir.ExternInstance:
        t = self._type(d.type)
        if not isinstance(t, ir.ExternType):
            if isinstance(d.type, A.TypeName) and isinstance(scope.lookup(d.type.name), _BlockSym):
                raise unsupported(d.loc, f"instantiation of {d.type.name} inside a block")
            raise P4Error(d.loc, f"cannot instantiate type {t}")
        spec = B.EXTERNS[t.name]
        if spec.constructor is None:
            raise P4Error(d.loc, f"{t.name} cannot be instantiated")
        if t.name == "register":
            elem = t.type_args[0]
            if not isinstance(elem, BitType):
                raise P4Error(d.loc, f"register element type must be bit<W> or int<W>, not {elem} "
                                     "(p4c: only registers with bit or int types are supported)")
            if len(t.type_args) == 2 and not isinstance(t.type_args[1], BitType):
                raise P4Error(d.loc, f"register index type must be bit<W>, not {t.type_args[1]}")
        if t.name == "direct_meter" and not isinstance(t.type_args[0], BitType):
            raise P4Error(d.loc, "direct_meter result type must be bit<W>")
        ctx = self._const_ctx(scope)
        params = spec.constructor.params
        if len(d.args) != len(params):
            raise P4Error(d.loc, f"{t.name} constructor takes {len(params)} argument(s), got {len(d.args)}")
        args = []
        for a, p in zip(d.args, params, strict=True):
            assert not isinstance(p.type, str)
            e = self._coerce(self._expr(a, ctx, p.type), p.type, a.loc)  # type: ignore[arg-type,attr-defined]
            if not _is_const(e):
                raise P4Error(a.loc, f"{t.name} constructor argument must be a compile-time constant")  # type: ignore[attr-defined]
            args.append(e)
        if t.name in ("register", "counter", "meter") and isinstance(args[0], Constant) and args[0].value <= 0:
            raise P4Error(d.args[0].loc, f"{t.name} size must be positive")  # type: ignore[attr-defined]
        inst = ir.ExternInstance(d.name, self._qualify(d.name, d.annotations, prefix), t, tuple(args),
                                 d.annotations, d.loc)
        scope.declare(d.name, _Instance(inst), d.loc)
        return inst

    # ==== parameters =====================================================================================

    def _params(self, params: tuple[A.ParamA, ...], allow_directionless: bool) -> tuple[ir.Param, ...]:
        out = []
        seen: set[str] = set()
        for p in params:
            if p.name in seen:
                raise P4Error(p.loc, f"duplicate parameter '{p.name}'")
            seen.add(p.name)
            t = self._type(p.type)
            direction = Direction(p.direction)
            if direction is Direction.NONE and not allow_directionless and not isinstance(t, ir.ExternType):
                raise P4Error(p.loc, f"parameter '{p.name}' needs a direction (in, out or inout)")
            if isinstance(t, VoidType | IntType | ir.StringType):
                raise P4Error(p.loc, f"parameter '{p.name}' cannot have type {t}")
            out.append(ir.Param(p.name, t, direction, p.annotations, p.loc, self._type_name(p.type)))
        return tuple(out)

    # ==== actions and functions ==========================================================================

    def _action(self, d: A.ActionA, ctx: _Ctx, prefix: str) -> ir.Action:
        params = self._params(d.params, allow_directionless=True)
        seen_data = False
        for p in params:
            if p.direction is Direction.NONE:
                seen_data = True
                if not isinstance(p.type, BitType | BoolType) and not (
                        isinstance(p.type, ir.EnumType) and p.type.underlying):
                    raise P4Error(p.loc, f"action data parameter '{p.name}' must be bit<W>, int<W>, bool or a "
                                         f"serializable enum, not {p.type}")
            elif seen_data:
                raise P4Error(p.loc, "directional action parameters must come before directionless ones")
        actx = ctx.child(in_action=True)
        for p in params:
            actx.scope.declare(p.name, _Var(p.name, VarKind.ACTION_PARAM, p.type, p.direction), p.loc)
        body = self._block(d.body, actx, new_scope=False)
        return ir.Action(d.name, self._qualify(d.name, d.annotations, prefix), params, body, d.annotations, d.loc)

    def _function(self, d: A.FunctionA) -> None:
        rtype = self._type(d.return_type)
        params = self._params(d.params, allow_directionless=False)
        used = {p.name for p in params}
        ctx = _Ctx(_Scope(self.globals), "function", d.name, used, return_type=rtype)
        for p in params:
            ctx.scope.declare(p.name, _Var(p.name, VarKind.FUNCTION_PARAM, p.type, p.direction), p.loc)
        body = self._block(d.body, ctx, new_scope=False)
        if not isinstance(rtype, VoidType) and not _always_returns(body):
            raise P4Error(d.loc, f"function '{d.name}' does not return a value on every path")
        fn = ir.Function(d.name, rtype, params, body, d.annotations, d.loc)
        self.functions.append(fn)
        self.globals.declare(d.name, _FunctionSym(fn), d.loc)

    # ==== parsers ========================================================================================

    def _block_params(self, d: A.ParserA | A.ControlA, ctx: _Ctx) -> tuple[ir.Param, ...]:
        params = self._params(d.params, allow_directionless=False)
        for p in params:
            ctx.scope.declare(p.name, _Var(p.name, VarKind.BLOCK_PARAM, p.type, p.direction), p.loc)
            ctx.used_names.add(p.name)
        return params

    def _parser(self, d: A.ParserA) -> None:
        ctx = _Ctx(_Scope(self.globals), "parser", d.name, set())
        self.block_calls[d.name] = ctx.calls
        params = self._block_params(d, ctx)
        locals_: list[ir.VarDecl] = []
        instances: list[ir.ExternInstance] = []
        for loc_decl in d.locals:
            if isinstance(loc_decl, A.ConstDeclA):
                self._const_decl(loc_decl, ctx.scope, ctx)
            elif isinstance(loc_decl, A.VarDeclA):
                locals_.append(self._var_decl(loc_decl, ctx))
            elif isinstance(loc_decl, A.ValueSetA):
                t = self._type(loc_decl.type)
                if not isinstance(t, BitType):
                    raise unsupported(loc_decl.loc, f"value_set of {t}")
                size = self._const_int(loc_decl.size, ctx.scope, "a value_set size")
                q = self._qualify(loc_decl.name, loc_decl.annotations, d.name)
                inst = ir.ExternInstance(loc_decl.name, q, ir.ExternType("value_set", (t,)),
                                         (Constant(size, BitType(32), loc_decl.loc),), loc_decl.annotations,
                                         loc_decl.loc)
                instances.append(inst)
                ctx.scope.declare(loc_decl.name, _ValueSet(q, t), loc_decl.loc)
            elif isinstance(loc_decl, A.InstantiationA):
                instances.append(self._instantiation(loc_decl, ctx.scope, d.name))
            else:
                raise unsupported(getattr(loc_decl, "loc", d.loc), type(loc_decl).__name__)
        names = [s.name for s in d.states]
        for i, s in enumerate(d.states):
            if s.name in names[:i]:
                raise P4Error(s.loc, f"duplicate state '{s.name}'")
            if s.name in ("accept", "reject"):
                raise P4Error(s.loc, f"state '{s.name}' is predefined")
        if "start" not in names:
            raise P4Error(d.loc, f"parser '{d.name}' has no 'start' state")
        targets = set(names) | {"accept", "reject"}
        states = tuple(self._state(s, ctx, targets) for s in d.states)
        p = ir.Parser(d.name, params, tuple(locals_), tuple(instances), states, d.annotations, d.loc)
        self.parsers.append(p)
        self.globals.declare(d.name, _BlockSym("parser", d.name, params, d.loc), d.loc)

    def _state(self, s: A.StateA, pctx: _Ctx, targets: set[str]) -> ir.ParserState:
        ctx = pctx.child(in_state=True)
        stmts: list[ir.Stmt] = []
        for st in s.stmts:
            stmts.extend(self._stmt(st, ctx))
        body = ir.Block(tuple(stmts), s.loc)
        t = s.transition
        if t is None:
            transition: ir.Transition = ir.Goto("reject", s.loc)
        elif isinstance(t, A.GotoA):
            if t.state not in targets:
                raise P4Error(t.loc, f"undeclared state '{t.state}'")
            if t.state == "reject":
                self.warnings.append(ir.Diagnostic(t.loc, "explicit transition to reject: p4c warns that "
                                                          "BMv2 does not support it"))
            transition = ir.Goto(t.state, t.loc)
        else:
            transition = self._select(t, ctx, targets)
        return ir.ParserState(s.name, body, transition, s.annotations, s.loc)

    def _select(self, t: A.SelectA, ctx: _Ctx, targets: set[str]) -> ir.Select:
        keys = tuple(self._expr(k, ctx) for k in t.keys)
        for k, a in zip(keys, t.keys, strict=True):
            if not isinstance(k.type, BitType | BoolType | ir.EnumType | ErrorType):
                raise P4Error(a.loc, f"select key of type {k.type}")  # type: ignore[attr-defined]
            if isinstance(k.type, IntType):
                raise P4Error(a.loc, "select key needs a width")  # type: ignore[attr-defined]
        cases = []
        for c in t.cases:
            if c.state not in targets:
                raise P4Error(c.loc, f"undeclared state '{c.state}'")
            keysets = self._keysets(c.keyset, [k.type for k in keys], ctx, allow_value_set=True)
            cases.append(ir.SelectCase(keysets, c.state, c.loc))
        return ir.Select(keys, tuple(cases), t.loc)

    def _keysets(self, ks: A.Node, key_types: list[ir.Type], ctx: _Ctx,
                 allow_value_set: bool) -> tuple[ir.Keyset, ...]:
        loc: SourceLoc = ks.loc  # type: ignore[attr-defined]
        if isinstance(ks, A.KsDefault):
            return tuple(ir.KeysetDefault(loc) for _ in key_types)
        items = ks.items if isinstance(ks, A.KsTuple) else (ks,)
        if len(items) != len(key_types):
            raise P4Error(loc, f"keyset has {len(items)} element(s) but there are {len(key_types)} key(s)")
        return tuple(self._keyset(i, t, ctx, allow_value_set) for i, t in zip(items, key_types, strict=True))

    def _keyset(self, ks: A.Node, t: ir.Type, ctx: _Ctx, allow_value_set: bool) -> ir.Keyset:
        loc: SourceLoc = ks.loc  # type: ignore[attr-defined]
        if isinstance(ks, A.KsDefault):
            return ir.KeysetDefault(loc)
        if isinstance(ks, A.KsExact):
            if isinstance(ks.value, A.Name) and allow_value_set:
                sym = ctx.scope.lookup(ks.value.name)
                if isinstance(sym, _ValueSet):
                    if sym.type != t:
                        raise P4Error(loc, f"type mismatch: expected {t}, got value_set of {sym.type}")
                    return ir.KeysetValueSet(sym.qualified_name, loc)
            return ir.KeysetExact(self._const_of(ks.value, t, ctx, "a keyset value"), loc)
        if isinstance(ks, A.KsMask):
            if not isinstance(t, BitType):
                raise P4Error(loc, f"mask keyset on a key of type {t}")
            return ir.KeysetMask(self._const_of(ks.value, t, ctx, "a keyset value"),
                                 self._const_of(ks.mask, t, ctx, "a keyset mask"), loc)
        if isinstance(ks, A.KsRange):
            if not isinstance(t, BitType):
                raise P4Error(loc, f"range keyset on a key of type {t}")
            return ir.KeysetRange(self._const_of(ks.low, t, ctx, "a range bound"),
                                  self._const_of(ks.high, t, ctx, "a range bound"), loc)
        if isinstance(ks, A.KsTuple):
            raise P4Error(loc, "nested tuple keyset")
        raise AssertionError(ks)

    def _const_of(self, n: A.Node, t: ir.Type, ctx: _Ctx, what: str) -> ir.Expr:
        e = self._coerce(self._expr(n, ctx, t), t, n.loc)  # type: ignore[attr-defined]
        if not _is_const(e):
            raise P4Error(n.loc, f"{what} must be a compile-time constant")  # type: ignore[attr-defined]
        return e

    # ==== controls =======================================================================================

    def _control(self, d: A.ControlA) -> None:
        ctx = _Ctx(_Scope(self.globals), "control", d.name, set())
        self.block_calls[d.name] = ctx.calls
        params = self._block_params(d, ctx)
        locals_: list[ir.VarDecl] = []
        instances: list[ir.ExternInstance] = []
        actions: list[ir.Action] = []
        tables: list[ir.Table] = []
        for loc_decl in d.locals:
            if isinstance(loc_decl, A.ConstDeclA):
                self._const_decl(loc_decl, ctx.scope, ctx)
            elif isinstance(loc_decl, A.VarDeclA):
                locals_.append(self._var_decl(loc_decl, ctx))
            elif isinstance(loc_decl, A.InstantiationA):
                instances.append(self._instantiation(loc_decl, ctx.scope, d.name))
            elif isinstance(loc_decl, A.ActionA):
                a = self._action(loc_decl, ctx, d.name)
                actions.append(a)
                ctx.scope.declare(loc_decl.name, _ActionSym(a), loc_decl.loc)
            elif isinstance(loc_decl, A.TableA):
                t = self._table(loc_decl, ctx, d.name, instances)
                tables.append(t)
                ctx.scope.declare(loc_decl.name, _TableSym(t), loc_decl.loc)
            else:
                raise unsupported(getattr(loc_decl, "loc", d.loc), type(loc_decl).__name__)
        apply_block = self._block(d.apply, ctx.child())
        _check_tables_applied_once(apply_block)
        c = ir.Control(d.name, params, tuple(locals_), tuple(instances), tuple(actions), tuple(tables),
                       apply_block, d.annotations, d.loc)
        self.controls.append(c)
        self.globals.declare(d.name, _BlockSym("control", d.name, params, d.loc), d.loc)

    # ==== tables =========================================================================================

    def _table(self, d: A.TableA, ctx: _Ctx, prefix: str, instances: list[ir.ExternInstance]) -> ir.Table:
        keys: list[ir.TableKey] = []
        actions: list[ir.ActionRef] = []
        default: ir.ActionRef | None = None
        default_const = False
        size: int | None = None
        entries: tuple[ir.TableConstEntry, ...] = ()
        entries_const = True
        counters = meters = None
        support_timeout = False
        seen: set[str] = set()
        tctx = ctx.child()
        pending: list[A.Node] = []
        for prop in d.properties:
            pname = {A.KeyPropA: "key", A.ActionsPropA: "actions", A.EntriesPropA: "entries"}.get(
                type(prop), getattr(prop, "name", ""))
            if pname in seen:
                raise P4Error(prop.loc, f"duplicate table property '{pname}'")  # type: ignore[attr-defined]
            seen.add(pname)
            if isinstance(prop, A.KeyPropA):
                keys = [self._key(k, tctx) for k in prop.elements]
            elif isinstance(prop, A.ActionsPropA):
                for r in prop.actions:
                    sym = ctx.scope.lookup(r.name)
                    if not isinstance(sym, _ActionSym):
                        raise P4Error(r.loc, f"undeclared action '{r.name}'")
                    if r.args:
                        raise unsupported(r.loc, "arguments in a table's actions list")
                    if any(a.action == sym.action.qualified_name for a in actions):
                        raise P4Error(r.loc, f"action '{r.name}' listed twice")
                    actions.append(ir.ActionRef(sym.action.qualified_name, (), r.annotations, r.loc))
            else:
                pending.append(prop)
        if "actions" not in seen:
            raise P4Error(d.loc, f"table '{d.name}' has no 'actions' property")
        lpm = [k for k in keys if k.match_kind == "lpm"]
        if len(lpm) > 1:
            raise P4Error(lpm[1].loc, f"multiple lpm keys in table '{d.name}' (p4c: not supported on BMv2)")
        listed = {a.action for a in actions}
        for prop in pending:
            if isinstance(prop, A.EntriesPropA):
                entries = tuple(self._entry(e, keys, tctx, listed) for e in prop.entries)
                entries_const = prop.const
                continue
            assert isinstance(prop, A.SimplePropA)
            if prop.name == "default_action":
                default = self._action_call_ref(prop.value, tctx, listed, "default_action")
                default_const = prop.const
            elif prop.const:
                raise P4Error(prop.loc, f"'const' is not allowed on table property '{prop.name}'")
            elif prop.name == "size":
                size = self._const_int(prop.value, ctx.scope, "table size")
                if size <= 0:
                    raise P4Error(prop.loc, "table size must be positive")
            elif prop.name in ("counters", "meters"):
                want = "direct_counter" if prop.name == "counters" else "direct_meter"
                sym = ctx.scope.lookup(prop.value.name) if isinstance(prop.value, A.Name) else None
                if not isinstance(sym, _Instance) or sym.instance.type.name != want:
                    raise P4Error(prop.loc, f"'{prop.name}' must name a {want} instance of this control")
                q = sym.instance.qualified_name
                for other in self._tables_so_far(ctx):
                    if q in (other.counters, other.meters):
                        raise P4Error(prop.loc, f"{want} '{prop.value.name}' is already attached to table "
                                                f"'{other.name}'")
                if prop.name == "counters":
                    counters = q
                else:
                    meters = q
            elif prop.name == "support_timeout":
                v = self._expr(prop.value, tctx, BoolType())
                if not isinstance(v, BoolConst):
                    raise P4Error(prop.loc, "support_timeout must be true or false")
                support_timeout = v.value
            elif prop.name == "implementation":
                raise unsupported(prop.loc, "table implementation (action profiles/selectors)")
            else:
                raise P4Error(prop.loc, f"unknown table property '{prop.name}'")
        if default is None:
            # As p4c does: the default is NoAction, added to the actions as @defaultonly if not listed.
            if "NoAction" not in listed:
                actions.append(ir.ActionRef("NoAction", (), (ir.Annotation("defaultonly"),), ir.NO_LOC))
            default = ir.ActionRef("NoAction", (), (), ir.NO_LOC)
        elif default.action not in listed:
            raise P4Error(default.loc, f"default action '{default.action}' is not in the table's actions list")
        else:
            ref = next(a for a in actions if a.action == default.action)
            if ir.find_annotation(ref.annotations, "tableonly"):
                raise P4Error(default.loc, f"action '{default.action}' is @tableonly and cannot be the default")
        return ir.Table(d.name, self._qualify(d.name, d.annotations, prefix), tuple(keys), tuple(actions),
                        default, default_const, size, entries, entries_const, counters, meters, support_timeout,
                        None, d.annotations, d.loc)

    @staticmethod
    def _tables_so_far(ctx: _Ctx) -> list[ir.Table]:
        return [s.table for s in ctx.scope.names.values() if isinstance(s, _TableSym)]

    def _key(self, k: A.KeyElementA, ctx: _Ctx) -> ir.TableKey:
        e = self._expr(k.expr, ctx)
        if not isinstance(e.type, BitType | BoolType) and not (
                isinstance(e.type, ir.EnumType) and e.type.underlying is not None) and \
                not isinstance(e.type, ErrorType):
            raise P4Error(k.loc, f"table key of type {e.type}")
        if k.match_kind not in self.match_kinds:
            raise P4Error(k.loc, f"unknown match kind '{k.match_kind}'")
        if k.match_kind == "selector":
            raise unsupported(k.loc, "selector match kind (action selectors)")
        a = ir.find_annotation(k.annotations, "name")
        name = a.values[0] if a is not None and a.values and isinstance(a.values[0], str) else _expr_text(k.expr)
        return ir.TableKey(e, k.match_kind, str(name), k.annotations, k.loc)

    def _action_call_ref(self, n: A.Node, ctx: _Ctx, listed: set[str], what: str) -> ir.ActionRef:
        """`a` or `a(args)` naming a listed action with constant action-data arguments."""
        loc: SourceLoc = n.loc  # type: ignore[attr-defined]
        if isinstance(n, A.Name):
            callee, args = n, ()
        elif isinstance(n, A.CallExpr) and isinstance(n.callee, A.Name) and not n.type_args:
            callee, args = n.callee, n.args
        else:
            raise P4Error(loc, f"{what} must be an action call")
        sym = ctx.scope.lookup(callee.name)
        if not isinstance(sym, _ActionSym):
            raise P4Error(callee.loc, f"undeclared action '{callee.name}'")
        action = sym.action
        if action.qualified_name not in listed:
            raise P4Error(loc, f"action '{callee.name}' in {what} is not in the table's actions list")
        directional = [p for p in action.params if p.direction is not Direction.NONE]
        if directional:
            raise unsupported(loc, f"{what} of an action with directional parameters")
        data = action.data_params
        if len(args) != len(data) and not (isinstance(n, A.Name) and not data):
            raise P4Error(loc, f"action '{callee.name}' takes {len(data)} argument(s), got {len(args)}")
        out = []
        for a, p in zip(self._named_args(args, data, loc), data, strict=True):
            out.append(self._const_of(a, p.type, ctx, "an action argument in " + what))
        return ir.ActionRef(action.qualified_name, tuple(out), (), loc)

    def _entry(self, e: A.EntryA, keys: list[ir.TableKey], ctx: _Ctx, listed: set[str]) -> ir.TableConstEntry:
        if not keys:
            raise P4Error(e.loc, "entries in a table without keys")
        keysets = self._keysets(e.keyset, [k.expr.type for k in keys], ctx, allow_value_set=False)
        for ks, k in zip(keysets, keys, strict=True):
            if k.match_kind == "exact" and not isinstance(ks, ir.KeysetExact):
                raise P4Error(e.loc, f"exact key '{k.name}' needs an exact value in entries")
        action = self._action_call_ref(e.action, ctx, listed, "an entry")
        pr = ir.find_annotation(e.annotations, "priority")
        priority = pr.values[0] if pr is not None and pr.values and isinstance(pr.values[0], int) else None
        return ir.TableConstEntry(keysets, action, priority, e.annotations, e.loc)

    # ==== package ========================================================================================

    def _package(self, d: A.InstantiationA) -> None:
        if self.main is not None:
            raise P4Error(d.loc, "more than one package instantiation")
        if d.name != "main":
            raise P4Error(d.loc, f"the V1Switch instance must be called 'main', not '{d.name}'")
        if len(d.args) != len(B.V1SWITCH_BLOCKS):
            raise P4Error(d.loc, f"V1Switch takes {len(B.V1SWITCH_BLOCKS)} blocks, got {len(d.args)}")
        slots = []
        for a, (slot, kind, nparams) in zip(d.args, B.V1SWITCH_BLOCKS, strict=True):
            if not isinstance(a, A.ConstructorCall) or a.args or a.type.args:
                raise P4Error(a.loc, f"V1Switch argument for '{slot}' must be Block()")  # type: ignore[attr-defined]
            sym = self.globals.lookup(a.type.name)
            if not isinstance(sym, _BlockSym):
                raise P4Error(a.loc, f"undeclared parser or control '{a.type.name}'")
            if sym.kind != kind or len(sym.params) != nparams:
                raise P4Error(a.loc, f"V1Switch slot '{slot}' needs a {kind} with {nparams} parameters, "
                                     f"got {sym.kind} '{sym.name}' with {len(sym.params)}")
            slots.append((slot, sym.name))
        self._check_package_types(d, dict(slots))
        self.main = ir.PackageInstance("V1Switch", d.name, tuple(slots), d.loc)

    def _check_package_types(self, d: A.InstantiationA, slots: dict[str, str]) -> None:
        """Every block must agree on the headers type H and metadata type M, as V1Switch<H, M> demands."""
        parser = next(p for p in self.parsers if p.name == slots["p"])
        expect = [("packet_in",), ("out",), ("inout",), ("inout",)]
        pdirs = [p.direction.value for p in parser.params]
        if not isinstance(parser.params[0].type, ir.ExternType) or parser.params[0].type.name != "packet_in" or \
                pdirs[1:] != [x[0] for x in expect[1:]]:
            raise P4Error(parser.loc, "the V1Switch parser needs (packet_in, out H, inout M, "
                                      "inout standard_metadata_t)")
        h, m = parser.params[1].type, parser.params[2].type
        if parser.params[3].type != B.STANDARD_METADATA:
            raise P4Error(parser.params[3].loc, "the parser's 4th parameter must be standard_metadata_t")
        for slot in ("vr", "ig", "eg", "ck", "dep"):
            c = next(x for x in self.controls if x.name == slots[slot])
            if slot == "dep":
                ok = isinstance(c.params[0].type, ir.ExternType) and c.params[0].type.name == "packet_out" \
                    and c.params[1].type == h
            else:
                ok = c.params[0].type == h and c.params[1].type == m and all(
                    p.direction is Direction.INOUT for p in c.params)
                if slot in ("ig", "eg"):
                    ok = ok and c.params[2].type == B.STANDARD_METADATA
            if not ok:
                raise P4Error(c.loc, f"control '{c.name}' does not have the parameters V1Switch expects for "
                                     f"slot '{slot}' (headers {h}, metadata {m})")

    def _check_unique_control_plane_names(self) -> None:
        """Tables, actions and extern instances get P4Info names; two objects must not share one."""
        seen: dict[str, SourceLoc] = {}
        objects = [(t.qualified_name, t.loc) for c in self.controls for t in c.tables]
        objects += [(a.qualified_name, a.loc) for a in self.actions[1:]]
        objects += [(a.qualified_name, a.loc) for c in self.controls for a in c.actions]
        objects += [(i.qualified_name, i.loc) for i in self.instances]
        objects += [(i.qualified_name, i.loc) for b in (*self.parsers, *self.controls) for i in b.instances]
        for name, loc in objects:
            if name in seen:
                first = seen[name]
                raise P4Error(loc, f"duplicate control-plane name '{name}' (also at {first})")
            seen[name] = loc

    def _check_egress_only_calls(self) -> None:
        assert self.main is not None
        for slot, block in self.main.slots:
            for name, loc in self.block_calls.get(block, []):
                if name in B.EGRESS_ONLY_FUNCTIONS and slot != "eg":
                    raise P4Error(loc, f"{name} may only be called in egress on BMv2")

    # ==== statements =====================================================================================

    def _block(self, b: A.Node, ctx: _Ctx, new_scope: bool = True) -> ir.Block:
        c = ctx.child() if new_scope else ctx
        stmts = b.stmts if isinstance(b, A.BlockStmt) else (b,)
        out: list[ir.Stmt] = []
        for s in stmts:
            out.extend(self._stmt(s, c))
        return ir.Block(tuple(out), b.loc)  # type: ignore[attr-defined]

    def _fresh(self, name: str, ctx: _Ctx) -> str:
        unique, n = name, 0
        while unique in ctx.used_names:
            n += 1
            unique = f"{name}__{n}"
        ctx.used_names.add(unique)
        return unique

    def _var_decl(self, d: A.VarDeclA, ctx: _Ctx) -> ir.VarDecl:
        t = self._type(d.type)
        if isinstance(t, ir.ExternType | VoidType | IntType | ir.StringType | ir.MatchKindType):
            raise P4Error(d.loc, f"variable '{d.name}' cannot have type {t}")
        init = None
        if d.init is not None:
            init = self._coerce(self._expr(d.init, ctx, t), t, d.init.loc)  # type: ignore[attr-defined]
        if d.name in ctx.scope.names:
            raise P4Error(d.loc, f"redeclaration of '{d.name}'")
        unique = self._fresh(d.name, ctx)
        ctx.scope.declare(d.name, _Var(unique, VarKind.LOCAL, t), d.loc)
        return ir.VarDecl(unique, t, init, d.annotations, d.loc)

    def _stmt(self, s: A.Node, ctx: _Ctx) -> list[ir.Stmt]:
        loc: SourceLoc = s.loc  # type: ignore[attr-defined]
        if isinstance(s, A.AssignStmt):
            lhs = self._expr(s.lhs, ctx)
            self._require_lvalue(lhs, s.lhs.loc, ctx)  # type: ignore[attr-defined]
            rhs = self._coerce(self._expr(s.rhs, ctx, lhs.type), lhs.type, s.rhs.loc)  # type: ignore[attr-defined]
            return [ir.Assign(lhs, rhs, loc)]
        if isinstance(s, A.CallStmt):
            call = self._expr(s.call, ctx, statement=True)
            return [ir.CallStmt(call, loc)]
        if isinstance(s, A.IfStmt):
            cond = self._coerce(self._expr(s.cond, ctx, BoolType()), BoolType(), s.cond.loc)  # type: ignore[attr-defined]
            then = self._block(s.then, ctx)
            else_ = self._block(s.else_, ctx) if s.else_ is not None else None
            return [ir.If(cond, then, else_, loc)]
        if isinstance(s, A.BlockStmt):
            return [self._block(s, ctx)]
        if isinstance(s, A.SwitchStmt):
            return [self._switch(s, ctx)]
        if isinstance(s, A.ExitStmt):
            if ctx.block_kind != "control":
                raise P4Error(loc, f"'exit' is not allowed in a {ctx.block_kind}")
            return [ir.Exit(loc)]
        if isinstance(s, A.ReturnStmt):
            if ctx.in_state:
                raise P4Error(loc, "'return' is not allowed in a parser state")
            value = None
            if ctx.block_kind == "function" and not isinstance(ctx.return_type, VoidType):
                if s.value is None:
                    raise P4Error(loc, "return needs a value")
                assert ctx.return_type is not None
                value = self._coerce(self._expr(s.value, ctx, ctx.return_type), ctx.return_type, loc)
            elif s.value is not None:
                raise P4Error(loc, "return with a value outside a function")
            return [ir.Return(value, loc)]
        if isinstance(s, A.VarDeclA):
            return [self._var_decl(s, ctx)]
        if isinstance(s, A.ConstDeclA):
            self._const_decl(s, ctx.scope, ctx)
            return []
        if isinstance(s, A.EmptyStmt):
            return []
        if isinstance(s, A.ForStmt | A.ForInStmt):
            return self._unroll(s, ctx)
        raise unsupported(loc, type(s).__name__)

    def _unroll(self, s: A.ForStmt | A.ForInStmt, ctx: _Ctx) -> list[ir.Stmt]:
        """Unroll a loop with compile-time bounds, as p4c does for BMv2: the loop variable is a constant in
        each copy of the body (so the body cannot assign it)."""
        loop_vars: dict[str, tuple[ir.Type, ir.Expr]] = {}
        if isinstance(s, A.ForInStmt):
            t = self._type(s.type)
            low = self._const_of(s.low, t, ctx, "a for-loop bound")
            high = self._const_of(s.high, t, ctx, "a for-loop bound")
            if not isinstance(low, Constant) or not isinstance(high, Constant):
                raise P4Error(s.loc, "for-loop bounds must be integers")
            values: list[ir.Expr] = [Constant(v, low.type, s.loc) for v in range(low.value, high.value + 1)]
            if len(values) > _MAX_UNROLL:
                raise P4Error(s.loc, f"for loop runs more than {_MAX_UNROLL} times")
            out: list[ir.Stmt] = []
            for v in values:
                body_ctx = ctx.child()
                body_ctx.scope.names[s.name] = _Const(v)
                out.append(self._block(s.body, body_ctx))
            return out
        for item in s.init:
            if not isinstance(item, A.VarDeclA):
                raise unsupported(item.loc, "for loop over a variable declared outside the loop")  # type: ignore[attr-defined]
            t = self._type(item.type)
            assert item.init is not None
            loop_vars[item.name] = (t, self._const_of(item.init, t, ctx, "a for-loop initial value"))
        out = []
        for _ in range(_MAX_UNROLL + 1):
            body_ctx = ctx.child()
            for name, (_t, v) in loop_vars.items():
                body_ctx.scope.names[name] = _Const(_at(v, s.loc))
            cond = self._expr(s.cond, body_ctx, BoolType())
            if not isinstance(cond, BoolConst):
                raise P4Error(s.cond.loc, "for-loop condition must be a compile-time constant "  # type: ignore[attr-defined]
                                          "(softswitch unrolls loops, as p4c does for BMv2)")
            if not cond.value:
                return out
            out.append(self._block(s.body, body_ctx))
            for upd in s.updates:
                if not isinstance(upd.lhs, A.Name) or upd.lhs.name not in loop_vars:
                    raise unsupported(upd.loc, "for-loop update of anything but a loop variable")
                t = loop_vars[upd.lhs.name][0]
                loop_vars[upd.lhs.name] = (t, self._const_of(upd.rhs, t, body_ctx, "a for-loop update"))
        raise P4Error(s.loc, f"for loop runs more than {_MAX_UNROLL} times")

    def _switch(self, s: A.SwitchStmt, ctx: _Ctx) -> ir.Switch:
        e = self._expr(s.expr, ctx)
        cases: list[ir.SwitchCase] = []
        pending: list[str | ir.Expr | None] = []
        seen: set[object] = set()
        for i, c in enumerate(s.cases):
            if isinstance(e, ir.ActionRun):
                if c.label is None:
                    label: str | ir.Expr | None = None
                elif isinstance(c.label, A.Name):
                    sym = ctx.scope.lookup(c.label.name)
                    if not isinstance(sym, _ActionSym) or sym.action.qualified_name not in e.type.actions:
                        raise P4Error(c.loc, f"'{c.label.name}' is not an action of table '{e.apply.table}'")
                    label = sym.action.qualified_name
                else:
                    raise P4Error(c.loc, "switch on action_run needs action names as labels")
            else:
                if not isinstance(e.type, BitType | ir.EnumType):
                    raise P4Error(s.expr.loc, f"cannot switch on a value of type {e.type}")  # type: ignore[attr-defined]
                label = None if c.label is None else self._const_of(c.label, e.type, ctx, "a switch label")
            key = label.value if isinstance(label, Constant) else (
                label.member if isinstance(label, ir.EnumMember) else label)
            if key in seen:
                raise P4Error(c.loc, "duplicate switch label")
            seen.add(key)
            if None in seen and label is not None:
                raise P4Error(c.loc, "'default' must be the last switch label")
            pending.append(label)
            if c.body is not None or i == len(s.cases) - 1:
                body = self._block(c.body, ctx) if c.body is not None else ir.Block((), c.loc)
                cases.append(ir.SwitchCase(tuple(pending), body, c.loc))
                pending = []
        return ir.Switch(e, tuple(cases), s.loc)

    def _require_lvalue(self, e: ir.Expr, loc: SourceLoc, ctx: _Ctx) -> None:
        root = e
        while not isinstance(root, ir.VarRef):
            if isinstance(root, ir.Member | ir.Slice):
                root = root.expr
            elif isinstance(root, ir.StackElement | ir.StackLast | ir.StackNext):
                root = root.stack
            else:
                raise P4Error(loc, "expression is not assignable (not an l-value)")
        if not isinstance(e, _LVALUE_TYPES):
            raise P4Error(loc, "expression is not assignable (not an l-value)")
        sym = ctx.scope.lookup(_source_name(root, ctx))
        direction = sym.direction if isinstance(sym, _Var) else Direction.INOUT
        if root.kind is not VarKind.LOCAL and direction in (Direction.IN, Direction.NONE):
            what = "action data parameter" if direction is Direction.NONE else "'in' parameter"
            raise P4Error(loc, f"cannot write to {what} '{root.name}'")

    # ==== expressions ====================================================================================

    def _expr(self, n: A.Node, ctx: _Ctx, expected: ir.Type | None = None, statement: bool = False) -> ir.Expr:
        method = getattr(self, "_e_" + type(n).__name__, None)
        if method is None:
            raise unsupported(n.loc, type(n).__name__)  # type: ignore[attr-defined]
        if isinstance(n, A.CallExpr):
            return self._e_CallExpr(n, ctx, expected, statement)
        return method(n, ctx, expected)

    def _e_IntLit(self, n: A.IntLit, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        if n.width is None:
            return Constant(n.value, IntType(), n.loc)
        t = BitType(n.width, n.signed)
        if n.width <= 0:
            raise P4Error(n.loc, f"invalid width in literal '{n.text}'")
        if n.value > ((1 << n.width) - 1):
            raise P4Error(n.loc, f"value of '{n.text}' does not fit in {t}")
        return Constant(wrap(n.value, t), t, n.loc)

    def _e_BoolLit(self, n: A.BoolLit, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        return BoolConst(n.value, loc=n.loc)

    def _e_StrLit(self, n: A.StrLit, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        return ir.StringConst(n.value, loc=n.loc)

    def _e_Name(self, n: A.Name, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        sym = ctx.scope.lookup(n.name)
        if sym is None:
            if n.name in B.FUNCTIONS:
                raise P4Error(n.loc, f"'{n.name}' is a function; call it")
            raise P4Error(n.loc, f"undeclared name '{n.name}'")
        if isinstance(sym, _Var):
            return ir.VarRef(sym.name, sym.kind, sym.type, n.loc)
        if isinstance(sym, _Const):
            return _at(sym.value, n.loc)
        if isinstance(sym, _Instance):
            return ir.ExternInstanceRef(sym.instance.qualified_name, sym.instance.type, n.loc)
        kind = {_ActionSym: "an action", _TableSym: "a table", _FunctionSym: "a function",
                _BlockSym: "a parser or control", _ValueSet: "a value_set"}.get(type(sym), "not a value")
        raise P4Error(n.loc, f"'{n.name}' is {kind}, not a value")

    def _e_TypeMember(self, n: A.TypeMember, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_MemberExpr(self, n: A.MemberExpr, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        if isinstance(n.expr, A.Name):
            sym = ctx.scope.lookup(n.expr.name)
            if isinstance(sym, _TableSym | _ActionSym | _BlockSym):
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
                raise P4Error(n.loc, f"{_kind(t)} {t.name} has no field '{n.member}'")
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

    def _table_by_qname(self, qname: str, ctx: _Ctx) -> ir.Table:
        s: _Scope | None = ctx.scope
        while s is not None:
            for sym in s.names.values():
                if isinstance(sym, _TableSym) and sym.table.qualified_name == qname:
                    return sym.table
            s = s.parent
        raise AssertionError(qname)

    def _e_IndexExpr(self, n: A.IndexExpr, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_SliceExpr(self, n: A.SliceExpr, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_Unary(self, n: A.Unary, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_Binary(self, n: A.Binary, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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
            t = BitType(a.type.width + b.type.width, a.type.signed)
            if isinstance(a, Constant) and isinstance(b, Constant):
                return fold_binary(op, a, b, t, n.loc)
            return ir.BinaryOp(op, a, b, t, n.loc)
        if isinstance(a.type, IntType) and isinstance(b.type, IntType) and isinstance(expected, BitType) \
                and op not in ("==", "!=") and op not in _COMPARE:
            a, b = self._coerce(a, expected, n.loc), self._coerce(b, expected, n.loc)
        a, b = self._unify(a, b, n.loc, op)
        t = a.type
        if op in ("==", "!="):
            if isinstance(t, ir.HeaderStackType | ir.ExternType | VoidType):
                raise P4Error(n.loc, f"cannot compare values of type {t}")
            if _is_const(a) and _is_const(b) and isinstance(a, Constant | BoolConst):
                return fold_binary(op, a, b, BoolType(), n.loc)
            if isinstance(a, ir.EnumMember) and isinstance(b, ir.EnumMember):
                return BoolConst((a.member == b.member) == (op == "=="), loc=n.loc)
            return ir.BinaryOp(op, a, b, BoolType(), n.loc)
        if not isinstance(t, BitType | IntType):
            raise P4Error(n.loc, f"'{op}' on values of type {t}")
        if op in _COMPARE:
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
        if op not in _ARITH and op not in ("/", "%"):
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
        return ir.BinaryOp(n.op, a, b, a.type, n.loc)

    def _e_CastExpr(self, n: A.CastExpr, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_MuxExpr(self, n: A.MuxExpr, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_ListLit(self, n: A.ListLit, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        if isinstance(expected, ir.StructType | ir.HeaderType):
            if len(n.items) != len(expected.fields):
                raise P4Error(n.loc, f"{_kind(expected)} {expected.name} has {len(expected.fields)} field(s), "
                                     f"the list has {len(n.items)}")
            vals = tuple(self._coerce(self._expr(i, ctx, f.type), f.type, i.loc)  # type: ignore[attr-defined]
                         for i, f in zip(n.items, expected.fields, strict=True))
            return ir.StructInit(vals, expected, n.loc)
        items = tuple(self._expr(i, ctx) for i in n.items)
        for i, e in zip(n.items, items, strict=True):
            if isinstance(e.type, IntType):
                raise P4Error(i.loc, "int literal in a list needs a width (e.g. 32w5)")  # type: ignore[attr-defined]
        return ir.ListExpr(items, ir.TupleType(tuple(e.type for e in items)), n.loc)

    def _e_StructLit(self, n: A.StructLit, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_ConstructorCall(self, n: A.ConstructorCall, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        raise unsupported(n.loc, f"constructor call {n.type.name}(...) in an expression")

    def _e_NamedArg(self, n: A.NamedArg, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
        raise P4Error(n.loc, "named argument outside a call")

    def _e_DontCare(self, n: A.DontCare, ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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

    def _e_CallExpr(self, n: A.CallExpr, ctx: _Ctx, expected: ir.Type | None, statement: bool = False) -> ir.Expr:
        callee = n.callee
        type_args = tuple(self._type(t) for t in n.type_args)
        if isinstance(callee, A.Name):
            sym = ctx.scope.lookup(callee.name)
            if sym is None and callee.name in B.FUNCTIONS:
                return self._extern_function(n, callee.name, type_args, ctx, expected)
            if isinstance(sym, _ActionSym):
                return self._action_call(n, sym.action, ctx)
            if isinstance(sym, _FunctionSym):
                return self._function_call(n, sym.function, ctx)
            if sym is None:
                raise P4Error(callee.loc, f"undeclared name '{callee.name}'")
            raise P4Error(callee.loc, f"'{callee.name}' is not callable")
        if isinstance(callee, A.MemberExpr):
            method = callee.member
            if isinstance(callee.expr, A.Name):
                sym = ctx.scope.lookup(callee.expr.name)
                if isinstance(sym, _TableSym):
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
                if isinstance(sym, _BlockSym | _ActionSym):
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
                   ctx: _Ctx, what: str) -> tuple[tuple[ir.Expr, ...], tuple[Direction, ...]]:
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
            e = checked[i]
            assert e is not None
            t = concrete(p)
            if t is None:
                raise P4Error(a.loc, f"cannot infer the width of argument '{p.name}' of {what}; "  # type: ignore[attr-defined]
                                     "give the literal a width (e.g. 32w0)")
            if isinstance(e, ir.ListExpr) and isinstance(t, ir.StructType | ir.HeaderType):
                e = self._expr(a, ctx, t)
            e = self._coerce(e, t, a.loc, what=f"argument '{p.name}' of {what}")  # type: ignore[attr-defined]
            if p.direction in (Direction.OUT, Direction.INOUT):
                self._require_lvalue(e, a.loc, ctx)  # type: ignore[attr-defined]
            if p.direction is Direction.NONE and not _is_const(e):
                raise P4Error(a.loc, f"argument '{p.name}' of {what} must be a compile-time constant")  # type: ignore[attr-defined]
            out.append(e)
        return tuple(out), tuple(p.direction for p in params)

    def _extern_function(self, n: A.CallExpr, name: str, type_args: tuple[ir.Type, ...], ctx: _Ctx,
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
                       type_args: tuple[ir.Type, ...], ctx: _Ctx, expected: ir.Type | None) -> ir.Expr:
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
        if method == "emit" and not _emittable(args[0].type):
            raise P4Error(n.args[0].loc, f"emit needs a header, header stack or struct of them, not {args[0].type}")  # type: ignore[attr-defined]
        rtype = sig.returns if not isinstance(sig.returns, str) else bindings[sig.returns]
        used_type_args = tuple(bindings[t] for t in sig.type_params if t in bindings)
        return ir.ExternMethodCall(base, bt.name, method, args, dirs, rtype, used_type_args, n.loc)

    def _action_call(self, n: A.CallExpr, action: ir.Action, ctx: _Ctx) -> ir.Expr:
        if ctx.block_kind != "control":
            raise P4Error(n.loc, f"actions cannot be called from a {ctx.block_kind}")
        if n.type_args:
            raise P4Error(n.loc, "actions take no type arguments")
        params = tuple(B.ParamSpec(p.name, Direction.IN if p.direction is Direction.NONE else p.direction, p.type)
                       for p in action.params)
        args, dirs = self._bind_args(n, params, {}, ctx, f"action '{action.name}'")
        return ir.ActionCall(action.qualified_name, args, dirs, loc=n.loc)

    def _function_call(self, n: A.CallExpr, fn: ir.Function, ctx: _Ctx) -> ir.Expr:
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


def _kind(t: ir.Type) -> str:
    return {ir.HeaderType: "header", ir.StructType: "struct", ir.HeaderUnionType: "header_union"}.get(
        type(t), "type")


def _emittable(t: ir.Type) -> bool:
    if isinstance(t, ir.HeaderType | ir.HeaderStackType | ir.HeaderUnionType):
        return True
    if isinstance(t, ir.StructType):
        return all(_emittable(f.type) for f in t.fields)
    return False


def _source_name(v: ir.VarRef, ctx: _Ctx) -> str:
    """The declared name that maps to the unique IR name `v.name` in the current scope."""
    s: _Scope | None = ctx.scope
    while s is not None:
        for k, sym in s.names.items():
            if isinstance(sym, _Var) and sym.name == v.name and sym.kind is v.kind:
                return k
        s = s.parent
    return v.name


def _expr_text(n: A.Node) -> str:
    """A key expression as P4Info names key fields (p4c prints the expression)."""
    if isinstance(n, A.Name):
        return n.name
    if isinstance(n, A.MemberExpr):
        return f"{_expr_text(n.expr)}.{n.member}"
    if isinstance(n, A.SliceExpr):
        return f"{_expr_text(n.expr)}[{_expr_text(n.hi)}:{_expr_text(n.lo)}]"
    if isinstance(n, A.IndexExpr):
        return f"{_expr_text(n.expr)}[{_expr_text(n.index)}]"
    if isinstance(n, A.IntLit):
        return n.text
    if isinstance(n, A.CallExpr):
        return f"{_expr_text(n.callee)}()"
    if isinstance(n, A.TypeMember):
        return f"{n.type_name}.{n.member}"
    if isinstance(n, A.CastExpr):
        return f"({_type_text(n.type)}){_expr_text(n.expr)}"
    if isinstance(n, A.Binary):
        return f"{_expr_text(n.left)} {n.op} {_expr_text(n.right)}"
    return type(n).__name__


def _type_text(t: A.TypeRef) -> str:
    if isinstance(t, A.BaseTypeRef):
        if t.width is None:
            return t.kind
        return f"{'int' if t.kind == 'signed' else t.kind}<{_expr_text(t.width)}>"
    if isinstance(t, A.TypeName):
        return t.name
    return "?"


def _always_returns(b: ir.Block) -> bool:
    for s in b.stmts:
        if isinstance(s, ir.Return | ir.Exit):
            return True
        if isinstance(s, ir.If) and s.else_ is not None and _always_returns(s.then) and _always_returns(s.else_):
            return True
        if isinstance(s, ir.Block) and _always_returns(s):
            return True
    return False


# ---- p4c/BMv2: a table may be applied at most once on any path -----------------------------------------


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


def _check_tables_applied_once(block: ir.Block) -> None:
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
