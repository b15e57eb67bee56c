"""`RemoteTarget`: the `Target` interface over a switch process, using only what BMv2 offers from outside.

Packets go through real veth pairs (AF_PACKET sockets on the peers of the switch's ports) and, for the CPU
port, through P4Runtime packet-out / packet-in; tables, counters, the PRE and digests through P4Runtime.
Registers are out of reach (BMv2 answers UNIMPLEMENTED), so `register_read`/`register_write` raise
`TargetError("UNIMPLEMENTED")`: a test that needs them says so and runs in-process only.

The representation is the in-process one, so the same test runs on both: a packet for the CPU port starts
with the 4-byte `packet_out` header the tests prepend (it becomes PacketOut metadata), and every PacketIn
comes back re-encoded as `packet_in` header bytes + payload on `cpu_port`.

A switch process gives no "done" signal, so `process` waits until the switch is quiet (`Quiescence`): a
packet that produces output costs about one round trip plus `quiet_s`; one that is dropped costs
`first_frame_s`. Frames that arrive after that window are kept in `late_frames` (a test fixture can fail
on them) rather than being attributed to the next packet.

Those windows are guesses a busy machine can miss (a switch process descheduled longer than `quiet_s` between
two copies of one packet). A caller that knows what a correct switch sends says so instead, and its verdict
no longer depends on the machine's load: `process_expecting(port, data, frames)` waits for that many frames
(up to `expect_cap_s`, a margin no load eats), and `drain_digests_expecting(count)` for that many digests.
"""

from __future__ import annotations

import select
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from kvtesting.p4rt import (
    P4InfoNames,
    P4RuntimeSession,
    TableInfo,
    Update,
    canonical,
    header_len,
    pack_header,
    unpack_header,
)
from kvtesting.veth import HostPorts
from softswitch.target import (
    DigestMessage,
    Exact,
    Lpm,
    Match,
    OptionalMatch,
    Range,
    Replica,
    TableEntry,
    TargetError,
    Ternary,
)

_MT = p4info_pb2.MatchField.MatchType


@dataclass(frozen=True)
class Quiescence:
    """When a switch process counts as done with one packet."""

    first_frame_s: float = 0.25
    """Longest wait for the first output; a dropped packet costs this much."""
    quiet_s: float = 0.04
    """After an output, the switch is done when nothing more arrives for this long."""
    cap_s: float = 3.0
    """Upper bound for one packet, however chatty the switch is."""
    digest_quiet_s: float = 0.02
    """`drain_digests` waits this long after the last digest list for stragglers."""
    expect_cap_s: float = 30.0
    """Longest wait for outputs or digests the caller says will come (`process_expecting`,
    `drain_digests_expecting`): reached only when a switch fails to send them."""


