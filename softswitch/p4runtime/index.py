"""Look-ups into one P4Info by id, built once per committed pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from p4.config.v1 import p4info_pb2, p4types_pb2

from softswitch.p4runtime.errors import P4RuntimeError, invalid, not_found


@dataclass(frozen=True, slots=True)
class FieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int = 0


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: dict[int, FieldInfo]


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    fields: dict[int, FieldInfo]
    actions: dict[int, int]
    """action id → ActionRef.Scope"""
    const_default_action_id: int
    is_const: bool
    size: int
    direct_counter_id: int
    direct_meter_id: int
    needs_priority: bool
    """Has a ternary, range or optional key: entries need a priority > 0."""


@dataclass(frozen=True, slots=True)
class SizedInfo:
    """Counters, meters and registers: indexed arrays."""

    id: int
    name: str
    size: int
    unit: int = 0
    bitwidth: int = 0


@dataclass(frozen=True, slots=True)
class DigestInfo:
    id: int
    name: str
    fields: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    """A `@controller_header` header: metadata in header order."""

    id: int
    name: str
    fields: tuple[FieldInfo, ...]

    @property
    def byte_len(self) -> int:
        return (sum(f.bitwidth for f in self.fields) + 7) // 8


_PRIORITY_KINDS = (p4info_pb2.MatchField.TERNARY, p4info_pb2.MatchField.RANGE, p4info_pb2.MatchField.OPTIONAL)


class P4InfoIndex:
    """Id → object maps of a P4Info; every look-up failure is a ready-to-send P4RuntimeError."""

    def __init__(self, info: p4info_pb2.P4Info) -> None:
        self.info = info
        self.actions = {
            a.preamble.id: ActionInfo(a.preamble.id, a.preamble.name,
                                      {p.id: FieldInfo(p.id, p.name, p.bitwidth) for p in a.params})
            for a in info.actions
        }
        self._action_by_name = {a.name: a for a in self.actions.values()}
        dc_of = {d.direct_table_id: d.preamble.id for d in info.direct_counters}
        dm_of = {d.direct_table_id: d.preamble.id for d in info.direct_meters}
        self.tables = {
            t.preamble.id: TableInfo(
                t.preamble.id, t.preamble.name,
                {m.id: FieldInfo(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields},
                {r.id: r.scope for r in t.action_refs},
                t.const_default_action_id, t.is_const_table, t.size,
                dc_of.get(t.preamble.id, 0), dm_of.get(t.preamble.id, 0),
                any(m.match_type in _PRIORITY_KINDS for m in t.match_fields))
            for t in info.tables
        }
        self.counters = {c.preamble.id: SizedInfo(c.preamble.id, c.preamble.name, c.size, c.spec.unit)
                         for c in info.counters}
        self.direct_counters = {c.preamble.id: c.direct_table_id for c in info.direct_counters}
        self.meters = {m.preamble.id: SizedInfo(m.preamble.id, m.preamble.name, m.size, m.spec.unit)
                       for m in info.meters}
        self.registers = {
            r.preamble.id: SizedInfo(r.preamble.id, r.preamble.name, r.size,
                                     bitwidth=r.type_spec.bitstring.bit.bitwidth
                                     or r.type_spec.bitstring.int.bitwidth)
            for r in info.registers
        }
        self.digests: dict[int, DigestInfo] = {}
        self.digest_by_name: dict[str, DigestInfo] = {}
        for d in info.digests:
            struct = info.type_info.structs.get(d.type_spec.struct.name)
            fields = tuple((m.name, _width_of(m.type_spec, info)) for m in struct.members) if struct else ()
            di = DigestInfo(d.preamble.id, d.preamble.name, fields)
            self.digests[di.id] = di
            self.digest_by_name[di.name] = di
            if d.type_spec.struct.name:
                self.digest_by_name.setdefault(d.type_spec.struct.name, di)
        self.headers: dict[str, HeaderInfo] = {
            h.preamble.name: HeaderInfo(h.preamble.id, h.preamble.name,
                                        tuple(FieldInfo(m.id, m.name, m.bitwidth) for m in h.metadata))
            for h in info.controller_packet_metadata
        }

    # each raises NOT_FOUND with the id in hex (how p4c prints them) when unknown
    def table(self, ident: int) -> TableInfo:
        if ident not in self.tables:
            raise not_found(f"no table with id {ident:#x}")
        return self.tables[ident]

    def action(self, ident: int) -> ActionInfo:
        if ident not in self.actions:
            raise invalid(f"no action with id {ident:#x}")
        return self.actions[ident]

    def action_by_name(self, name: str) -> ActionInfo:
        """The action a target names in its entries (INTERNAL: a program and its P4Info disagree)."""
        info = self._action_by_name.get(name)
        if info is None:
            raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"target action {name!r} is not in P4Info")
        return info

    def counter(self, ident: int) -> SizedInfo:
        if ident not in self.counters:
            raise not_found(f"no counter with id {ident:#x}")
        return self.counters[ident]

    def meter(self, ident: int) -> SizedInfo:
        if ident not in self.meters:
            raise not_found(f"no meter with id {ident:#x}")
        return self.meters[ident]

    def register(self, ident: int) -> SizedInfo:
        if ident not in self.registers:
            raise not_found(f"no register with id {ident:#x}")
        return self.registers[ident]

    def digest(self, ident: int) -> DigestInfo:
        if ident not in self.digests:
            raise not_found(f"no digest with id {ident:#x}")
        return self.digests[ident]


def _width_of(spec: p4types_pb2.P4DataTypeSpec, info: p4info_pb2.P4Info) -> int:
    """A digest member's width: its bitstring's, or its serializable enum's underlying width (p4c types digest
    members with the enum when the struct field has one)."""
    if spec.HasField("serializable_enum"):
        enum = info.type_info.serializable_enums.get(spec.serializable_enum.name)
        return enum.underlying_type.bitwidth if enum is not None else 0
    return spec.bitstring.bit.bitwidth or spec.bitstring.int.bitwidth
