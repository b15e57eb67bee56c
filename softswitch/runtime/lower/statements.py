"""Statement code generation: assignments, declarations, `if`/`switch`, calls, and the Python functions of
actions, P4 functions, table applications and controls.
"""

from __future__ import annotations

import re

from softswitch.frontend import ir
from softswitch.runtime.layout import HeaderSlots, Layout, Slot, StackSlots, StructSlots
from softswitch.runtime.lower.common import (
    CompilerState,
    DynHeader,
    LoweringError,
    PyVar,
    Ref,
    pattern_code,
    pure_code,
    signed,
    wrap_code,
)

_PARAM = re.compile(r"\bp_\w+")
"""A parameter of a generated function (`p_<name>`), as it appears in the function's code."""


class StatementCodegen(CompilerState):
    """Statement code generation: assignments, declarations, `if`/`switch`, calls, and the Python functions of"""

    def store(self, lhs: ir.Expr, value_code: str) -> None:
        """Emit `lhs = value` for a scalar l-value (slices included)."""
        if isinstance(lhs, ir.Slice):
            base_t = lhs.expr.type
            target = self.scalar_code(self.ref(lhs.expr), lhs.loc)
            m = ((1 << (lhs.hi - lhs.lo + 1)) - 1) << lhs.lo
            w = ir.bit_width(base_t)
            full = (1 << w) - 1
            new = f"(({pattern_code(target, base_t)} & {full ^ m}) | (({value_code}) << {lhs.lo} & {m}))"
            if signed(base_t):
                new = wrap_code(new, w, True)
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

    def assign_composite(self, dst: Ref, rhs: ir.Expr, loc: ir.SourceLoc) -> None:
        if isinstance(rhs, ir.StructInit):
            t = rhs.type
            if isinstance(dst, HeaderSlots | DynHeader):
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
        if isinstance(dst, DynHeader) or isinstance(src, DynHeader):
            if not (isinstance(dst, HeaderSlots | DynHeader) and isinstance(src, HeaderSlots | DynHeader)):
                raise LoweringError(loc, "this composite assignment is not supported")
            n = 1 + len(dst.type.fields)
            d, s = self.fresh("_d"), self.fresh("_s")
            self.out(f"{d} = {dst.base if isinstance(dst, HeaderSlots) else dst.code}")
            self.out(f"{s} = {src.base if isinstance(src, HeaderSlots) else src.code}")
            self.out(f"F[{d}:{d} + {n}] = F[{s}:{s} + {n}]")
            return
        if not (isinstance(dst, Layout) and isinstance(src, Layout)):
            raise LoweringError(loc, "this composite assignment is not supported")
        self.out(f"F[{dst.base}:{dst.base + dst.size}] = F[{src.base}:{src.base + src.size}]")

    def declare(self, d: ir.VarDecl, scope: dict[str, Ref], in_function: bool) -> None:
        t = d.type
        scalar = isinstance(t, ir.BitType | ir.BoolType | ir.EnumType | ir.ErrorType | ir.IntType)
        if in_function and scalar:
            v = PyVar(self.fresh("v_"), t)
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

    def block(self, b: ir.Block) -> None:
        stmts = b.stmts
        i = 0
        while i < len(stmts):
            j = i
            while j < len(stmts) and self._uninitialised_local(stmts[j]):
                j += 1
            zeros: dict[str, str] = {}
            for d in stmts[i:j]:
                assert isinstance(d, ir.VarDecl)
                v = PyVar(self.fresh("v_"), d.type)
                assert self.fscope is not None
                self.fscope[d.name] = v
                zeros[v.name] = "False" if isinstance(d.type, ir.BoolType) else "0"
            run = self.register_run(stmts, j)
            # locals the run's reads give their first value: zeroed only where the run is skipped
            deferred = self.register_run_defines(run, set(zeros))
            for name, zero in zeros.items():
                if name not in deferred:
                    self.out(f"{name} = {zero}")
            if run:
                self.register_accesses(run, {name: zero for name, zero in zeros.items() if name in deferred})
                i = j + len(run)
            elif j > i:
                i = j
            else:
                self.stmt(stmts[i])
                i += 1

    def _uninitialised_local(self, s: ir.Stmt) -> bool:
        """A scalar local of an action or function declared without a value (a Python local set to 0/False)."""
        return (isinstance(s, ir.VarDecl) and s.init is None and self.fscope is not None
                and isinstance(s.type, ir.BitType | ir.BoolType | ir.EnumType | ir.ErrorType | ir.IntType))

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
            if isinstance(r, DynHeader):
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
            inline = self.inline_fn.get(fn)
            if inline is not None and all(pure_code(a) for a in ins):
                # `return <expr>;` of parameters only: the expression itself, each parameter read as its argument
                by_param = dict(zip(inline[0], ins, strict=True))
                return "(" + _PARAM.sub(lambda m: f"({by_param.get(m.group(0), m.group(0))})", inline[1]) + ")"
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
            v = PyVar(f"p_{p.name}", p.type)
            self.fscope[p.name] = v
            if p.direction is ir.Direction.OUT:
                self.fn_outs.append(v)
            else:
                args.append(v.name)
                if p.direction is ir.Direction.INOUT:
                    self.fn_outs.append(v)
        stmts = f.body.stmts
        if not self.fn_outs and len(stmts) == 1 and isinstance(stmts[0], ir.Return) and stmts[0].value is not None:
            code = self.ex(stmts[0].value)
            if pure_code(code):  # its callers may use the expression itself (`function_call`)
                self.inline_fn[name] = (args, code)
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
            v = PyVar(f"p_{p.name}", p.type)
            self.fscope[p.name] = v
            args.append(v.name)
        self.out(f"def {name}(F{', ' if args else ''}{', '.join(args)}):")
        self.body(act.body)
        self.out("")
        self.fscope, self.function_kind = saved

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
            keys.append(pattern_code(self.ex(k.expr), k.expr.type))
        key_code = "(" + ", ".join(keys) + ("," if len(keys) == 1 else "") + ")"
        self.out(f"def {fn}(F):")
        self.out.indent()
        if not keys:  # keyless: only the default action, whatever the control plane set it to
            self.out(f"_o = {obj}.default_outcome")
        elif all(k.match_kind == "exact" for k in t.keys):  # one dict probe, no lookup call
            self.out(f"_o = {obj}.exact_entries.get({key_code}, {obj}.default_outcome)")
        else:
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
