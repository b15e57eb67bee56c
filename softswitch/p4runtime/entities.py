"""Write and Read of P4Runtime entities against a `Target`: validation per the spec, then one target call.

Each `write_*` takes one Update's entity and raises `P4RuntimeError` with the canonical code the spec names;
each `read_*` yields the entities a (possibly wildcard) Read asks for: `read_entity` serialises them, table entries
and counter cells through `read_response`'s wire encoders. Byte strings go out canonical.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4rt import bytestrings
from softswitch import target as tg
from softswitch.p4runtime import read_response
from softswitch.p4runtime.errors import (
    P4RuntimeError,
    decode_bytestring,
    from_target_code,
    invalid,
    not_found,
)
from softswitch.p4runtime.index import TableInfo
from softswitch.p4runtime.pipeline import Pipeline
from softswitch.p4runtime.write_request import TableWrite, table_write_from_proto

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE
_MT = p4info_pb2.MatchField


def _call(fn, *args, **kwargs):
    """Run a target call, turning its `TargetError` into the matching P4Runtime error."""
    try:
        return fn(*args, **kwargs)
    except tg.TargetError as e:
        raise P4RuntimeError(from_target_code(e.code), e.message) from e
    except (KeyError, IndexError, ValueError) as e:
        raise invalid(f"target refused the request: {e}") from e


def _denied(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, message)


# ---- table entries -------------------------------------------------------------------------------------

def decode_match(t: TableInfo, matches) -> dict[str, tg.Match]:
    """(field_id, kind, a, b) tuples (see `TableWrite.matches`) → target match map.

    Omitted fields are wildcards (refused for exact fields); the spec's rules for canonical don't-care
    forms (no /0 LPM, no zero ternary mask, no full range) are enforced.
    """
    out: dict[str, tg.Match] = {}
    seen: set[int] = set()
    for field_id, kind, a, b in matches:
        f = t.fields.get(field_id)
        if f is None:
            raise invalid(f"table {t.name} has no match field with id {field_id}")
        if field_id in seen:
            raise invalid(f"match field {f.name} given twice")
        seen.add(field_id)
        what = f"{t.name} match field {f.name}"
        full = (1 << f.bitwidth) - 1
        mt = f.match_type
        if kind == "exact" and mt == _MT.EXACT:
            out[f.name] = tg.Exact(decode_bytestring(a, f.bitwidth, what))
        elif kind == "lpm" and mt == _MT.LPM:
            if not 0 < b <= f.bitwidth:
                raise invalid(f"{what}: prefix length {b} not in 1..{f.bitwidth} (omit the field for /0)")
            value = decode_bytestring(a, f.bitwidth, what)
            if value & (full >> b):
                raise invalid(f"{what}: value has bits set beyond the /{b} prefix")
            out[f.name] = tg.Lpm(value, b)
        elif kind == "ternary" and mt == _MT.TERNARY:
            value = decode_bytestring(a, f.bitwidth, what)
            mask = decode_bytestring(b, f.bitwidth, what)
            if mask == 0:
                raise invalid(f"{what}: mask is zero (omit the field for a wildcard)")
            if value & ~mask:
                raise invalid(f"{what}: value has bits set outside the mask")
            out[f.name] = tg.Ternary(value, mask)
        elif kind == "range" and mt == _MT.RANGE:
            low = decode_bytestring(a, f.bitwidth, what)
            high = decode_bytestring(b, f.bitwidth, what)
            if low > high:
                raise invalid(f"{what}: range low {low} > high {high}")
            if low == 0 and high == full:
                raise invalid(f"{what}: full range (omit the field for a wildcard)")
            out[f.name] = tg.Range(low, high)
        elif kind == "optional" and mt == _MT.OPTIONAL:
            out[f.name] = tg.OptionalMatch(decode_bytestring(a, f.bitwidth, what))
        else:
            raise invalid(f"{what}: {kind} match given for a {_MT.MatchType.Name(mt).lower()} field")
    if len(out) < len(t.fields):
        for f in t.fields.values():
            if f.match_type == _MT.EXACT and f.name not in out:
                raise invalid(f"{t.name}: exact match field {f.name} is missing")
    return out


def decode_action(p: Pipeline, t: TableInfo, tw: TableWrite) -> tuple[str, dict[str, int]]:
    if tw.action_kind is None:
        raise invalid(f"{t.name}: entry has no action")
    if tw.action_kind != "action":
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"{t.name}: {tw.action_kind} needs an action profile, which this target does not have")
    info = p.index.action(tw.action_id)
    scope = t.actions.get(tw.action_id)
    if scope is None:
        raise invalid(f"action {info.name} is not an action of table {t.name}")
    if tw.is_default and scope == p4info_pb2.ActionRef.TABLE_ONLY:
        raise invalid(f"action {info.name} is @tableonly in {t.name}: not a default action")
    if not tw.is_default and scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
        raise invalid(f"action {info.name} is @defaultonly in {t.name}: not allowed in entries")
    params: dict[str, int] = {}
    for param_id, value in tw.params:
        pi = info.params.get(param_id)
        if pi is None:
            raise invalid(f"action {info.name} has no parameter with id {param_id}")
        if pi.name in params:
            raise invalid(f"action {info.name}: parameter {pi.name} given twice")
        params[pi.name] = decode_bytestring(value, pi.bitwidth, f"{info.name} parameter {pi.name}")
    if len(params) != len(info.params):
        missing = [pi.name for pi in info.params.values() if pi.name not in params]
        raise invalid(f"action {info.name}: missing parameter(s) {', '.join(missing)}")
    return info.name, params


def encode_action(p: Pipeline, name: str, params) -> p4runtime_pb2.TableAction:
    """A default action as a protobuf TableAction (entries go out through `read_response`)."""
    info = p.index.action_by_name(name)
    ta = p4runtime_pb2.TableAction()
    ta.action.action_id = info.id
    for pi in sorted(info.params.values(), key=lambda x: x.id):
        ta.action.params.add(param_id=pi.id, value=bytestrings.encode(params.get(pi.name, 0)))
    return ta


def _check_priority(t: TableInfo, priority: int) -> None:
    if t.needs_priority and priority <= 0:
        raise invalid(f"{t.name} has ternary/range/optional keys: priority must be > 0")
    if not t.needs_priority and priority != 0:
        raise invalid(f"{t.name} has only exact/lpm keys: priority must be 0")
    if priority >> 31:
        raise invalid(f"priority {priority} does not fit in int32")


def write_table_entry(p: Pipeline, utype: int, tw: TableWrite) -> None:
    t = p.index.table(tw.table_id)
    if tw.is_default:
        if tw.matches:
            raise invalid(f"{t.name}: a default entry has no match fields")
        if utype != MODIFY:
            raise invalid(f"{t.name}: the default entry can only be modified (use MODIFY)")
        if t.const_default_action_id:
            raise _denied(f"{t.name} has a const default action")
        if tw.action_kind is None:  # spec: MODIFY without an action resets to the program's default
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 f"{t.name}: resetting the default entry needs an action on this target")
        name, params = decode_action(p, t, tw)
        _call(p.target.table_set_default, t.name, name, params)
        return
    if t.is_const:
        raise _denied(f"{t.name} is a const table (const entries)")
    match = decode_match(t, tw.matches)
    _check_priority(t, tw.priority)
    key = _entry_key(t.name, match, tw.priority)
    if utype == DELETE:
        _call(p.target.table_delete, t.name, match, tw.priority)
        p.entry_metadata.pop(key, None)
        return
    if tw.idle_timeout_ns:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"{t.name}: idle timeouts are not supported")
    if tw.has_meter_config:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"{t.name}: direct meters are not supported")
    if tw.counter_data is not None and not t.direct_counter_id:
        raise invalid(f"{t.name} has no direct counter: counter_data not allowed")
    name, params = decode_action(p, t, tw)
    entry = tg.TableEntry(t.name, match, name, params, tw.priority)
    if utype == INSERT:
        _call(p.target.table_insert, entry)
    elif utype == MODIFY:
        _call(p.target.table_modify, entry)
    else:
        raise invalid(f"unknown update type {utype}")
    if tw.counter_data is not None:
        write = getattr(p.target, "direct_counter_write", None)
        if write is not None:
            _call(write, t.name, match, *tw.counter_data, priority=tw.priority)
    if tw.controller_metadata or tw.metadata:
        p.entry_metadata[key] = (tw.controller_metadata, tw.metadata)
    elif utype == MODIFY or p.entry_metadata:
        p.entry_metadata.pop(key, None)


def _entry_key(table: str, match, priority: int) -> tuple:
    """Identifies an entry whichever way the target spells its wildcards (omitted, /0, mask 0)."""
    items = frozenset((k, m) for k, m in match.items()
                      if not (isinstance(m, tg.Lpm) and m.prefix_len == 0)
                      and not (isinstance(m, tg.Ternary) and m.mask == 0))
    return (table, items, priority)


def _entry_extras(p: Pipeline, t: TableInfo, e: tg.TableEntry, with_counters: bool):
    """(direct counter (packets, bytes) or None, stored (controller_metadata, metadata) or None) of an entry."""
    counter = None
    if with_counters and t.direct_counter_id:
        counter = _call(p.target.direct_counter_read, t.name, e.match, e.priority)
    stored = p.entry_metadata.get(_entry_key(t.name, e.match, e.priority)) if p.entry_metadata else None
    return counter, stored


def read_table_entries(p: Pipeline, want: p4runtime_pb2.TableEntry) -> Iterator[bytes]:
    """Encoded Entity messages of the table entries `want` selects (wildcards: every table, every entry)."""
    tables = [p.index.table(want.table_id)] if want.table_id else list(p.index.tables.values())
    with_counters = want.HasField("counter_data")
    encode = p.entry_encoder.entity
    for t in tables:
        if want.is_default_action:
            name, params = _call(p.target.table_get_default, t.name)
            te = p4runtime_pb2.TableEntry(table_id=t.id, is_default_action=True)
            te.action.CopyFrom(encode_action(p, name, params))
            yield p4runtime_pb2.Entity(table_entry=te).SerializeToString()
            continue
        filt = decode_match(t, table_write_from_proto(want).matches) if want.table_id and want.match else None
        for e in _call(p.target.table_entries, t.name):
            if filt is not None and (dict(e.match) != filt or (want.priority and e.priority != want.priority)):
                continue
            yield encode(t, e, *_entry_extras(p, t, e, with_counters))


# ---- counters and registers ----------------------------------------------------------------------------

def write_counter_entry(p: Pipeline, utype: int, ce: p4runtime_pb2.CounterEntry) -> None:
    c = p.index.counter(ce.counter_id)
    if utype != MODIFY:
        raise invalid(f"counter {c.name}: only MODIFY is allowed on counter entries")
    if not ce.HasField("index"):
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"counter {c.name}: writing all cells at once (no index) is not supported")
    _check_index(c.name, c.size, ce.index.index)
    _call(p.target.counter_write, c.name, ce.index.index, ce.data.packet_count, ce.data.byte_count)


def _check_index(name: str, size: int, index: int) -> None:
    if not 0 <= index < size:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{name}: index {index} not in 0..{size - 1}")


def read_counter_entries(p: Pipeline, want: p4runtime_pb2.CounterEntry) -> Iterator[bytes]:
    """Encoded Entity messages of the counter cells `want` selects (no index: every cell)."""
    counters = [p.index.counter(want.counter_id)] if want.counter_id else list(p.index.counters.values())
    for c in counters:
        if want.HasField("index"):
            _check_index(c.name, c.size, want.index.index)
            indices: range | list[int] = [want.index.index]
        else:
            indices = range(c.size)
        for i in indices:
            packets, bytes_ = _call(p.target.counter_read, c.name, i)
            yield read_response.counter_entity(c.id, i, packets, bytes_)


def read_direct_counter_entries(p: Pipeline, want: p4runtime_pb2.DirectCounterEntry) -> Iterator[bytes]:
    te = want.table_entry
    tables = [p.index.table(te.table_id)] if te.table_id else list(p.index.tables.values())
    for t in tables:
        if not t.direct_counter_id:
            if te.table_id:
                raise invalid(f"table {t.name} has no direct counter")
            continue
        filt = decode_match(t, table_write_from_proto(te).matches) if te.match else None
        for e in _call(p.target.table_entries, t.name):
            if filt is not None and dict(e.match) != filt:
                continue
            counter, stored = _entry_extras(p, t, e, with_counters=True)
            yield p.entry_encoder.direct_counter_entity(t, e, counter, stored)


def write_direct_counter_entry(p: Pipeline, utype: int, dce: p4runtime_pb2.DirectCounterEntry) -> None:
    t = p.index.table(dce.table_entry.table_id)
    if utype != MODIFY:
        raise invalid(f"direct counter of {t.name}: only MODIFY is allowed")
    if not t.direct_counter_id:
        raise invalid(f"table {t.name} has no direct counter")
    write = getattr(p.target, "direct_counter_write", None)
    if write is None:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, "this target cannot write direct counters")
    match = decode_match(t, table_write_from_proto(dce.table_entry).matches)
    _check_priority(t, dce.table_entry.priority)
    _call(write, t.name, match, dce.data.packet_count, dce.data.byte_count, priority=dce.table_entry.priority)


def write_register_entry(p: Pipeline, utype: int, re_: p4runtime_pb2.RegisterEntry) -> None:
    r = p.index.register(re_.register_id)
    if utype != MODIFY:
        raise invalid(f"register {r.name}: only MODIFY is allowed on register entries")
    if not re_.HasField("index"):
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"register {r.name}: writing all cells at once (no index) is not supported")
    _check_index(r.name, r.size, re_.index.index)
    if re_.data.WhichOneof("data") != "bitstring":
        raise invalid(f"register {r.name}: data must be a bitstring")
    value = decode_bytestring(re_.data.bitstring, r.bitwidth, f"register {r.name}")
    _call(p.target.register_write, r.name, re_.index.index, value)


def _wanted_indices(name: str, size: int, want: p4runtime_pb2.RegisterEntry | p4runtime_pb2.MeterEntry
                    ) -> range | list[int]:
    """The cells a Read asks for: the one its index names (checked), or all of them when it has none."""
    if want.HasField("index"):
        _check_index(name, size, want.index.index)
        return [want.index.index]
    return range(size)


def read_register_entries(
    p: Pipeline, want: p4runtime_pb2.RegisterEntry
) -> Iterator[p4runtime_pb2.RegisterEntry]:
    regs = [p.index.register(want.register_id)] if want.register_id else list(p.index.registers.values())
    for r in regs:
        for i in _wanted_indices(r.name, r.size, want):
            out = p4runtime_pb2.RegisterEntry(register_id=r.id)
            out.index.index = i
            out.data.bitstring = bytestrings.encode(_call(p.target.register_read, r.name, i))
            yield out


def write_meter_entry(p: Pipeline, utype: int, me: p4runtime_pb2.MeterEntry) -> None:
    m = p.index.meter(me.meter_id)
    if utype != MODIFY:
        raise invalid(f"meter {m.name}: only MODIFY is allowed on meter entries")
    if not me.HasField("index"):
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"meter {m.name}: configuring all cells at once (no index) is not supported")
    _check_index(m.name, m.size, me.index.index)
    key = (m.id, me.index.index)
    if me.HasField("config"):
        c = me.config
        if c.cir > c.pir or c.cburst < 0 or c.pburst < 0:
            raise invalid(f"meter {m.name}: need 0 <= cir <= pir and non-negative bursts")
        _call(p.target.meter_set, m.name, me.index.index, c.cir, c.cburst, c.pir, c.pburst)
        p.meter_configs[key] = p4runtime_pb2.MeterConfig()
        p.meter_configs[key].CopyFrom(c)
    else:  # spec: no config resets the cell to its default (unconfigured: all green)
        _call(p.target.meter_clear, m.name, me.index.index)
        p.meter_configs.pop(key, None)


def read_meter_entries(p: Pipeline, want: p4runtime_pb2.MeterEntry) -> Iterator[p4runtime_pb2.MeterEntry]:
    meters = [p.index.meter(want.meter_id)] if want.meter_id else list(p.index.meters.values())
    for m in meters:
        for i in _wanted_indices(m.name, m.size, want):
            out = p4runtime_pb2.MeterEntry(meter_id=m.id)
            out.index.index = i
            cfg = p.meter_configs.get((m.id, i))
            if cfg is not None:
                out.config.CopyFrom(cfg)
            yield out


# ---- packet replication engine -------------------------------------------------------------------------

def _replicas(replicas) -> list[tg.Replica]:
    out, seen = [], set()
    for r in replicas:
        if r.WhichOneof("port_kind") == "port":
            port = decode_bytestring(r.port, 32, "replica port")
        else:
            port = r.egress_port
        if (port, r.instance) in seen:
            raise invalid(f"replica (port {port}, instance {r.instance}) given twice")
        seen.add((port, r.instance))
        out.append(tg.Replica(port, r.instance))
    return out


def write_pre_entry(p: Pipeline, utype: int, pre: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
    kind = pre.WhichOneof("type")
    if kind == "multicast_group_entry":
        g = pre.multicast_group_entry
        if g.multicast_group_id == 0:
            raise invalid("multicast group id 0 is reserved")
        _exists_check(utype, g.multicast_group_id in p.multicast_groups, f"multicast group {g.multicast_group_id}")
        if utype == DELETE:
            _call(p.target.mcast_group_delete, g.multicast_group_id)
            del p.multicast_groups[g.multicast_group_id]
        else:
            _call(p.target.mcast_group_set, g.multicast_group_id, _replicas(g.replicas))
            p.multicast_groups[g.multicast_group_id] = p4runtime_pb2.MulticastGroupEntry()
            p.multicast_groups[g.multicast_group_id].CopyFrom(g)
    elif kind == "clone_session_entry":
        s = pre.clone_session_entry
        if s.session_id == 0:
            raise invalid("clone session id 0 is reserved")
        _exists_check(utype, s.session_id in p.clone_sessions, f"clone session {s.session_id}")
        if utype == DELETE:
            _call(p.target.clone_session_delete, s.session_id)
            del p.clone_sessions[s.session_id]
        else:
            _call(p.target.clone_session_set, s.session_id, _replicas(s.replicas), s.packet_length_bytes)
            p.clone_sessions[s.session_id] = p4runtime_pb2.CloneSessionEntry()
            p.clone_sessions[s.session_id].CopyFrom(s)
    else:
        raise invalid("packet replication engine entry without a type")


def _exists_check(utype: int, exists: bool, what: str) -> None:
    if utype == INSERT and exists:
        raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
    if utype in (MODIFY, DELETE) and not exists:
        raise not_found(f"{what} does not exist")


def read_pre_entries(
    p: Pipeline, want: p4runtime_pb2.PacketReplicationEngineEntry
) -> Iterator[p4runtime_pb2.PacketReplicationEngineEntry]:
    kind = want.WhichOneof("type")
    if kind in (None, "multicast_group_entry"):
        gid = want.multicast_group_entry.multicast_group_id if kind else 0
        for k, g in sorted(p.multicast_groups.items()):
            if gid in (0, k):
                yield p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=g)
    if kind in (None, "clone_session_entry"):
        sid = want.clone_session_entry.session_id if kind else 0
        for k, s in sorted(p.clone_sessions.items()):
            if sid in (0, k):
                yield p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=s)


# ---- digest configuration ------------------------------------------------------------------------------

def write_digest_entry(p: Pipeline, utype: int, de: p4runtime_pb2.DigestEntry) -> None:
    d = p.index.digest(de.digest_id)
    _exists_check(utype, de.digest_id in p.digest_configs, f"digest {d.name} configuration")
    if utype == DELETE:
        del p.digest_configs[de.digest_id]
        return
    cfg = de.config
    if cfg.max_list_size < 0 or cfg.max_timeout_ns < 0 or cfg.ack_timeout_ns < 0:
        raise invalid(f"digest {d.name}: negative configuration value")
    p.digest_configs[de.digest_id] = p4runtime_pb2.DigestEntry.Config()
    p.digest_configs[de.digest_id].CopyFrom(cfg)


def read_digest_entries(p: Pipeline, want: p4runtime_pb2.DigestEntry) -> Iterator[p4runtime_pb2.DigestEntry]:
    if want.digest_id:
        p.index.digest(want.digest_id)
    for k, cfg in sorted(p.digest_configs.items()):
        if want.digest_id in (0, k):
            yield p4runtime_pb2.DigestEntry(digest_id=k, config=cfg)


# ---- dispatch ------------------------------------------------------------------------------------------

def write_entity(p: Pipeline, utype: int, entity: p4runtime_pb2.Entity | TableWrite) -> None:
    """One update; `entity` is a protobuf Entity or a table entry the fast decoder already read."""
    if utype not in (INSERT, MODIFY, DELETE):
        raise invalid(f"update type {utype} is not INSERT, MODIFY or DELETE")
    if isinstance(entity, TableWrite):
        write_table_entry(p, utype, entity)
        return
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        write_table_entry(p, utype, table_write_from_proto(entity.table_entry))
    elif kind == "counter_entry":
        write_counter_entry(p, utype, entity.counter_entry)
    elif kind == "register_entry":
        write_register_entry(p, utype, entity.register_entry)
    elif kind == "packet_replication_engine_entry":
        write_pre_entry(p, utype, entity.packet_replication_engine_entry)
    elif kind == "digest_entry":
        write_digest_entry(p, utype, entity.digest_entry)
    elif kind == "direct_counter_entry":
        write_direct_counter_entry(p, utype, entity.direct_counter_entry)
    elif kind == "meter_entry":
        write_meter_entry(p, utype, entity.meter_entry)
    elif kind is None:
        raise invalid("update without an entity")
    else:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"{kind} is not supported by this target")


def read_entity(p: Pipeline, entity: p4runtime_pb2.Entity) -> Iterator[bytes]:
    """The entities a (possibly wildcard) read entity selects, each a serialised `Entity` message.

    Table entries, counter cells and direct counters are written in wire format by `read_response` (the
    wildcard reads that return thousands); the rest are built with protobuf and serialised.
    """
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        yield from read_table_entries(p, entity.table_entry)
    elif kind == "counter_entry":
        yield from read_counter_entries(p, entity.counter_entry)
    elif kind == "direct_counter_entry":
        yield from read_direct_counter_entries(p, entity.direct_counter_entry)
    elif kind in _PROTOBUF_READS:
        reader = _PROTOBUF_READS[kind]
        for x in reader(p, getattr(entity, kind)):
            yield p4runtime_pb2.Entity(**{kind: x}).SerializeToString()
    elif kind is None:
        raise invalid("read of an empty entity")
    else:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"reading {kind} is not supported by this target")


_PROTOBUF_READS = {
    "register_entry": read_register_entries,
    "meter_entry": read_meter_entries,
    "packet_replication_engine_entry": read_pre_entries,
    "digest_entry": read_digest_entries,
}
