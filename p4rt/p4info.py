"""Look up P4Info ids, widths and serializable-enum values by name, so no number the P4Info has is repeated in code.

Target-neutral (BMv2 and the softswitch alike). Names may be given fully qualified (`MyIngress.kv_index`) or by alias (`kv_index`), as P4Info's preamble
offers both; an unknown name raises `KeyError` listing the known ones, since it usually means the controller
and the P4 program disagree about `docs/naming.md`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2


@dataclass(frozen=True, slots=True)
class MatchField:
    id: int
    name: str
    bitwidth: int
    match_type: str
    """EXACT, LPM, TERNARY, RANGE or OPTIONAL."""


@dataclass(frozen=True, slots=True)
class Param:
    id: int
    name: str
    bitwidth: int


def _by_name(items, kind: str) -> dict[str, object]:
    index: dict[str, object] = {}
    for item in items:
        index[item.preamble.name] = item
        index.setdefault(item.preamble.alias, item)
    return index


class P4Info:
    """An indexed `p4.config.v1.P4Info`."""

    def __init__(self, message: p4info_pb2.P4Info) -> None:
        self.message = message
        self._tables = _by_name(message.tables, "table")
        self._actions = _by_name(message.actions, "action")
        self._counters = _by_name(message.counters, "counter")
        self._direct_counters = _by_name(message.direct_counters, "direct counter")
        self._digests = _by_name(message.digests, "digest")
        self._packet_metadata = {m.preamble.name: m for m in message.controller_packet_metadata}
        self._ids = {}
        for group in (message.tables, message.actions, message.counters, message.direct_counters,
                      message.digests, message.registers, message.meters):
            for item in group:
                self._ids[item.preamble.id] = item.preamble.name

    # ---- loading -----------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> P4Info:
        """Read a P4Info file in text format (`.txt`, `.txtpb`, `.pb.txt`) or binary (`.bin`, `.pb`)."""
        path = Path(path)
        data = path.read_bytes()
        message = p4info_pb2.P4Info()
        if path.suffix in {".bin", ".pb"} and not path.name.endswith(".pb.txt"):
            message.ParseFromString(data)
        else:
            try:
                text_format.Parse(data.decode(), message)
            except text_format.ParseError as exc:
                raise ValueError(f"{path}: not a P4Info in text format: {exc}") from exc
        return cls(message)

    # ---- lookups -----------------------------------------------------------------------------------------

    @staticmethod
    def _get(index: dict, name: str, kind: str):
        try:
            return index[name]
        except KeyError:
            known = sorted({item.preamble.name for item in index.values()})
            raise KeyError(f"no {kind} named {name!r} in P4Info; known: {', '.join(known) or '(none)'}") from None

    def name_of(self, object_id: int) -> str:
        return self._ids.get(object_id, f"<id {object_id}>")

    def table_id(self, name: str) -> int:
        return self._get(self._tables, name, "table").preamble.id

    def table_name(self, name: str) -> str:
        """The fully qualified name of a table given by either name."""
        return self._get(self._tables, name, "table").preamble.name

    def has_table(self, name: str) -> bool:
        return name in self._tables

    def match_fields(self, table: str) -> list[MatchField]:
        fields = []
        for field in self._get(self._tables, table, "table").match_fields:
            kind = p4info_pb2.MatchField.MatchType.Name(field.match_type)
            fields.append(MatchField(field.id, field.name, field.bitwidth, kind))
        return fields

    def match_field(self, table: str, name: str) -> MatchField:
        for field in self.match_fields(table):
            if field.name == name or field.name.split(".")[-1] == name:
                return field
        known = ", ".join(f.name for f in self.match_fields(table))
        raise KeyError(f"table {table!r} has no key field {name!r}; known: {known}")

    def match_field_by_id(self, table: str, field_id: int) -> MatchField:
        for field in self.match_fields(table):
            if field.id == field_id:
                return field
        raise KeyError(f"table {table!r} has no key field id {field_id}")

    def action_id(self, name: str) -> int:
        return self._get(self._actions, name, "action").preamble.id

    def action_name(self, action_id: int) -> str:
        for action in self.message.actions:
            if action.preamble.id == action_id:
                return action.preamble.name
        raise KeyError(f"no action with id {action_id}")

    def params(self, action: str) -> list[Param]:
        return [Param(p.id, p.name, p.bitwidth) for p in self._get(self._actions, action, "action").params]

    def param(self, action: str, name: str) -> Param:
        for param in self.params(action):
            if param.name == name:
                return param
        known = ", ".join(p.name for p in self.params(action))
        raise KeyError(f"action {action!r} has no parameter {name!r}; known: {known}")

    def counter_id(self, name: str) -> int:
        return self._get(self._counters, name, "counter").preamble.id

    def counter_size(self, name: str) -> int:
        return self._get(self._counters, name, "counter").size

    def direct_counter_id(self, name: str) -> int:
        return self._get(self._direct_counters, name, "direct counter").preamble.id

    def digest_id(self, name: str) -> int:
        return self._get(self._digests, name, "digest").preamble.id

    def has_digest(self, name: str) -> bool:
        return name in self._digests

    def digest_fields(self, name: str) -> list[tuple[str, int]]:
        """(member name, bitwidth) of a digest's struct, in order, from P4Info's type_info."""
        digest = self._get(self._digests, name, "digest")
        struct_name = digest.type_spec.struct.name
        struct = self.message.type_info.structs[struct_name]
        return [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in struct.members]

    def packet_metadata(self, header: str) -> list[Param]:
        """Fields of the `@controller_header(header)` header ("packet_in" or "packet_out")."""
        try:
            meta = self._packet_metadata[header]
        except KeyError:
            raise KeyError(f"P4Info has no controller header {header!r}") from None
        return [Param(m.id, m.name, m.bitwidth) for m in meta.metadata]

    def enum_value(self, enum: str, member: str) -> int:
        """Value of a serializable enum member, e.g. `enum_value("kvp_opcode_t", "SLOT_WRITE")`."""
        return self.enum_members(enum)[member]

    def enum_members(self, enum: str, fallback: Mapping[str, int] | None = None) -> dict[str, int]:
        """Members of a serializable enum from P4Info, else `fallback` (a packaged copy of the program's codes).

        p4c lists a serializable enum in P4Info only when a P4Info object has that type, so BMv2's P4Info
        may lack codes the controller reads (docs/naming.md, *Enums*). The controller then uses its packaged
        copy (`controller.codes`, checked against the P4 source by the tests), never the source at run time.
        """
        enums = self.message.type_info.serializable_enums
        if enum in enums:
            return {m.name: int.from_bytes(m.value, "big") for m in enums[enum].members}
        if fallback is not None:
            return dict(fallback)
        raise KeyError(f"no serializable enum {enum!r} in P4Info (known: {', '.join(sorted(enums)) or 'none'})")

    def has_action_param(self, action: str, name: str) -> bool:
        return action in self._actions and any(p.name == name for p in self.params(action))


# ---- reading codes from P4 source: for tools and tests that check a packaged copy, never at run time --------

_ENUM = re.compile(r"enum\s+bit\s*<\s*\d+\s*>\s+(\w+)\s*\{([^}]*)\}", re.S)
_MEMBER = re.compile(r"(\w+)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)")


def enum_from_source(text: str, enum: str) -> dict[str, int]:
    """`{member: value}` of `enum bit<W> enum { ... }` in P4 source text (comments stripped), {} if absent."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    for match in _ENUM.finditer(text):
        if match.group(1) == enum:
            return {name: int(value, 0) for name, value in _MEMBER.findall(match.group(2))}
    return {}
