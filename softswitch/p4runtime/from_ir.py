"""The front end's typed IR (`softswitch.frontend.ir.Program`) → the P4Info schema (`schema.Program`).

Only objects the control plane can reach are described, as p4c does: tables, the actions the program uses
(named by a table or called), counters, meters, registers, digests, `@controller_header` headers, and the
serializable enums those objects' fields are typed with. Names are already qualified by the
front end (`@name` applied), so this module only reads widths, kinds and annotations.
"""

from __future__ import annotations

import dataclasses
import pathlib

from softswitch.frontend import ir
from softswitch.p4runtime import schema

_COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}
_METER_UNITS = {"packets": "PACKETS", "bytes": "BYTES"}
_SKIP_ANNOTATIONS = {"name", "id", "brief", "tableonly", "defaultonly", "description"}


class SchemaError(ValueError):
    """The program has a control-plane object P4Info cannot describe (message: `file:line:col: ...`)."""


def width_of(t: ir.Type, where: ir.SourceLoc, what: str) -> int:
    if isinstance(t, ir.HeaderType):  # a whole header is not a P4Runtime value
        raise SchemaError(f"{where}: {what} has type {t}, which P4Runtime cannot carry (use bit<W>)")
    try:
        return ir.bit_width(t)
    except TypeError:
        raise SchemaError(f"{where}: {what} has type {t}, which P4Runtime cannot carry (use bit<W>)") from None


def _named(name: str, annotations: tuple[ir.Annotation, ...]) -> schema.Named:
    fixed = ir.find_annotation(annotations, "id")
    brief = ir.find_annotation(annotations, "brief")
    fixed_id = None
    if fixed is not None:
        if not fixed.values or not isinstance(fixed.values[0], int):
            raise SchemaError(f"{fixed.loc}: @id needs an integer")
        fixed_id = fixed.values[0]
    others = tuple(f"@{a.name}({a.body})" if a.body else f"@{a.name}"
                   for a in annotations if a.name not in _SKIP_ANNOTATIONS)
    return schema.Named(name, fixed_id, str(brief.values[0]) if brief and brief.values else "", others)


def _scope(ref: ir.ActionRef) -> str:
    if ir.find_annotation(ref.annotations, "tableonly"):
        return "TABLE_ONLY"
    if ir.find_annotation(ref.annotations, "defaultonly"):
        return "DEFAULT_ONLY"
    return "TABLE_AND_DEFAULT"


def _unit(inst: ir.ExternInstance, units: dict[str, str]) -> str:
    for a in inst.args:
        if isinstance(a, ir.EnumMember) and a.member in units:
            return units[a.member]
    raise SchemaError(f"{inst.loc}: {inst.qualified_name}: no counter/meter type among its arguments")


def _action_ref(ref: ir.ActionRef) -> schema.ActionRef:
    notes = tuple(f"@{a.name}" for a in ref.annotations if a.name in ("tableonly", "defaultonly"))
    return schema.ActionRef(ref.action, _scope(ref), notes)


def _constant_value(e: ir.Expr, where: ir.SourceLoc) -> int:
    if isinstance(e, ir.Constant):
        return e.value
    if isinstance(e, ir.BoolConst):
        return int(e.value)
    if isinstance(e, ir.EnumMember) and e.type.underlying is not None:
        return e.type.value_of(e.member)
    raise SchemaError(f"{where}: default action argument is not a constant")


def _called_actions(node: object, into: set[str]) -> None:
    """Names of the actions called directly (not through a table) anywhere under `node`."""
    if isinstance(node, ir.ActionCall):
        into.add(node.action)
    if isinstance(node, tuple):
        for item in node:
            _called_actions(item, into)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type) and not _is_type(node):
        for f in dataclasses.fields(node):
            _called_actions(getattr(node, f.name), into)


def _is_type(node: object) -> bool:
    return isinstance(node, (ir.BitType, ir.IntType, ir.BoolType, ir.HeaderType, ir.StructType, ir.EnumType,
                             ir.HeaderUnionType, ir.HeaderStackType, ir.ExternType, ir.TupleType))


def _used_actions(program: ir.Program) -> list[ir.Action]:
    """p4c keeps an action in P4Info when a table names it or a control, parser or function calls it (not when
    only other actions call it); in declaration order."""
    used: set[str] = set()
    for t in program.all_tables():
        used.update(r.action for r in t.actions)
        used.add(t.default_action.action)
    roots: list[object] = [c.apply for c in program.controls] + [p.states for p in program.parsers]
    roots += [f.body for f in program.functions]
    for root in roots:
        _called_actions(root, used)
    # An action called only from other actions is inlined by p4c and not listed (checked against p4c 1.2.5.16).
    by_name = {a.qualified_name: a for a in program.all_actions()}
    for name in used - by_name.keys():
        raise SchemaError(f"table action {name} is not declared")
    return [a for a in program.all_actions() if a.qualified_name in used]


