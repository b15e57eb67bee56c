"""Resolve names and check types: turn the AST into the typed IR (`ir.Program`).

One pass over the declarations in order (P4 declares before use). Every expression gets its type, int
literals take the width of their context, constant expressions are folded, and anything outside the
supported subset or refused by p4c for BMv2 raises a located `P4Error`.

This module checks declarations and statements; `expressions.py` checks expressions and calls,
`scopes.py` holds the symbols and scopes, `bmv2_rules.py` the path rules p4c applies for BMv2.
"""

from __future__ import annotations

import dataclasses

from softswitch.frontend import ast as A
from softswitch.frontend import builtins as B
from softswitch.frontend import ir
from softswitch.frontend.bmv2_rules import check_tables_applied_once
from softswitch.frontend.composition import (
    ControlParts,
    applied_arguments,
    contains_return,
    ir_path,
    is_extern_ref,
    overlaps,
    remove_returns,
)
from softswitch.frontend.errors import P4Error, unsupported
from softswitch.frontend.expressions import ExpressionChecker, expr_text
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

MAX_UNROLL = 256
"""Most iterations a for loop may unroll to."""
LVALUE_TYPES = (ir.VarRef, ir.Member, ir.Slice, ir.StackElement, ir.StackLast, ir.StackNext)