class RemoteTarget:
    """A switch process behind P4Runtime and veth pairs, seen through the in-process `Target` interface."""

    def __init__(self, session: P4RuntimeSession, names: P4InfoNames, ports: HostPorts, cpu_port: int,
                 quiescence: Quiescence = Quiescence()) -> None:
        self.session = session
        self.names = names
        self.ports = ports
        self.cpu_port = cpu_port
        self.quiescence = quiescence
        self.late_frames: list[tuple[int, bytes]] = []
        self._digests: list[DigestMessage] = []
        self._initial_defaults: dict[str, tuple[str, dict[str, int]]] = {}
        self._packet_in = names.controller_headers.get("packet_in", ())
        self._packet_out = names.controller_headers.get("packet_out", ())
        self._poll = select.poll()
        for sock in ports.socks.values():
            self._poll.register(sock.fileno(), select.POLLIN)
        self._poll.register(session.wake_fd, select.POLLIN)

    # ---- packets ------------------------------------------------------------------------------------------

    def process(self, ingress_port: int, data: bytes) -> list[tuple[int, bytes]]:
        self._send(ingress_port, data)
        return self._collect_until_quiet()

    def process_expecting(self, ingress_port: int, data: bytes, frames: int) -> list[tuple[int, bytes]]:
        """`process` for a caller that knows a correct switch sends `frames` frames for this packet: waits for
        them however busy the machine is (up to `expect_cap_s`), then `quiet_s` for any extra one."""
        self._send(ingress_port, data)
        return self._collect_until_quiet(frames)

    def receive_expecting(self, frames: int, cap_s: float | None = None) -> list[tuple[int, bytes]]:
        """Frames the switch still sends for packets already sent, no packet sent now: waits for `frames` of
        them however busy the machine is (up to `cap_s`, default `expect_cap_s`), then `quiet_s` for any extra."""
        return self._collect_until_quiet(frames, cap_s)

    def _send(self, ingress_port: int, data: bytes) -> None:
        self.late_frames.extend(self._collect_ready())
        if ingress_port == self.cpu_port:
            n = header_len(self._packet_out)
            if len(data) < n:
                raise ValueError(f"a packet for the CPU port starts with the {n}-byte packet_out header; "
                                 f"got {len(data)} bytes (P4Runtime cannot send a shorter one)")
            self.session.packet_out(data[n:], unpack_header(self._packet_out, data) if n else {})
        elif ingress_port in self.ports.socks:
            self.ports.send(ingress_port, data)
        else:
            raise ValueError(f"port {ingress_port} has no veth pair (ports: {sorted(self.ports.socks)}) "
                             f"and is not the CPU port {self.cpu_port}")

    def _collect_until_quiet(self, expected: int = 0, cap_s: float | None = None) -> list[tuple[int, bytes]]:
        """Frames until the switch is quiet; with `expected` > 0, not before that many came (or the cap)."""
        q = self.quiescence
        start = time.monotonic()
        expect_cap = q.expect_cap_s if cap_s is None else cap_s
        cap = start + (max(q.cap_s, expect_cap) if expected else q.cap_s)
        until = cap if expected else start + q.first_frame_s
        out: list[tuple[int, bytes]] = []
        while True:
            now = time.monotonic()
            wait = min(until, cap) - now
            if wait <= 0:
                return out
            if not self._poll.poll(wait * 1000):
                continue
            got = self._collect_ready()
            if got:
                out.extend(got)
                until = time.monotonic() + q.quiet_s if len(out) >= expected else cap

    def _collect_ready(self) -> list[tuple[int, bytes]]:
        """Every frame and packet-in that has arrived (digest lists are decoded on the way)."""
        self.session.clear_wake()
        out = [(port, frame) for port in self.ports.socks for frame in self.ports.receive_ready(port)]
        while not self.session.packet_ins.empty():
            pi = self.session.packet_ins.get()
            meta = {m.metadata_id: int.from_bytes(m.value, "big") for m in pi.metadata}
            out.append((self.cpu_port, pack_header(self._packet_in, meta) + pi.payload))
        while not self.session.digest_lists.empty():
            self._digests.extend(self._decode_digest_list(self.session.digest_lists.get()))
        return out

    def _decode_digest_list(self, dl: p4runtime_pb2.DigestList) -> list[DigestMessage]:
        digest = self.names.digest_by_id[dl.digest_id]
        fields = self.names.digest_fields(digest)
        out = []
        for data in dl.data:
            members = data.struct.members
            out.append(DigestMessage(digest.preamble.name, tuple(
                (f.name, int.from_bytes(m.bitstring, "big")) for f, m in zip(fields, members, strict=True))))
        return out

    def drain_digests(self) -> list[DigestMessage]:
        return self.drain_digests_expecting(0)

    def drain_digests_expecting(self, count: int) -> list[DigestMessage]:
        """Every digest that came; with `count` > 0, not before that many came (or `expect_cap_s`)."""
        q = self.quiescence
        cap = time.monotonic() + q.expect_cap_s
        deadline = cap if len(self._digests) < count else time.monotonic() + q.digest_quiet_s
        while (wait := deadline - time.monotonic()) > 0:
            if self._poll.poll(wait * 1000):
                before = len(self._digests)
                self.late_frames.extend(self._collect_ready())
                if len(self._digests) > before:
                    deadline = cap if len(self._digests) < count else time.monotonic() + q.digest_quiet_s
        out, self._digests = self._digests, []
        return out

    def configure_digests(self) -> None:
        """Ask for every digest: one message per list, sent at once; each list is acknowledged on arrival."""
        cfg = p4runtime_pb2.DigestEntry.Config(max_timeout_ns=0, max_list_size=1, ack_timeout_ns=0)
        updates = []
        for d in self.names.digests.values():
            u = Update(type=Update.INSERT)
            u.entity.digest_entry.digest_id = d.preamble.id
            u.entity.digest_entry.config.CopyFrom(cfg)
            updates.append(u)
        self.session.write(updates)

    # ---- tables -------------------------------------------------------------------------------------------

    def _match_proto(self, t: TableInfo, match: Mapping[str, Match]) -> list[p4runtime_pb2.FieldMatch]:
        out = []
        for name, m in match.items():
            f = t.field(name)
            fm = p4runtime_pb2.FieldMatch(field_id=f.id)
            if isinstance(m, Exact):
                fm.exact.value = canonical(m.value)
            elif isinstance(m, Lpm):
                if m.prefix_len == 0:
                    continue  # /0 is a wildcard: P4Runtime omits the field
                fm.lpm.value = canonical(m.value & (((1 << m.prefix_len) - 1) << (f.bitwidth - m.prefix_len)))
                fm.lpm.prefix_len = m.prefix_len
            elif isinstance(m, Ternary):
                if m.mask == 0:
                    continue
                fm.ternary.value, fm.ternary.mask = canonical(m.value & m.mask), canonical(m.mask)
            elif isinstance(m, Range):
                fm.range.low, fm.range.high = canonical(m.low), canonical(m.high)
            elif isinstance(m, OptionalMatch):
                fm.optional.value = canonical(m.value)
            else:
                raise TargetError("INVALID_ARGUMENT", f"unknown match kind {m!r}")
            out.append(fm)
        return out

    def _action_proto(self, table: TableInfo, action: str, params: Mapping[str, int]) -> p4runtime_pb2.Action:
        a = self.names.action(action)
        by_name = {p.name: p.id for p in a.params}
        out = p4runtime_pb2.Action(action_id=a.preamble.id)
        for name, value in params.items():
            if name not in by_name:
                raise TargetError("INVALID_ARGUMENT", f"action {action} has no parameter {name!r}")
            out.params.add(param_id=by_name[name], value=canonical(value))
        return out

    def _entry_update(self, kind: int, table: str, match: Mapping[str, Match], priority: int,
                      action: str | None = None, params: Mapping[str, int] | None = None) -> Update:
        t = self.names.table(table)
        u = Update(type=kind)
        te = u.entity.table_entry
        te.table_id = t.id
        te.priority = priority
        te.match.extend(self._match_proto(t, match))
        if action is not None:
            te.action.action.CopyFrom(self._action_proto(t, action, params or {}))
        return u

    def table_insert(self, entry: TableEntry) -> None:
        self.session.write([self._entry_update(Update.INSERT, entry.table, entry.match, entry.priority,
                                               entry.action, entry.params)])

    def table_modify(self, entry: TableEntry) -> None:
        self.session.write([self._entry_update(Update.MODIFY, entry.table, entry.match, entry.priority,
                                               entry.action, entry.params)])

    def table_delete(self, table: str, match: Mapping[str, Match], priority: int = 0) -> None:
        self.session.write([self._entry_update(Update.DELETE, table, match, priority)])

    def _decode_entry(self, te: p4runtime_pb2.TableEntry) -> TableEntry:
        t = self.names.table_by_id[te.table_id]
        by_id = {f.id: f for f in t.fields}
        match: dict[str, Match] = {}
        for fm in te.match:
            f = by_id[fm.field_id]
            kind = fm.WhichOneof("field_match_type")
            if kind == "exact":
                match[f.name] = Exact(int.from_bytes(fm.exact.value, "big"))
            elif kind == "lpm":
                match[f.name] = Lpm(int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)
            elif kind == "ternary":
                match[f.name] = Ternary(int.from_bytes(fm.ternary.value, "big"),
                                        int.from_bytes(fm.ternary.mask, "big"))
            elif kind == "range":
                match[f.name] = Range(int.from_bytes(fm.range.low, "big"), int.from_bytes(fm.range.high, "big"))
            elif kind == "optional":
                match[f.name] = OptionalMatch(int.from_bytes(fm.optional.value, "big"))
        name, params = self._decode_action(te.action.action)
        return TableEntry(t.name, match, name, params, te.priority)

    def _decode_action(self, action: p4runtime_pb2.Action) -> tuple[str, dict[str, int]]:
        a = self.names.action_by_id[action.action_id]
        by_id = {p.id: p.name for p in a.params}
        return a.preamble.name, {by_id[p.param_id]: int.from_bytes(p.value, "big") for p in action.params}

    def _read_entries(self, table_id: int, default: bool = False) -> list[p4runtime_pb2.TableEntry]:
        want = p4runtime_pb2.Entity()
        want.table_entry.table_id = table_id
        want.table_entry.is_default_action = default
        return [e.table_entry for e in self.session.read([want])]

    def table_entries(self, table: str) -> Sequence[TableEntry]:
        return [self._decode_entry(te) for te in self._read_entries(self.names.table(table).id)
                if not te.is_default_action]

    def table_set_default(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None:
        u = self._entry_update(Update.MODIFY, table, {}, 0, action, params)
        u.entity.table_entry.is_default_action = True
        self.session.write([u])

    def table_get_default(self, table: str) -> tuple[str, Mapping[str, int]]:
        entries = self._read_entries(self.names.table(table).id, default=True)
        if not entries:
            raise TargetError("NOT_FOUND", f"{table}: the switch returned no default entry")
        return self._decode_action(entries[0].action.action)

    # ---- externs ------------------------------------------------------------------------------------------

    def register_read(self, name: str, index: int) -> int:
        raise TargetError("UNIMPLEMENTED", f"register {name}: registers are not reachable over P4Runtime on BMv2")

    def register_write(self, name: str, index: int, value: int) -> None:
        raise TargetError("UNIMPLEMENTED", f"register {name}: registers are not reachable over P4Runtime on BMv2")

    def _counter_entity(self, name: str, index: int | None) -> p4runtime_pb2.Entity:
        e = p4runtime_pb2.Entity()
        e.counter_entry.counter_id = self.names.counter(name).preamble.id
        if index is not None:
            e.counter_entry.index.index = index
        return e

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        got = self.session.read([self._counter_entity(name, index)])
        if not got:
            raise TargetError("NOT_FOUND", f"counter {name}[{index}]: no data")
        data = got[0].counter_entry.data
        return data.packet_count, data.byte_count

    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None:
        u = Update(type=Update.MODIFY)
        u.entity.CopyFrom(self._counter_entity(name, index))
        u.entity.counter_entry.data.packet_count = packets
        u.entity.counter_entry.data.byte_count = bytes_
        self.session.write([u])

    def direct_counter_read(self, table: str, match: Mapping[str, Match], priority: int = 0) -> tuple[int, int]:
        t = self.names.table(table)
        e = p4runtime_pb2.Entity()
        e.direct_counter_entry.table_entry.table_id = t.id
        e.direct_counter_entry.table_entry.priority = priority
        e.direct_counter_entry.table_entry.match.extend(self._match_proto(t, match))
        got = self.session.read([e])
        if not got:
            raise TargetError("NOT_FOUND", f"{table}: no such entry")
        data = got[0].direct_counter_entry.data
        return data.packet_count, data.byte_count

    # ---- packet replication engine ------------------------------------------------------------------------

    def _pre_write(self, kind: int, build) -> None:
        u = Update(type=kind)
        build(u.entity.packet_replication_engine_entry)
        self.session.write([u])

    def _pre_exists(self, fill) -> bool:
        e = p4runtime_pb2.Entity()
        fill(e.packet_replication_engine_entry)
        try:
            return bool(self.session.read([e]))
        except TargetError as err:
            if err.code == "NOT_FOUND":
                return False
            raise

    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        def build(pre):
            pre.multicast_group_entry.multicast_group_id = group_id
            for r in replicas:
                pre.multicast_group_entry.replicas.add(egress_port=r.port, instance=r.rid)

        def ident(pre):
            pre.multicast_group_entry.multicast_group_id = group_id

        self._pre_write(Update.MODIFY if self._pre_exists(ident) else Update.INSERT, build)

    def mcast_group_delete(self, group_id: int) -> None:
        self._pre_write(Update.DELETE,
                        lambda pre: setattr(pre.multicast_group_entry, "multicast_group_id", group_id))

    def clone_session_set(self, session_id: int, replicas: Sequence[Replica], truncate: int = 0) -> None:
        def build(pre):
            pre.clone_session_entry.session_id = session_id
            pre.clone_session_entry.packet_length_bytes = truncate
            for r in replicas:
                pre.clone_session_entry.replicas.add(egress_port=r.port, instance=r.rid)

        def ident(pre):
            pre.clone_session_entry.session_id = session_id

        self._pre_write(Update.MODIFY if self._pre_exists(ident) else Update.INSERT, build)

    def clone_session_delete(self, session_id: int) -> None:
        self._pre_write(Update.DELETE, lambda pre: setattr(pre.clone_session_entry, "session_id", session_id))

    # ---- state reset (what a test fixture needs between tests; not part of `Target`) ------------------------

    def record_initial_defaults(self) -> None:
        """Remember every table's default action as loaded, for `clear_tables`."""
        for t in self.names.tables.values():
            if not t.is_const:
                self._initial_defaults[t.name] = self._decode_action(
                    self._read_entries(t.id, default=True)[0].action.action)

    def clear_tables(self) -> None:
        """Delete every entry of every non-const table and restore each default action as loaded."""
        deletes = []
        for te in self._read_entries(0):
            if te.is_default_action or self.names.table_by_id[te.table_id].is_const:
                continue
            u = Update(type=Update.DELETE)
            u.entity.table_entry.CopyFrom(te)
            u.entity.table_entry.ClearField("action")
            deletes.append(u)
        self.session.write(deletes)
        for table, (action, params) in self._initial_defaults.items():
            if self.table_get_default(table) != (action, params):
                self.table_set_default(table, action, params)

    def zero_counters(self, names: Sequence[str] | None = None) -> None:
        """Write 0 into every cell of the named counters (all by default) that is not 0 already.

        Reading 1,024 cells costs the softswitch about 0.3 s, so callers name the counters they need."""
        wants = [p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
            counter_id=self.names.counter(n).preamble.id if names is not None else 0)) for n in (names or [""])]
        updates = []
        for e in self.session.read(wants):
            ce = e.counter_entry
            if ce.data.packet_count or ce.data.byte_count:
                u = Update(type=Update.MODIFY)
                u.entity.counter_entry.counter_id = ce.counter_id
                u.entity.counter_entry.index.index = ce.index.index
                u.entity.counter_entry.data.SetInParent()
                updates.append(u)
        self.session.write(updates)