class _Enums:
    """The serializable enums P4Info objects are typed with, in the order first met."""

    def __init__(self) -> None:
        self.found: dict[str, schema.SerializableEnum] = {}

    def note(self, t: ir.Type) -> str | None:
        """Record `t` if it is a serializable enum; its name, else None."""
        if not isinstance(t, ir.EnumType) or t.underlying is None:
            return None
        if t.name not in self.found:
            members = tuple((m, t.value_of(m)) for m in t.members)
            self.found[t.name] = schema.SerializableEnum(t.name, t.underlying.width, members)
        return t.name


def program_schema(program: ir.Program) -> schema.Program:
    enums = _Enums()
    tables: list[schema.Table] = []
    direct_tables: dict[str, str] = {}
    for t in program.all_tables():
        for k in t.keys:
            enums.note(k.expr.type)
        fields = tuple(
            schema.MatchField(k.name, width_of(k.expr.type, k.loc, f"key {k.name} of {t.qualified_name}"),
                              k.match_kind, _id_of(k.annotations))
            for k in t.keys if k.match_kind != "selector")
        refs = tuple(_action_ref(r) for r in t.actions)
        if t.default_action.action not in {r.action for r in t.actions}:
            # p4c lists an implicit default (NoAction) as a default-only action of the table
            refs += (schema.ActionRef(t.default_action.action, "DEFAULT_ONLY", ("@defaultonly",)),)
        if t.counters:
            direct_tables[t.counters] = t.qualified_name
        if t.meters:
            direct_tables[t.meters] = t.qualified_name
        default = t.default_action
        tables.append(schema.Table(
            _named(t.qualified_name, t.annotations), fields, refs,
            size=t.size if t.size is not None else 1024,
            const_default_action=default.action if t.default_action_const else None,
            is_const=bool(t.entries) and t.entries_const,
            has_initial_entries=bool(t.entries),
            direct_counter=t.counters, direct_meter=t.meters, support_timeout=t.support_timeout,
            initial_default_action=default.action,
            initial_default_args=tuple(_constant_value(e, default.loc) for e in default.args)))

    actions = []
    for a in _used_actions(program):
        for p in a.data_params:
            enums.note(p.type)
        params = tuple(schema.Param(p.name, width_of(p.type, p.loc, f"parameter {p.name} of {a.qualified_name}"),
                                    _id_of(p.annotations)) for p in a.data_params)
        actions.append(schema.Action(_named(a.qualified_name, a.annotations), params))

    counters, dcounters, meters, dmeters, registers = [], [], [], [], []
    for inst in program.all_instances():
        kind = inst.type.name
        named = _named(inst.qualified_name, inst.annotations)
        if kind == "counter":
            counters.append(schema.Counter(named, _unit(inst, _COUNTER_UNITS), inst.size or 0))
        elif kind == "direct_counter":
            if inst.qualified_name in direct_tables:  # p4c leaves out direct counters no table uses
                dcounters.append(schema.DirectCounter(named, _unit(inst, _COUNTER_UNITS),
                                                      direct_tables[inst.qualified_name]))
        elif kind == "meter":
            meters.append(schema.Meter(named, _unit(inst, _METER_UNITS), inst.size or 0))
        elif kind == "direct_meter":
            if inst.qualified_name in direct_tables:
                dmeters.append(schema.DirectMeter(named, _unit(inst, _METER_UNITS),
                                                  direct_tables[inst.qualified_name]))
        elif kind == "register":
            elem = inst.type.type_args[0] if inst.type.type_args else ir.BitType(32)
            registers.append(schema.Register(named, width_of(elem, inst.loc, f"register {inst.qualified_name}"),
                                             inst.size or 0))

    headers = []
    for kind, h in program.controller_headers:
        for f in h.fields:
            enums.note(f.type)
        named = dataclasses.replace(_named(kind, h.annotations), id_name=h.name)  # p4c hashes the type's name
        headers.append(schema.ControllerHeader(
            named, tuple((f.name, width_of(f.type, f.loc, f"{kind} field {f.name}")) for f in h.fields)))
    digests = []
    for d in program.digests:
        typed = tuple((f.name, name) for f in d.type.fields if (name := enums.note(f.type)) is not None)
        digests.append(schema.Digest(
            _named(d.name, d.annotations),
            tuple((f.name, width_of(f.type, f.loc, f"digest field {d.name}.{f.name}")) for f in d.type.fields),
            typed))
    name = pathlib.Path(program.files[0]).stem if program.files else "program"
    return schema.Program(name, tuple(tables), tuple(actions), tuple(counters), tuple(dcounters),
                          tuple(meters), tuple(dmeters), tuple(registers), tuple(digests), tuple(headers),
                          tuple(enums.found.values()))


def _id_of(annotations: tuple[ir.Annotation, ...]) -> int | None:
    a = ir.find_annotation(annotations, "id")
    return a.values[0] if a is not None and a.values and isinstance(a.values[0], int) else None
