"""P4Info generation: a `schema.Program` → `p4.config.v1.P4Info`, with p4c's id and alias rules.

Ids follow the P4Runtime spec (p4info.proto `P4Ids.Prefix`): the most significant byte names the object type,
the low 24 bits come from `@id` or from a Jenkins one-at-a-time hash of the fully qualified name, as p4c
computes them, so the same program gets the same ids on every run and on BMv2. Collisions are resolved by
linear probing over names in sorted order (deterministic, like p4c); `@id` values are taken first.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2, p4types_pb2

from softswitch.p4runtime import schema

# P4Runtime spec, p4info.proto P4Ids.Prefix
PREFIX_ACTION = 0x01
PREFIX_TABLE = 0x02
PREFIX_VALUE_SET = 0x03
PREFIX_CONTROLLER_HEADER = 0x04
PREFIX_ACTION_PROFILE = 0x11
PREFIX_COUNTER = 0x12
PREFIX_DIRECT_COUNTER = 0x13
PREFIX_METER = 0x14
PREFIX_DIRECT_METER = 0x15
PREFIX_REGISTER = 0x16
PREFIX_DIGEST = 0x17

_MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}
_SCOPES = {
    "TABLE_AND_DEFAULT": p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
    "TABLE_ONLY": p4info_pb2.ActionRef.TABLE_ONLY,
    "DEFAULT_ONLY": p4info_pb2.ActionRef.DEFAULT_ONLY,
}


class P4InfoError(ValueError):
    """The program cannot be described in P4Info (an `@id` clash, a bad `@id`)."""


def jenkins_one_at_a_time(data: bytes) -> int:
    """Bob Jenkins' one-at-a-time hash, 32 bits: the hash p4c applies to names to derive ids."""
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


class IdAllocator:
    """Assigns ids for one program: `@id` first, then hashed names per type in sorted order."""

    def __init__(self) -> None:
        self._taken: set[int] = set()

    def assign(self, prefix: int, items: Iterable[schema.Named]) -> dict[str, int]:
        items = list(items)
        ids: dict[str, int] = {}
        for named in items:
            if named.fixed_id is None:
                continue
            fixed = named.fixed_id
            if fixed >> 24 == 0:
                fixed |= prefix << 24
            elif fixed >> 24 != prefix:
                raise P4InfoError(f"@id({named.fixed_id:#x}) of {named.name} has the wrong type prefix "
                                  f"(expected {prefix:#04x})")
            if fixed in self._taken:
                raise P4InfoError(f"@id({named.fixed_id:#x}) of {named.name} is used twice")
            self._taken.add(fixed)
            ids[named.name] = fixed
        hashed = sorted((n.id_name or n.name, n.name) for n in items if n.fixed_id is None)
        for id_name, name in hashed:
            low = jenkins_one_at_a_time(id_name.encode()) & 0xFFFFFF
            for probe in range(1 << 24):
                candidate = (prefix << 24) | ((low + probe) & 0xFFFFFF)
                if candidate & 0xFFFFFF and candidate not in self._taken:
                    break
            else:  # pragma: no cover - 16M objects of one type
                raise P4InfoError(f"no id left for {name}")
            self._taken.add(candidate)
            ids[name] = candidate
        return ids


def shortest_unique_suffixes(names: Iterable[str]) -> dict[str, str]:
    """p4c's default alias: the shortest dot-separated suffix of a name that no other name ends with."""
    names = sorted(set(names))
    parts = {n: n.split(".") for n in names}
    aliases: dict[str, str] = {}
    for n in names:
        for k in range(1, len(parts[n]) + 1):
            suffix = ".".join(parts[n][-k:])
            clash = any(o != n and (o == suffix or o.endswith("." + suffix)) for o in names)
            if not clash:
                aliases[n] = suffix
                break
        else:
            aliases[n] = n
    return aliases


