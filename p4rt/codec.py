"""The entity codec: `p4rt.entities` ↔ P4Runtime protobuf, with ids and widths looked up in P4Info.

One implementation for every P4Runtime client of the project (the controller; tools and tests driving BMv2 or
the softswitch). Values go out as canonical byte strings (`p4rt.bytestrings`); entries read back are decoded
whatever form the target used. Match fields and parameters are named as P4Info names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from p4.v1 import p4runtime_pb2

from p4rt.bytestrings import decode, encode, mask_for_prefix
from p4rt.entities import Exact, Lpm, Match, OptionalMatch, Range, TableEntry, Ternary
from p4rt.p4info import P4Info


def fill_match(message: p4runtime_pb2.FieldMatch, value: Match, bitwidth: int) -> None:
    """Set one FieldMatch (its field_id aside) from a match value; LPM and ternary values are masked first."""
    if isinstance(value, Exact):
        message.exact.value = encode(value.value, bitwidth)
    elif isinstance(value, Lpm):
        masked = value.value & mask_for_prefix(value.prefix_len, bitwidth)
        message.lpm.value = encode(masked, bitwidth)
        message.lpm.prefix_len = value.prefix_len
    elif isinstance(value, Ternary):
        message.ternary.value = encode(value.value & value.mask, bitwidth)
        message.ternary.mask = encode(value.mask, bitwidth)
    elif isinstance(value, Range):
        message.range.low = encode(value.low, bitwidth)
        message.range.high = encode(value.high, bitwidth)
    elif isinstance(value, OptionalMatch):
        message.optional.value = encode(value.value, bitwidth)
    else:  # pragma: no cover - the Match union is closed
        raise TypeError(f"unknown match kind {value!r}")


def decode_match(message: p4runtime_pb2.FieldMatch) -> Match | None:
    """The match value of one FieldMatch; None for a kind this codec does not know."""
    kind = message.WhichOneof("field_match_type")
    if kind == "exact":
        return Exact(decode(message.exact.value))
    if kind == "lpm":
        return Lpm(decode(message.lpm.value), message.lpm.prefix_len)
    if kind == "ternary":
        return Ternary(decode(message.ternary.value), decode(message.ternary.mask))
    if kind == "range":
        return Range(decode(message.range.low), decode(message.range.high))
    if kind == "optional":
        return OptionalMatch(decode(message.optional.value))
    return None


def fill_table_entry(info: P4Info, message: p4runtime_pb2.TableEntry, entry: TableEntry,
                     with_action: bool = True) -> None:
    """Set `message` from `entry`; `with_action=False` for a DELETE (which names the entry by its key only)."""
    message.table_id = info.table_id(entry.table)
    message.priority = entry.priority
    for name, value in entry.match.items():
        field = info.match_field(entry.table, name)
        match = message.match.add()
        match.field_id = field.id
        fill_match(match, value, field.bitwidth)
    if entry.action and with_action:
        message.action.action.action_id = info.action_id(entry.action)
        for name, number in entry.params.items():
            param = info.param(entry.action, name)
            message.action.action.params.add(param_id=param.id, value=encode(number, param.bitwidth))


def encode_table_entry(info: P4Info, entry: TableEntry) -> p4runtime_pb2.TableEntry:
    message = p4runtime_pb2.TableEntry()
    fill_table_entry(info, message, entry)
    return message


def default_action_entity(info: P4Info, table: str, action: str,
                          params: Mapping[str, int] | None = None) -> p4runtime_pb2.Entity:
    """The entity that sets `table`'s default action to `action(params)` (written with MODIFY)."""
    entity = p4runtime_pb2.Entity()
    fill_table_entry(info, entity.table_entry, TableEntry(table, {}, action, dict(params or {})))
    entity.table_entry.is_default_action = True
    return entity


def decode_table_entry(info: P4Info, message: p4runtime_pb2.TableEntry) -> TableEntry:
    """A table entry read back; fields and parameters by their P4Info names, the table by its full name."""
    table = info.name_of(message.table_id)
    match: dict[str, Match] = {}
    for field_match in message.match:
        value = decode_match(field_match)
        if value is not None:
            match[info.match_field_by_id(table, field_match.field_id).name] = value
    action = info.action_name(message.action.action.action_id) if message.action.HasField("action") else ""
    params = {}
    if action:
        names = {p.id: p.name for p in info.params(action)}
        params = {names[p.param_id]: decode(p.value) for p in message.action.action.params}
    return TableEntry(table, match, action, params, message.priority)
