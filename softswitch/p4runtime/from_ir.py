"""The front end's typed IR (`softswitch.frontend.ir.Program`) → the P4Info schema (`schema.Program`).

Only objects the control plane can reach are described: tables, the actions tables name, counters, meters,
registers, digests and `@controller_header` headers (p4c does the same). Names are already qualified by the
front end (`@name` applied), so this module only reads widths, kinds and annotations.
"""

from __future__ import annotations

import pathlib

from softswitch.frontend import ir
from softswitch.p4runtime import schema

_COUNTER_UNITS = {"packets": "PACKETS", "bytes": "BYTES", "packets_and_bytes": "BOTH"}
_METER_UNITS = {"packets": "PACKETS", "bytes": "BYTES"}
_SKIP_ANNOTATIONS = {"name", "id", "brief", "tableonly", "defaultonly", "description", "controller_header"}


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


def program_schema(program: ir.Program) -> schema.Program:
    tables: list[schema.Table] = []
    used_actions: list[str] = []
    direct_tables: dict[str, str] = {}
    for t in program.all_tables():
        fields = tuple(
            schema.MatchField(k.name, width_of(k.expr.type, k.loc, f"key {k.name} of {t.qualified_name}"),
                              k.match_kind, _id_of(k.annotations))
            for k in t.keys if k.match_kind != "selector")
        refs = tuple(schema.ActionRef(r.action, _scope(r)) for r in t.actions)
        if t.default_action.action not in {r.action for r in t.actions}:
            # p4c lists an implicit default (NoAction) as a default-only action of the table
            refs += (schema.ActionRef(t.default_action.action, "DEFAULT_ONLY"),)
        for name in [r.action for r in t.actions] + [t.default_action.action]:
            if name not in used_actions:
                used_actions.append(name)
        if t.counters:
            direct_tables[t.counters] = t.qualified_name
        if t.meters:
            direct_tables[t.meters] = t.qualified_name
        tables.append(schema.Table(
            _named(t.qualified_name, t.annotations), fields, refs,
            size=t.size if t.size is not None else 1024,
            const_default_action=t.default_action.action if t.default_action_const else None,
            is_const=bool(t.entries) and t.entries_const,
            has_initial_entries=bool(t.entries),
            direct_counter=t.counters, direct_meter=t.meters, support_timeout=t.support_timeout))

    actions = []
    for name in used_actions:
        a = program.action(name)
        if a is None:
            raise SchemaError(f"table action {name} is not declared")
        params = tuple(schema.Param(p.name, width_of(p.type, p.loc, f"parameter {p.name} of {name}"),
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
            elem = inst.type.type_args[0] if inst.type.type_args else None
            registers.append(schema.Register(named, width_of(elem, inst.loc, f"register {inst.qualified_name}"),
                                             inst.size or 0))

    digests = tuple(
        schema.Digest(_named(d.name, d.annotations),
                      tuple((f.name, width_of(f.type, f.loc, f"digest field {d.name}.{f.name}"))
                            for f in d.type.fields))
        for d in program.digests)
    headers = tuple(
        schema.ControllerHeader(schema.Named(kind), tuple((f.name, width_of(f.type, f.loc, f"{kind} field {f.name}"))
                                                          for f in h.fields))
        for kind, h in program.controller_headers)
    name = pathlib.Path(program.files[0]).stem if program.files else "program"
    return schema.Program(name, tuple(tables), tuple(actions), tuple(counters), tuple(dcounters),
                          tuple(meters), tuple(dmeters), tuple(registers), digests, headers)


def _id_of(annotations: tuple[ir.Annotation, ...]) -> int | None:
    a = ir.find_annotation(annotations, "id")
    return a.values[0] if a is not None and a.values and isinstance(a.values[0], int) else None