class Checker(ExpressionChecker):
    """Checks one program; create one per program (it accumulates the program's declarations)."""

    def __init__(self, files: tuple[str, ...] = ()) -> None:
        self.files = files
        self.types: dict[str, ir.Type] = {t.name: t for t in B.BUILTIN_TYPES}
        self.type_decls: list[ir.NamedType] = list(B.BUILTIN_TYPES)
        self.errors: list[str] = list(B.CORE_ERRORS)
        self.match_kinds: list[str] = list(B.CORE_MATCH_KINDS + B.V1MODEL_MATCH_KINDS)
        self.globals = Scope()
        self.globals.names["NoAction"] = ActionSym(B.NO_ACTION)
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
        self.control_templates: dict[str, A.ControlA] = {}
        self.warnings: list[ir.Diagnostic] = []

    # ==== program ========================================================================================

    def check(self, prog: A.ProgramA) -> ir.Program:
        for d in prog.declarations:
            self._declaration(d)
        if self.main is None:
            loc = SourceLoc(self.files[0] if self.files else "<input>", 1, 1)
            raise P4Error(loc, "no package instantiation: expected 'V1Switch(...) main;'")
        self._check_egress_only_calls()
        # As in p4c, only what main reaches is in the program (a control used only as an instance is
        # inlined where it is applied).
        used = {block for _, block in self.main.slots}
        self.controls = [c for c in self.controls if c.name in used]
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
            ctx = Context(Scope(self.globals), "control", "", set())
            action = self._action(d, ctx, "")
            self.actions.append(action)
            self.globals.declare(d.name, ActionSym(action), d.loc)
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
            simple: dict[str, ir.Type] = {"bool": BoolType(), "error": ErrorType(), "string": ir.StringType(), "void": VoidType(),
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
        composite: ir.HeaderType | ir.StructType | ir.HeaderUnionType
        if d.kind == "header":
            composite = ir.HeaderType(d.name, tuple(fields), d.annotations, d.loc)
        elif d.kind == "struct":
            composite = ir.StructType(d.name, tuple(fields), d.annotations, d.loc)
        else:
            composite = ir.HeaderUnionType(d.name, tuple(fields), d.annotations, d.loc)
        self._declare_type(d.name, composite, d.loc)
        self.type_decls.append(composite)
        ch = ir.find_annotation(d.annotations, "controller_header")
        if ch is not None:
            if not isinstance(composite, ir.HeaderType) or not ch.values \
                    or ch.values[0] not in ("packet_in", "packet_out"):
                raise P4Error(ch.loc, '@controller_header takes "packet_in" or "packet_out" on a header')
            self.controller_headers.append((str(ch.values[0]), composite))

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

    def _const_ctx(self, scope: Scope) -> Context:
        return Context(scope, "function", "", set())

    def _const_int(self, n: A.Node, scope: Scope, what: str) -> int:
        e = self._expr(n, self._const_ctx(scope))
        if not isinstance(e, Constant):
            raise P4Error(n.loc, f"{what} must be a compile-time integer constant")  # type: ignore[attr-defined]
        return e.value

    def _const_decl(self, d: A.ConstDeclA, scope: Scope, ctx: Context | None) -> ir.ConstDecl:
        t = self._type(d.type)
        c = ctx or self._const_ctx(scope)
        value = self._coerce(self._expr(d.value, c, t), t, d.value.loc)  # type: ignore[attr-defined]
        if not (is_const(value) or (isinstance(value, ir.StructInit) and all(is_const(v) for v in value.values))):
            raise P4Error(d.loc, f"initializer of const '{d.name}' is not a compile-time constant")
        scope.declare(d.name, ConstSym(value), d.loc)
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

    def _instantiation(self, d: A.InstantiationA, scope: Scope, prefix: str) -> ir.ExternInstance:
        t = self._type(d.type)
        if not isinstance(t, ir.ExternType):
            if isinstance(d.type, A.TypeName) and isinstance(scope.lookup(d.type.name), BlockSym):
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
            if not is_const(e):
                raise P4Error(a.loc, f"{t.name} constructor argument must be a compile-time constant")  # type: ignore[attr-defined]
            args.append(e)
        if t.name in ("register", "counter", "meter") and isinstance(args[0], Constant) and args[0].value <= 0:
            raise P4Error(d.args[0].loc, f"{t.name} size must be positive")  # type: ignore[attr-defined]
        inst = ir.ExternInstance(d.name, self._qualify(d.name, d.annotations, prefix), t, tuple(args),
                                 d.annotations, d.loc)
        scope.declare(d.name, InstanceSym(inst), d.loc)
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

    def _action(self, d: A.ActionA, ctx: Context, prefix: str) -> ir.Action:
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
            actx.scope.declare(p.name, Var(p.name, VarKind.ACTION_PARAM, p.type, p.direction), p.loc)
        body = self._block(d.body, actx, new_scope=False)
        return ir.Action(d.name, self._qualify(d.name, d.annotations, prefix), params, body, d.annotations, d.loc)

    def _function(self, d: A.FunctionA) -> None:
        rtype = self._type(d.return_type)
        params = self._params(d.params, allow_directionless=False)
        used = {p.name for p in params}
        ctx = Context(Scope(self.globals), "function", d.name, used, return_type=rtype)
        for p in params:
            ctx.scope.declare(p.name, Var(p.name, VarKind.FUNCTION_PARAM, p.type, p.direction), p.loc)
        body = self._block(d.body, ctx, new_scope=False)
        if not isinstance(rtype, VoidType) and not always_returns(body):
            raise P4Error(d.loc, f"function '{d.name}' does not return a value on every path")
        fn = ir.Function(d.name, rtype, params, body, d.annotations, d.loc)
        self.functions.append(fn)
        self.globals.declare(d.name, FunctionSym(fn), d.loc)

    # ==== parsers ========================================================================================

    def _block_params(self, d: A.ParserA | A.ControlA, ctx: Context) -> tuple[ir.Param, ...]:
        params = self._params(d.params, allow_directionless=isinstance(d, A.ControlA))
        for p in params:
            ctx.scope.declare(p.name, Var(p.name, VarKind.BLOCK_PARAM, p.type, p.direction), p.loc)
            ctx.used_names.add(p.name)
        return params

    def _parser(self, d: A.ParserA) -> None:
        ctx = Context(Scope(self.globals), "parser", d.name, set())
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
                ctx.scope.declare(loc_decl.name, ValueSetSym(q, t), loc_decl.loc)
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
        self.globals.declare(d.name, BlockSym("parser", d.name, params, d.loc), d.loc)

    def _state(self, s: A.StateA, pctx: Context, targets: set[str]) -> ir.ParserState:
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

    def _select(self, t: A.SelectA, ctx: Context, targets: set[str]) -> ir.Select:
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

    def _keysets(self, ks: A.Node, key_types: list[ir.Type], ctx: Context,
                 allow_value_set: bool) -> tuple[ir.Keyset, ...]:
        loc: SourceLoc = ks.loc  # type: ignore[attr-defined]
        if isinstance(ks, A.KsDefault):
            return tuple(ir.KeysetDefault(loc) for _ in key_types)
        items = ks.items if isinstance(ks, A.KsTuple) else (ks,)
        if len(items) != len(key_types):
            raise P4Error(loc, f"keyset has {len(items)} element(s) but there are {len(key_types)} key(s)")
        return tuple(self._keyset(i, t, ctx, allow_value_set) for i, t in zip(items, key_types, strict=True))

    def _keyset(self, ks: A.Node, t: ir.Type, ctx: Context, allow_value_set: bool) -> ir.Keyset:
        loc: SourceLoc = ks.loc  # type: ignore[attr-defined]
        if isinstance(ks, A.KsDefault):
            return ir.KeysetDefault(loc)
        if isinstance(ks, A.KsExact):
            if isinstance(ks.value, A.Name) and allow_value_set:
                sym = ctx.scope.lookup(ks.value.name)
                if isinstance(sym, ValueSetSym):
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

    def _const_of(self, n: A.Node, t: ir.Type, ctx: Context, what: str) -> ir.Expr:
        e = self._coerce(self._expr(n, ctx, t), t, n.loc)  # type: ignore[attr-defined]
        if not is_const(e):
            raise P4Error(n.loc, f"{what} must be a compile-time constant")  # type: ignore[attr-defined]
        return e

    # ==== controls =======================================================================================

    def _control(self, d: A.ControlA) -> None:
        self.control_templates[d.name] = d
        if d.ctor_params:
            # Checked where it is instantiated, with its constructor arguments known.
            ctor = self._params(d.ctor_params, allow_directionless=True)
            for p in ctor:
                if p.direction is not Direction.NONE:
                    raise P4Error(p.loc, f"constructor parameter '{p.name}' cannot have a direction")
            params = self._params(d.params, allow_directionless=True)
            self.globals.declare(d.name, BlockSym("control", d.name, params, d.loc, ctor), d.loc)
            return
        ctx = Context(Scope(self.globals), "control", d.name, set())
        self.block_calls[d.name] = ctx.calls
        params = self._block_params(d, ctx)
        parts = ControlParts()
        self._control_locals(d.locals, ctx, d.name, parts)
        self._note_varying_arguments(d.apply, ctx.scope)
        apply_block = self._block(d.apply, ctx.child())
        check_tables_applied_once(apply_block)
        every = parts.flat()
        c = ir.Control(d.name, params, tuple(every.locals), tuple(every.instances), tuple(every.actions),
                       tuple(every.tables), apply_block, d.annotations, d.loc)
        self.controls.append(c)
        self.globals.declare(d.name, BlockSym("control", d.name, params, d.loc), d.loc)

    def _control_locals(self, decls: tuple[A.Node, ...], ctx: Context, prefix: str, parts: ControlParts) -> None:
        """A control's declarations before `apply`, into `parts` (its own, or an instance's)."""
        ctx.parts = parts
        for loc_decl in decls:
            if isinstance(loc_decl, A.ConstDeclA):
                self._const_decl(loc_decl, ctx.scope, ctx)
            elif isinstance(loc_decl, A.VarDeclA):
                parts.locals.append(self._var_decl(loc_decl, ctx))
            elif isinstance(loc_decl, A.InstantiationA):
                sym = ctx.scope.lookup(loc_decl.type.name) if isinstance(loc_decl.type, A.TypeName) else None
                if isinstance(sym, BlockSym) and sym.kind == "control":
                    self._control_instance(loc_decl, sym, ctx, prefix, parts.nest())
                else:
                    parts.instances.append(self._instantiation(loc_decl, ctx.scope, prefix))
            elif isinstance(loc_decl, A.ActionA):
                a = self._action(loc_decl, ctx, prefix)
                parts.actions.append(a)
                ctx.scope.declare(loc_decl.name, ActionSym(a), loc_decl.loc)
            elif isinstance(loc_decl, A.TableA):
                t = self._table(loc_decl, ctx, prefix, parts.instances)
                parts.tables.append(t)
                ctx.scope.declare(loc_decl.name, TableSym(t), loc_decl.loc)
            else:
                raise unsupported(getattr(loc_decl, "loc", ir.NO_LOC), type(loc_decl).__name__)

    # ==== control composition (composition.py) ===========================================================

    def _control_instance(self, d: A.InstantiationA, block: BlockSym, ctx: Context, prefix: str,
                          parts: ControlParts) -> None:
        """`Sub(args) name;` inside a control: its constructor arguments now, the rest at its first apply."""
        if not isinstance(d.type, A.TypeName) or d.type.args:
            raise P4Error(d.loc, f"control {block.name} takes no type arguments")
        template = self.control_templates[block.name]
        if len(d.args) != len(block.ctor_params):
            raise P4Error(d.loc, f"control {block.name} takes {len(block.ctor_params)} constructor argument(s), "
                                 f"got {len(d.args)}")
        constants: dict[str, ir.Expr] = {}
        const_ctx = self._const_ctx(ctx.scope)
        for a, p in zip(d.args, block.ctor_params, strict=True):
            e = self._coerce(self._expr(a, const_ctx, p.type), p.type, a.loc)  # type: ignore[attr-defined]
            if not is_const(e):
                raise P4Error(a.loc, f"constructor argument '{p.name}' of {block.name} must be a "  # type: ignore[attr-defined]
                                     "compile-time constant")
            constants[p.name] = e
        sym = ControlInstanceSym(d.name, self._qualify(d.name, d.annotations, prefix), template, constants, d.loc,
                                 parts=parts)
        ctx.scope.declare(d.name, sym, d.loc)

    def _apply_instance(self, sym: ControlInstanceSym, call: A.CallExpr, ctx: Context) -> list[ir.Stmt]:
        """`name.apply(args)`: the instance's body in place, its parameters bound (composition.py)."""
        template: A.ControlA = sym.control  # type: ignore[assignment]
        if ctx.in_action:
            raise P4Error(call.loc, "a control cannot be applied inside an action")
        if ctx.block_kind != "control":
            raise P4Error(call.loc, f"a control cannot be applied in a {ctx.block_kind}")
        params = self._params(template.params, allow_directionless=True)
        args_ast = self._named_args(call.args, params, call.loc)
        if len(args_ast) != len(params):
            raise P4Error(call.loc, f"{sym.name}.apply takes {len(params)} argument(s), got {len(args_ast)}")
        args: list[ir.Expr] = []
        for a, p in zip(args_ast, params, strict=True):
            e = self._coerce(self._expr(a, ctx, p.type), p.type, a.loc,  # type: ignore[attr-defined]
                             what=f"argument '{p.name}' of {sym.name}.apply")
            if p.direction in (Direction.OUT, Direction.INOUT):
                self._require_lvalue(e, a.loc, ctx)  # type: ignore[attr-defined]
            if isinstance(p.type, ir.ExternType):
                if not is_extern_ref(e):
                    raise P4Error(a.loc, f"argument for '{p.name}' must be a {p.type.name} instance")  # type: ignore[attr-defined]
            elif p.direction is Direction.NONE and not is_const(e):
                raise P4Error(a.loc, f"argument used for directionless parameter '{p.name}' must be a "  # type: ignore[attr-defined]
                                     "compile-time constant")
            args.append(e)
        if sym.scope is None:
            self._bind_instance(sym, params, args, ctx)
        else:
            for a, p, e, first in zip(args_ast, params, args, sym.arguments, strict=True):
                if p.name not in sym.copies and e != dataclasses.replace(first, loc=e.loc) and \
                        ir_path(e) != ir_path(first):  # type: ignore[arg-type]
                    raise unsupported(a.loc, f"applying instance '{sym.name}' with another argument for "  # type: ignore[attr-defined]
                                             f"'{p.name}' than at its first apply")
        assert sym.scope is not None
        body_scope = Scope(sym.scope)
        for p, e in zip(params, args, strict=True):
            # a constant given here is that constant in this copy of the body (p4c folds it: a branch it
            # rules out is gone, tables in it included); the instance's actions read the copied variable
            if p.name in sym.copies and p.direction in (Direction.IN, Direction.NONE) and is_const(e):
                body_scope.declare(p.name, ConstSym(e), p.loc)
        body_ctx = Context(body_scope, "control", ctx.block_name, ctx.used_names, calls=ctx.calls,
                           read_only=self._instance_read_only(sym, params, args), parts=ctx.parts)
        stmts: list[ir.Stmt] = []
        for p, e in zip(params, args, strict=True):
            if p.name in sym.copies and p.direction in (Direction.IN, Direction.INOUT, Direction.NONE):
                stmts.append(ir.Assign(ir.VarRef(sym.copies[p.name], VarKind.LOCAL, p.type, call.loc), e, call.loc))
        body = self._block(template.apply, body_ctx)
        if contains_return(body):
            flag = self._fresh(f"{sym.name}_returned", ctx)
            stmts.append(ir.VarDecl(flag, BoolType(), BoolConst(False, loc=call.loc), (), call.loc))
            body = remove_returns(body, flag)
        stmts.append(body)
        for p, e in zip(params, args, strict=True):
            if p.name in sym.copies and p.direction in (Direction.OUT, Direction.INOUT):
                stmts.append(ir.Assign(e, ir.VarRef(sym.copies[p.name], VarKind.LOCAL, p.type, call.loc), call.loc))
        return [ir.Block(tuple(stmts), call.loc)]

    def _bind_instance(self, sym: ControlInstanceSym, params: tuple[ir.Param, ...], args: list[ir.Expr],
                       ctx: Context) -> None:
        """The instance's names, from the arguments of its first apply; then its declarations."""
        parts = sym.parts
        assert isinstance(parts, ControlParts)
        scope = Scope(self.globals)
        for name, value in sym.constants.items():
            scope.declare(name, ConstSym(value), sym.loc)
        paths = [ir_path(e) for e in args]
        for i, (p, e) in enumerate(zip(params, args, strict=True)):
            path = paths[i]
            written = p.direction in (Direction.OUT, Direction.INOUT)
            shared = path is not None and any(
                other is not None and overlaps(path, other) and (written or q.direction in (Direction.OUT,
                                                                                         Direction.INOUT))
                for j, (q, other) in enumerate(zip(params, paths, strict=True)) if j != i)
            if is_extern_ref(e):
                scope.declare(p.name, ConstSym(e), p.loc)
            elif path is not None and not shared and i not in sym.varying:
                scope.declare(p.name, AliasSym(e, p.direction), p.loc)
            else:
                var = self._fresh(f"{sym.name}_{p.name}", ctx)
                parts.locals.append(ir.VarDecl(var, p.type, None, (), p.loc))
                scope.declare(p.name, Var(var, VarKind.LOCAL, p.type, p.direction), p.loc)
                sym.copies[p.name] = var
        sym.params, sym.arguments, sym.scope = params, tuple(args), scope
        template: A.ControlA = sym.control  # type: ignore[assignment]
        decl_ctx = Context(Scope(scope), "control", ctx.block_name, ctx.used_names, calls=ctx.calls,
                           read_only=self._instance_read_only(sym, params, args), parts=parts)
        self._control_locals(template.locals, decl_ctx, sym.prefix, parts)
        self._note_varying_arguments(template.apply, decl_ctx.scope)
        sym.scope = decl_ctx.scope

    @staticmethod
    def _note_varying_arguments(apply_block: A.Node, scope: Scope) -> None:
        """Which arguments differ between the applies of each instance declared in `scope`."""
        instances = {n: sym for n, sym in scope.names.items() if isinstance(sym, ControlInstanceSym)}
        for name, calls in applied_arguments(apply_block, set(instances)).items():
            for i, arg in enumerate(calls[0]):
                if any(len(c) != len(calls[0]) or c[i] != arg for c in calls[1:]):
                    instances[name].varying.add(i)

    @staticmethod
    def _instance_read_only(sym: ControlInstanceSym, params: tuple[ir.Param, ...],
                            args: list[ir.Expr]) -> tuple[tuple[tuple[str, ...], str], ...]:
        out = []
        for p, e in zip(params, args, strict=True):
            if p.direction not in (Direction.IN, Direction.NONE) or is_extern_ref(e):
                continue
            path = (sym.copies[p.name],) if p.name in sym.copies else ir_path(e)
            if path is not None:
                out.append((path, p.name))
        return tuple(out)

    # ==== tables =========================================================================================

    def _table(self, d: A.TableA, ctx: Context, prefix: str, instances: list[ir.ExternInstance]) -> ir.Table:
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
                    if not isinstance(sym, ActionSym):
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
                for entry in entries:
                    ref = next(a for a in actions if a.action == entry.action.action)
                    if ir.find_annotation(ref.annotations, "defaultonly"):
                        raise P4Error(entry.loc, f"action '{ref.action}' is @defaultonly and cannot be used in "
                                                 "an entry")
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
                if not isinstance(sym, InstanceSym) or sym.instance.type.name != want:
                    raise P4Error(prop.loc, f"'{prop.name}' must name a {want} instance of this control")
                q = sym.instance.qualified_name
                for other in self._tables_so_far(ctx):
                    if q in (other.counters, other.meters):
                        raise P4Error(prop.loc, f"{want} '{q}' is already attached to table "
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
    def _tables_so_far(ctx: Context) -> list[ir.Table]:
        return [s.table for s in ctx.scope.names.values() if isinstance(s, TableSym)]

    def _key(self, k: A.KeyElementA, ctx: Context) -> ir.TableKey:
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
        name = a.values[0] if a is not None and a.values and isinstance(a.values[0], str) else expr_text(k.expr)
        return ir.TableKey(e, k.match_kind, str(name), k.annotations, k.loc)

    def _action_call_ref(self, n: A.Node, ctx: Context, listed: set[str], what: str) -> ir.ActionRef:
        """`a` or `a(args)` naming a listed action with constant action-data arguments."""
        loc: SourceLoc = n.loc  # type: ignore[attr-defined]
        args: tuple[A.Node, ...]
        if isinstance(n, A.Name):
            callee, args = n, ()
        elif isinstance(n, A.CallExpr) and isinstance(n.callee, A.Name) and not n.type_args:
            callee, args = n.callee, n.args
        else:
            raise P4Error(loc, f"{what} must be an action call")
        sym = ctx.scope.lookup(callee.name)
        if not isinstance(sym, ActionSym):
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

    def _entry(self, e: A.EntryA, keys: list[ir.TableKey], ctx: Context, listed: set[str]) -> ir.TableConstEntry:
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
            if not isinstance(sym, BlockSym):
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
        objects += [(i.qualified_name, i.loc) for p in self.parsers for i in p.instances]
        objects += [(i.qualified_name, i.loc) for c in self.controls for i in c.instances]
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

    def _block(self, b: A.Node, ctx: Context, new_scope: bool = True) -> ir.Block:
        c = ctx.child() if new_scope else ctx
        stmts = b.stmts if isinstance(b, A.BlockStmt) else (b,)
        out: list[ir.Stmt] = []
        for s in stmts:
            out.extend(self._stmt(s, c))
        return ir.Block(tuple(out), b.loc)  # type: ignore[attr-defined]

    def _fresh(self, name: str, ctx: Context) -> str:
        unique, n = name, 0
        while unique in ctx.used_names:
            n += 1
            unique = f"{name}__{n}"
        ctx.used_names.add(unique)
        return unique

    def _var_decl(self, d: A.VarDeclA, ctx: Context) -> ir.VarDecl:
        t = self._type(d.type)
        if isinstance(t, ir.ExternType | VoidType | IntType | ir.StringType | ir.MatchKindType):
            raise P4Error(d.loc, f"variable '{d.name}' cannot have type {t}")
        init = None
        if d.init is not None:
            init = self._coerce(self._expr(d.init, ctx, t), t, d.init.loc)  # type: ignore[attr-defined]
        if d.name in ctx.scope.names:
            raise P4Error(d.loc, f"redeclaration of '{d.name}'")
        unique = self._fresh(d.name, ctx)
        ctx.scope.declare(d.name, Var(unique, VarKind.LOCAL, t), d.loc)
        return ir.VarDecl(unique, t, init, d.annotations, d.loc)

    def _stmt(self, s: A.Node, ctx: Context) -> list[ir.Stmt]:
        loc: SourceLoc = s.loc  # type: ignore[attr-defined]
        if isinstance(s, A.AssignStmt):
            lhs = self._expr(s.lhs, ctx)
            self._require_lvalue(lhs, s.lhs.loc, ctx)  # type: ignore[attr-defined]
            rhs = self._coerce(self._expr(s.rhs, ctx, lhs.type), lhs.type, s.rhs.loc)  # type: ignore[attr-defined]
            return [ir.Assign(lhs, rhs, loc)]
        if isinstance(s, A.CallStmt):
            instance = self._applied_instance(s.call, ctx)
            if instance is not None:
                assert isinstance(s.call, A.CallExpr)
                return self._apply_instance(instance, s.call, ctx)
            call = self._expr(s.call, ctx, statement=True)
            return [ir.CallStmt(call, loc)]
        if isinstance(s, A.IfStmt):
            cond = self._coerce(self._expr(s.cond, ctx, BoolType()), BoolType(), s.cond.loc)  # type: ignore[attr-defined]
            then = self._block(s.then, ctx)
            else_ = self._block(s.else_, ctx) if s.else_ is not None else None
            if isinstance(cond, BoolConst):  # as p4c: only the branch taken is code (and applies tables)
                taken = then if cond.value else else_
                return [taken] if taken is not None else []
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

    @staticmethod
    def _applied_instance(call: A.Node, ctx: Context) -> ControlInstanceSym | None:
        if isinstance(call, A.CallExpr) and isinstance(call.callee, A.MemberExpr) and \
                isinstance(call.callee.expr, A.Name) and call.callee.member == "apply":
            sym = ctx.scope.lookup(call.callee.expr.name)
            if isinstance(sym, ControlInstanceSym):
                return sym
        return None

    def _unroll(self, s: A.ForStmt | A.ForInStmt, ctx: Context) -> list[ir.Stmt]:
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
            if len(values) > MAX_UNROLL:
                raise P4Error(s.loc, f"for loop runs more than {MAX_UNROLL} times")
            out: list[ir.Stmt] = []
            for v in values:
                body_ctx = ctx.child()
                body_ctx.scope.names[s.name] = ConstSym(v)
                out.append(self._block(s.body, body_ctx))
            return out
        for item in s.init:
            if not isinstance(item, A.VarDeclA):
                raise unsupported(item.loc, "for loop over a variable declared outside the loop")  # type: ignore[attr-defined]
            t = self._type(item.type)
            assert item.init is not None
            loop_vars[item.name] = (t, self._const_of(item.init, t, ctx, "a for-loop initial value"))
        out = []
        for _ in range(MAX_UNROLL + 1):
            body_ctx = ctx.child()
            for name, (_t, v) in loop_vars.items():
                body_ctx.scope.names[name] = ConstSym(at_loc(v, s.loc))
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
        raise P4Error(s.loc, f"for loop runs more than {MAX_UNROLL} times")

    def _switch(self, s: A.SwitchStmt, ctx: Context) -> ir.Switch:
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
                    if not isinstance(sym, ActionSym) or sym.action.qualified_name not in e.type.actions:
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

    def _require_lvalue(self, e: ir.Expr, loc: SourceLoc, ctx: Context) -> None:
        root = e
        while not isinstance(root, ir.VarRef):
            if isinstance(root, ir.Member | ir.Slice):
                root = root.expr
            elif isinstance(root, ir.StackElement | ir.StackLast | ir.StackNext):
                root = root.stack
            else:
                raise P4Error(loc, "expression is not assignable (not an l-value)")
        if not isinstance(e, LVALUE_TYPES):
            raise P4Error(loc, "expression is not assignable (not an l-value)")
        path = ir_path(e) or ir_path(root)
        for protected, name in ctx.read_only:
            if path is not None and overlaps(path, protected):
                raise P4Error(loc, f"cannot write to 'in' parameter '{name}'")
        sym = ctx.scope.lookup(source_name(root, ctx))
        direction = sym.direction if isinstance(sym, Var) else Direction.INOUT
        if root.kind is not VarKind.LOCAL and direction in (Direction.IN, Direction.NONE):
            what = "action data parameter" if direction is Direction.NONE else "'in' parameter"
            raise P4Error(loc, f"cannot write to {what} '{root.name}'")


# ---- helpers --------------------------------------------------------------------------------------------


def source_name(v: ir.VarRef, ctx: Context) -> str:
    """The declared name that maps to the unique IR name `v.name` in the current scope."""
    s: Scope | None = ctx.scope
    while s is not None:
        for k, sym in s.names.items():
            if isinstance(sym, Var) and sym.name == v.name and sym.kind is v.kind:
                return k
        s = s.parent
    return v.name


def always_returns(b: ir.Block) -> bool:
    for s in b.stmts:
        if isinstance(s, ir.Return | ir.Exit):
            return True
        if isinstance(s, ir.If) and s.else_ is not None and always_returns(s.then) and always_returns(s.else_):
            return True
        if isinstance(s, ir.Block) and always_returns(s):
            return True
    return False
