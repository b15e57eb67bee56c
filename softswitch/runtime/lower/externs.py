"""Extern calls: packet_in/packet_out, registers, counters, meters, hashes and checksums over field lists,
digests, clone/resubmit/recirculate, and the extern objects each instance gets at load time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from softswitch.frontend import ir
from softswitch.runtime import hashing
from softswitch.runtime.externs import CounterArray, MeterArray, RegisterArray
from softswitch.runtime.layout import HeaderSlots, Slot, StackSlots, StructSlots
from softswitch.runtime.lower.common import (
    CompilerState,
    DynHeader,
    LoweringError,
    Ref,
    ValueSet,
    index_names,
    pattern_code,
    pure_code,
    signed,
    wrap_code,
)


class ExternCallCodegen(CompilerState):
    """Extern calls: packet_in/packet_out, registers, counters, meters, hashes and checksums over field lists,"""

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
            if m not in ("read", "write"):
                raise LoweringError(loc, f"register.{m} is not supported")
            self.register_accesses([c])
            return
        if ext == "counter" and m == "count":
            # inline in range (no method call); out of range, the method logs it as before
            size = self.counters[target.name].size
            plen = f"F[{self.std['packet_length']}]"
            index = self.ex(c.args[0])
            if index.isdigit() and int(index) < size:
                self.out(f"{obj}_packets[{index}] += 1")
                self.out(f"{obj}_bytes[{index}] += {plen}")
                return
            idx = self.fresh("_c")
            self.out(f"{idx} = {index}")
            self.out(f"if 0 <= {idx} < {size}:")
            self.out(f"    {obj}_packets[{idx}] += 1")
            self.out(f"    {obj}_bytes[{idx}] += {plen}")
            self.out("else:")
            self.out(f"    {obj}.count({idx}, {plen})")
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

    def register_accesses(self, calls: list[ir.ExternMethodCall], zero_on_skip: dict[str, str] | None = None) -> None:
        """Reads and writes of registers of one size at one index (`register_run` found them consecutive, the
        index unchanged by them): the index is computed and bounds-checked once for all. Out of range, each
        access is skipped and logged as alone (`_oob`), and the locals of `zero_on_skip` (name: zero code),
        declared just before and first set by these reads, get the value their declaration would have given;
        a constant index in range needs no check at all."""
        first = calls[0]
        size = self.registers[self._register_name(first)].size
        index = self.ex(register_index(first))
        if index.isdigit() and int(index) < size:
            for c in calls:
                self._register_access(c, index)
            return
        idx = self.fresh("_i")
        self.out(f"{idx} = {index}")
        self.out(f"if {idx} < {size}:")
        self.out.indent()
        for c in calls:
            self._register_access(c, idx)
        self.out.dedent()
        self.out("else:")
        for name, zero in (zero_on_skip or {}).items():
            self.out(f"    {name} = {zero}")
        for c in calls:
            self.out(f"    _oob({self._register_name(c)!r}, {idx})")

    def _register_name(self, c: ir.ExternMethodCall) -> str:
        assert isinstance(c.target, ir.ExternInstanceRef)
        return c.target.name

    def _register_access(self, c: ir.ExternMethodCall, idx: str) -> None:
        obj = self.instance_name(self._register_name(c), c.loc)
        if c.method == "read":
            self.store(c.args[0], f"{obj}[{idx}]")
        else:
            self.out(f"{obj}[{idx}] = {self.ex(c.args[1])}")

    def register_run_defines(self, run: list[ir.ExternMethodCall], names: set[str]) -> set[str]:
        """Which of the locals `names` the run's reads store into without the run reading them first (not in
        its index nor in a written value): their declaration's zero is needed only where the run is skipped."""
        if not run:
            return set()
        used = index_names(self.ex(register_index(run[0])))
        for c in run:
            if c.method == "write":
                used |= index_names(self.ex(c.args[1]))
        defined = set()
        for c in run:
            if c.method == "read":
                dest = self.scalar_code(self.ref(c.args[0]), c.loc)
                if dest in names and dest not in used:
                    defined.add(dest)
            else:
                used |= index_names(self.ex(c.args[1]))
        return defined

    def register_run(self, stmts: Sequence[ir.Stmt], start: int) -> list[ir.ExternMethodCall]:
        """The register accesses `register_accesses` may do under one bounds check, from `stmts[start]` on:
        consecutive reads/writes of registers of one size whose index code is the same pure expression (slots,
        locals, constants, operators: no call) that none of the run's reads stores into, and whose written values
        are pure too. Fewer than two: no run (the statement is lowered alone)."""
        run: list[ir.ExternMethodCall] = []
        index = ""
        size = -1
        for s in stmts[start:]:
            c = s.call if isinstance(s, ir.CallStmt) else None
            if not (isinstance(c, ir.ExternMethodCall) and c.extern == "register" and c.method in ("read", "write")
                    and isinstance(c.target, ir.ExternInstanceRef) and c.target.name in self.registers):
                break
            code = self.ex(register_index(c))
            if not run:
                if not pure_code(code):
                    break
                index, size = code, self.registers[c.target.name].size
            elif code != index or self.registers[c.target.name].size != size:
                break
            if c.method == "read":
                if isinstance(c.args[0], ir.Slice):
                    break
                dest = self.scalar_code(self.ref(c.args[0]), c.loc)
                if not pure_code(dest) or dest in index_names(index):
                    break
            elif not pure_code(self.ex(c.args[1])):
                break
            run.append(c)
        return run if len(run) > 1 else []

    def extract(self, arg: ir.Expr, loc: ir.SourceLoc) -> None:
        r = self.ref(arg)
        if isinstance(r, HeaderSlots | DynHeader):
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
            if signed(f.type):
                code = wrap_code(code, fw, True)
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
            v = pattern_code(slot, f.type)
            parts.append(v if shift == 0 else f"({v} << {shift})")
        return " | ".join(parts) if parts else "0"

    def emit(self, r: Ref, loc: ir.SourceLoc) -> None:
        if isinstance(r, HeaderSlots | DynHeader):
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
        return [(cond, pattern_code(self.ex(e), t), ir.bit_width(t))]

    def flatten_ref(self, r: Ref, cond: str | None) -> list[tuple[str | None, str, int]]:
        if isinstance(r, HeaderSlots):
            c = f"F[{r.base}]"
            return [(c, pattern_code(f"F[{r.base + 1 + i}]", f.type), ir.bit_width(f.type)) for i, f in enumerate(r.type.fields)]
        if isinstance(r, StructSlots):
            return [x for m in r.members.values() for x in self.flatten_ref(m, cond)]
        if isinstance(r, StackSlots):
            return [x for elem in r.elements for x in self.flatten_ref(elem, cond)]
        if isinstance(r, Slot):
            return [(cond, pattern_code(f"F[{r.index}]", r.type), ir.bit_width(r.type))]
        raise LoweringError(None, "this field list element is not supported")

    def _field_groups(self, data: ir.Expr) -> list[tuple[str | None, list[tuple[str, int]]]]:
        """The field list's (value code, width) pairs in runs of one validity condition (None: always in)."""
        groups: list[tuple[str | None, list[tuple[str, int]]]] = []
        for cond, code, w in self.flatten(data):
            if groups and groups[-1][0] == cond:
                groups[-1][1].append((code, w))
            else:
                groups.append((cond, [(code, w)]))
        return groups

    def _by_validity(self, groups: list[tuple[str | None, list[tuple[str, int]]]],
                     leaf: Callable[[list[tuple[str, int]]], None]) -> bool:
        """Emit an if/else tree over the (at most 3, pure) validity conditions of `groups`, calling `leaf` with the
        fields each combination includes: every leaf packs a constant width, with no per-field bookkeeping.
        False (nothing emitted) when there are none or more conditions."""
        conds: list[str] = []
        for cond, _ in groups:
            if cond is not None and cond not in conds:
                conds.append(cond)
        if not 1 <= len(conds) <= 3 or not all(pure_code(c) for c in conds):
            return False

        def tree(i: int, truth: dict[str, bool]) -> None:
            if i == len(conds):
                leaf([m for cond, members in groups if cond is None or truth[cond] for m in members])
                return
            for branch, value in ((f"if {conds[i]}:", True), ("else:", False)):
                self.out(branch)
                self.out.indent()
                tree(i + 1, {**truth, conds[i]: value})
                self.out.dedent()

        tree(0, {})
        return True

    def pack_int(self, data: ir.Expr) -> tuple[str, str]:
        """Emit code computing the field list as one integer; returns (value code, bit-count code).

        Fields of invalid headers are left out, as BMv2's BufBuilder does; when no field depends on a
        header's validity the width is a constant and no per-packet bookkeeping is generated; a few validity
        conditions branch to constant widths (`_by_validity`).
        """
        groups = self._field_groups(data)
        if all(cond is None for cond, _ in groups):
            members = [m for _, ms in groups for m in ms]
            self.out(f"_acc = {_concat(members)}")
            return "_acc", str(sum(w for _, w in members))
        if self._by_validity(groups, lambda ms: self.out(f"_acc = {_concat(ms)}; _nb = {sum(w for _, w in ms)}")):
            return "_acc", "_nb"
        self.out("_acc = 0")
        self.out("_nb = 0")
        for cond, members in groups:
            gw = sum(w for _, w in members)
            line = f"_acc = (_acc << {gw}) | {_concat(members)}; _nb += {gw}"
            if cond is None:
                self.out(line)
            else:
                self.out(f"if {cond}:")
                self.out(f"    {line}")
        return "_acc", "_nb"

    def pack(self, data: ir.Expr, out_var: str, with_payload: bool = False) -> None:
        """Emit code leaving in `out_var` the bytes BMv2 would hash for this field list."""

        def to_bytes(members: list[tuple[str, int]]) -> None:
            total = sum(w for _, w in members)
            pad = -total % 8
            value = _concat(members)
            self.out(f"{out_var} = (({value}) << {pad}).to_bytes({(total + pad) // 8}, 'big')" if pad
                     else f"{out_var} = ({value}).to_bytes({total // 8}, 'big')")

        groups = self._field_groups(data)
        if all(cond is None for cond, _ in groups):
            to_bytes([m for _, ms in groups for m in ms])
        elif not self._by_validity(groups, to_bytes):
            acc, nb = self.pack_int(data)
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
                self.out(f"if {value} != {pattern_code(self.ex(csum), csum.type)}:")
                self.out(f"    F[{self.std['checksum_error']}] = 1")
            else:
                self.store(csum, f"{value} & {(1 << ir.bit_width(csum.type)) - 1}")
            self.out.dedent()
        elif n == "hash":
            result, algo, base, data, max_ = a
            self.algo(algo, loc)
            value = self.digest_of(algo, data, loc)
            w = ir.bit_width(result.type)
            base_code, max_code = self.ex(base), self.ex(max_)
            if not signed(result.type) and base_code.isdigit() and max_code.isdigit() and int(max_code) > 0 \
                    and int(base_code) + int(max_code) - 1 < 1 << w:
                # constants whose sum fits the result: the BMv2 formula without the folding it cannot need
                offset = f"{base_code} + " if int(base_code) else ""
                self.store(result, f"{offset}{value} % {max_code}")
            else:
                self.store(result, f"({base_code} + {value} % ({max_code} or 1)) & {(1 << w) - 1}")
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
                counter = CounterArray(inst.qualified_name, inst.size or 0, kind)
                self.ns[n] = self.counters[inst.qualified_name] = counter
                self.ns[f"{n}_packets"], self.ns[f"{n}_bytes"] = counter.packets, counter.bytes  # never replaced
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


def register_index(c: ir.ExternMethodCall) -> ir.Expr:
    """The index argument of `register.read(dest, index)` / `register.write(index, value)`."""
    return c.args[1] if c.method == "read" else c.args[0]



def _concat(members: list[tuple[str, int]]) -> str:
    """Code of the fields' bit patterns concatenated, the first most significant ("0" for none); constant fields
    (a salt) are placed at compile time, as one number."""
    parts, shift, constant = [], sum(w for _, w in members), 0
    for code, w in members:
        shift -= w
        if code.isdigit():
            constant |= int(code) << shift
        else:
            parts.append(f"({code} << {shift})" if shift else code)
    if constant:
        parts.insert(0, str(constant))
    return " | ".join(parts) if parts else "0"