def _preamble(pre: p4info_pb2.Preamble, named: schema.Named, ident: int, alias: str) -> None:
    pre.id = ident
    pre.name = named.name
    pre.alias = alias
    pre.annotations.extend(named.annotations)
    if named.brief:
        pre.doc.brief = named.brief


def _bitstring(spec: p4types_pb2.P4DataTypeSpec, bitwidth: int) -> None:
    spec.bitstring.bit.bitwidth = bitwidth


def _numbered(fixed: Iterable[int | None]) -> list[int]:
    """Ids for match fields, params and metadata: `@id` if given, else 1, 2, ... skipping taken ones."""
    fixed = list(fixed)
    taken = {f for f in fixed if f is not None}
    out, nxt = [], 1
    for f in fixed:
        if f is not None:
            out.append(f)
            continue
        while nxt in taken:
            nxt += 1
        out.append(nxt)
        taken.add(nxt)
    return out


def build_p4info(program: schema.Program, arch: str = "v1model") -> p4info_pb2.P4Info:
    """Describe `program` in P4Info; raises `P4InfoError` on an id clash or a dangling reference."""
    alloc = IdAllocator()
    tid = alloc.assign(PREFIX_TABLE, (t.named for t in program.tables))
    aid = alloc.assign(PREFIX_ACTION, (a.named for a in program.actions))
    cid = alloc.assign(PREFIX_COUNTER, (c.named for c in program.counters))
    dcid = alloc.assign(PREFIX_DIRECT_COUNTER, (c.named for c in program.direct_counters))
    mid = alloc.assign(PREFIX_METER, (m.named for m in program.meters))
    dmid = alloc.assign(PREFIX_DIRECT_METER, (m.named for m in program.direct_meters))
    rid = alloc.assign(PREFIX_REGISTER, (r.named for r in program.registers))
    did = alloc.assign(PREFIX_DIGEST, (d.named for d in program.digests))
    hid = alloc.assign(PREFIX_CONTROLLER_HEADER, (h.named for h in program.controller_headers))

    all_named = [o.named for group in (program.tables, program.actions, program.counters,
                                       program.direct_counters, program.meters, program.direct_meters,
                                       program.registers, program.digests) for o in group]
    alias = shortest_unique_suffixes(n.name for n in all_named)
    alias.update({h.named.name: h.named.name for h in program.controller_headers})

    def ref(ids: dict[str, int], name: str, what: str, user: str) -> int:
        try:
            return ids[name]
        except KeyError:
            raise P4InfoError(f"{user} refers to unknown {what} {name!r}") from None

    info = p4info_pb2.P4Info()
    info.pkg_info.arch = arch  # p4c leaves pkg_info.name unset unless the program has @pkginfo

    actions_by_name = {a.named.name: a for a in program.actions}
    for t in program.tables:
        pt = info.tables.add()
        _preamble(pt.preamble, t.named, tid[t.named.name], alias[t.named.name])
        for ident, mf in zip(_numbered(m.fixed_id for m in t.match_fields), t.match_fields, strict=True):
            pm = pt.match_fields.add(id=ident, name=mf.name, bitwidth=mf.bitwidth)
            try:
                pm.match_type = _MATCH_TYPES[mf.match_type]
            except KeyError:
                pm.other_match_type = mf.match_type
        for ar in t.action_refs:
            pt.action_refs.add(id=ref(aid, ar.name, "action", t.named.name), scope=_SCOPES[ar.scope],
                               annotations=ar.annotations)
        if t.const_default_action:
            pt.const_default_action_id = ref(aid, t.const_default_action, "action", t.named.name)
        if t.initial_default_action:
            default = pt.initial_default_action
            default.action_id = ref(aid, t.initial_default_action, "action", t.named.name)
            widths = [p.bitwidth for p in actions_by_name[t.initial_default_action].params]
            for param_id, (value, width) in enumerate(zip(t.initial_default_args, widths, strict=True), 1):
                default.arguments.add(param_id=param_id, value=value.to_bytes((width + 7) // 8, "big"))
        if t.direct_counter:
            pt.direct_resource_ids.append(ref(dcid, t.direct_counter, "direct_counter", t.named.name))
        if t.direct_meter:
            pt.direct_resource_ids.append(ref(dmid, t.direct_meter, "direct_meter", t.named.name))
        pt.size = t.size
        pt.is_const_table = t.is_const
        pt.has_initial_entries = t.has_initial_entries
        if t.support_timeout:
            pt.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL

    for a in program.actions:
        pa = info.actions.add()
        _preamble(pa.preamble, a.named, aid[a.named.name], alias[a.named.name])
        for ident, p in zip(_numbered(p.fixed_id for p in a.params), a.params, strict=True):
            pa.params.add(id=ident, name=p.name, bitwidth=p.bitwidth)

    for c in program.counters:
        pc = info.counters.add(size=c.size)
        _preamble(pc.preamble, c.named, cid[c.named.name], alias[c.named.name])
        pc.spec.unit = p4info_pb2.CounterSpec.Unit.Value(c.unit)
    for dc in program.direct_counters:
        pdc = info.direct_counters.add()
        _preamble(pdc.preamble, dc.named, dcid[dc.named.name], alias[dc.named.name])
        pdc.spec.unit = p4info_pb2.CounterSpec.Unit.Value(dc.unit)
        pdc.direct_table_id = ref(tid, dc.table, "table", dc.named.name)
    for m in program.meters:
        pm = info.meters.add(size=m.size)
        _preamble(pm.preamble, m.named, mid[m.named.name], alias[m.named.name])
        pm.spec.unit = p4info_pb2.MeterSpec.Unit.Value(m.unit)
    for dm in program.direct_meters:
        pdm = info.direct_meters.add()
        _preamble(pdm.preamble, dm.named, dmid[dm.named.name], alias[dm.named.name])
        pdm.spec.unit = p4info_pb2.MeterSpec.Unit.Value(dm.unit)
        pdm.direct_table_id = ref(tid, dm.table, "table", dm.named.name)

    for h in program.controller_headers:
        ph = info.controller_packet_metadata.add()
        _preamble(ph.preamble, h.named, hid[h.named.name], alias[h.named.name])
        for ident, (fname, width) in zip(_numbered(None for _ in h.fields), h.fields, strict=True):
            ph.metadata.add(id=ident, name=fname, bitwidth=width)

    for r in program.registers:
        pr = info.registers.add(size=r.size)
        _preamble(pr.preamble, r.named, rid[r.named.name], alias[r.named.name])
        _bitstring(pr.type_spec, r.bitwidth)

    for d in program.digests:
        pd = info.digests.add()
        _preamble(pd.preamble, d.named, did[d.named.name], alias[d.named.name])
        pd.type_spec.struct.name = d.named.name
        struct = info.type_info.structs[d.named.name]
        enum_of = dict(d.field_enums)
        for fname, width in d.fields:
            member = struct.members.add(name=fname)
            if fname in enum_of:
                member.type_spec.serializable_enum.name = enum_of[fname]
            else:
                _bitstring(member.type_spec, width)
    for e in program.serializable_enums:
        pe = info.type_info.serializable_enums[e.name]
        pe.underlying_type.bitwidth = e.bitwidth
        for member, value in e.members:
            pe.members.add(name=member, value=value.to_bytes((e.bitwidth + 7) // 8, "big"))
    info.type_info.SetInParent()  # p4c always writes `type_info {}`
    return info


def to_text(info: p4info_pb2.P4Info) -> str:
    """The text format p4c writes with `--p4runtime-files X.p4info.txtpb` (and p4runtime-shell reads)."""
    return text_format.MessageToString(info)


def from_text(text: str) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Merge(text, info, allow_unknown_field=True)
    return info
