"""`SoftSwitch`: a loaded v1model program behind the in-process `softswitch.target.Target` interface.

Per packet it follows BMv2 simple_switch's ingress and egress threads step for step (see docs in
/work/shared/P4-ON-BMV2.md and behavioral-model `targets/simple_switch/simple_switch.cpp`):

    ingress pass: parser → verifyChecksum → ingress, then in this order:
        I2E clone (original bytes re-parsed, metadata reset but the preserved field list, instance_type 1)
        digest (the last `digest` call of the pass)
        resubmit (original bytes back to ingress, instance_type 6; nothing else happens to this pass)
        multicast (mcast_grp != 0: one copy per replica with egress_rid, instance_type 5; original discarded)
        drop if egress_spec == 511, else unicast with instance_type 0
    traffic manager: every copy for egress is queued on its egress port's queue; `enq_qdepth` is the
        number of packets queued on that port before it, `enq_timestamp` the time (µs since the switch
        started); taking it off sets `deq_qdepth` (packets left behind it) and `deq_timedelta` (µs queued),
        as BMv2's `enqueue` and egress thread do. `process` runs one packet to the end, so its queue is
        empty unless it made several copies for one port; `process_burst` runs the ingress of every packet
        of a burst before any egress, as BMv2's ingress thread runs ahead of its egress threads, so a burst
        towards one port queues there (the softswitch process hands each burst its ports received at once).
    egress pass: egress_port set, egress_spec := 0, egress → E2E clone (headers as egress left them,
        metadata reset but the field list, instance_type 2, runs egress again) → drop if egress_spec == 511
        → computeChecksum → deparser → recirculate (deparsed bytes back to ingress, instance_type 4) or output.

Like BMv2, metadata reset on resubmit/recirculate/clone includes standard_metadata, so `ingress_port` of a
resubmitted or recirculated packet is 0 unless a preserved field list carries it.

Thread-safety: a SoftSwitch is single-threaded. Callers (the P4Runtime server, port I/O) must serialize
every call, packets and control-plane requests alike, e.g. with one lock or one event loop.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from softswitch.frontend import ir
from softswitch.runtime.externs import MeterConfig
from softswitch.runtime.lower import AssertionFailed, Lowered, ParserError, lower
from softswitch.runtime.replication import (
    PKT_INSTANCE_TYPE_EGRESS_CLONE,
    PKT_INSTANCE_TYPE_INGRESS_CLONE,
    PKT_INSTANCE_TYPE_NORMAL,
    PKT_INSTANCE_TYPE_RECIRC,
    PKT_INSTANCE_TYPE_REPLICATION,
    PKT_INSTANCE_TYPE_RESUBMIT,
    ReplicationEngine,
)
from softswitch.runtime.tables import Table
from softswitch.target import DROP_PORT, DigestMessage, Match, Replica, TableEntry, TargetError

log = logging.getLogger(__name__)

MAX_PASSES = 32
"""Ingress + egress passes one arriving packet may cause (resubmit/recirculate loops end here), beyond the
egress passes of its multicast copies and egress-to-egress clones: BMv2 makes every replica of a group and
every egress clone, however many (simple_switch's egress thread enqueues each E2E clone it is asked for; it
bounds neither clones nor recirculations), so a chain of egress clones (the stream join's pushes, one pass per
subscriber) is bounded by `MAX_EGRESS_CLONES` instead."""
MAX_EGRESS_CLONES = 4096
"""Egress-to-egress clones one arriving packet may cause: far above any chain the program makes (64 + 1 per
stream push) yet a bound on a program that clones every copy forever (BMv2 would run such a loop without end)."""


class SoftSwitch:
    """A v1model program compiled to Python, with its tables, externs and replication engine."""

    def __init__(self, lowered: Lowered, cpu_port: int | None = None, max_passes: int = MAX_PASSES,
                 max_egress_clones: int = MAX_EGRESS_CLONES) -> None:
        self.lowered = lowered
        self.program = lowered.program
        self.cpu_port = cpu_port
        self.max_passes = max_passes
        self.max_egress_clones = max_egress_clones
        self.pre = ReplicationEngine()
        self._digests: list[DigestMessage] = []
        self._t0 = [time.monotonic_ns()]
        """The switch's time zero (monotonic ns); every timestamp the program sees is µs since then."""
        sp, std = lowered.special, lowered.std
        self._DATA, self._POS, self._DLEN, self._OUT = sp["DATA"], sp["POS"], sp["DLEN"], sp["OUT"]
        self._CLONE, self._RESUB, self._RECIRC = sp["CLONE"], sp["RESUB"], sp["RECIRC"]
        self._DIGEST, self._TRUNC = sp["DIGEST"], sp["TRUNC"]
        self._ingress_port = std["ingress_port"]
        self._egress_spec = std["egress_spec"]
        self._egress_port = std["egress_port"]
        self._instance_type = std["instance_type"]
        self._packet_length = std["packet_length"]
        self._mcast_grp = std.get("mcast_grp")
        self._egress_rid = std.get("egress_rid")
        self._parser_error = std.get("parser_error")
        self._ig_ts = std.get("ingress_global_timestamp")
        self._eg_ts = std.get("egress_global_timestamp")
        self._queue_depth = [0] * (DROP_PORT + 1)
        """Packets waiting in each egress port's queue (between ingress and egress)."""
        self._burst = [False]
        """True while `process_burst` runs its packets' ingress: every copy waits in its queue."""
        self._md_lo, self._md_hi = lowered.metadata_range
        self._ingress_pass: Callable[..., None]
        """(data, port, instance_type, preserved, egress_q, ingress_q, outputs): one ingress pass."""
        self._egress_pass: Callable[..., None]
        """(frame, port, truncate, egress_q, ingress_q, outputs): one egress pass."""
        self._dequeue: Callable[..., None]
        """(egress_q, (frame, port, truncate), ingress_q, outputs): off the port's queue, then egress."""
        self._replicas_made = [0]
        """Multicast copies and egress clones made for the packet being processed: they do not count against
        max_passes."""
        self._egress_clones = [0]
        """Egress-to-egress clones made for the packet being processed (at most max_egress_clones)."""
        self._make_passes()

    @classmethod
    def load(cls, path_or_program: str | os.PathLike | ir.Program, cpu_port: int | None = None,
             seed: int | None = None) -> SoftSwitch:
        """Compile a .p4 file (through `softswitch.frontend`) or an already checked `ir.Program`."""
        if isinstance(path_or_program, ir.Program):
            program = path_or_program
        else:
            from softswitch.frontend import load_program

            program = load_program(Path(path_or_program))
        return cls(lower(program, seed), cpu_port)

    def dump_source(self) -> str:
        """The Python the program was compiled to (for debugging)."""
        return self.lowered.source

    # ---- packets -------------------------------------------------------------------------------------

    def _now_us(self) -> int:
        return (time.monotonic_ns() - self._t0[0]) // 1000

    @staticmethod
    def _check_port(ingress_port: int) -> None:
        if not isinstance(ingress_port, int) or not 0 <= ingress_port < DROP_PORT:
            raise TargetError("INVALID_ARGUMENT", f"ingress port {ingress_port!r} not in [0, {DROP_PORT})")

    def process(self, ingress_port: int, data: bytes) -> list[tuple[int, bytes]]:
        self._check_port(ingress_port)
        outputs: list[tuple[int, bytes]] = []
        self._replicas_made[0] = 0
        self._egress_clones[0] = 0
        ingress_q: deque = deque()
        egress_q: deque = deque()
        try:
            self._ingress_pass(bytes(data), ingress_port, PKT_INSTANCE_TYPE_NORMAL, (), egress_q, ingress_q, outputs)
        except Exception as exc:
            self._drop(exc, ingress_port)
        if not (egress_q or ingress_q):
            return outputs
        self._drain(egress_q, ingress_q, outputs, 1, ingress_port)
        return outputs

    def process_burst(self, frames: Sequence[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Packets that arrived together: every one's ingress runs before any egress, so their copies wait
        in their egress ports' queues and see the depths a burst makes (`enq_qdepth`, `deq_qdepth`).
        Returns every output, in the order the egress queues give them out (first queued, first out)."""
        for port, _ in frames:
            self._check_port(port)
        if len(frames) == 1:
            return self.process(*frames[0])
        outputs: list[tuple[int, bytes]] = []
        self._replicas_made[0] = 0
        self._egress_clones[0] = 0
        ingress_q: deque = deque()
        egress_q: deque = deque()
        self._burst[0] = True
        try:
            for port, data in frames:
                try:
                    self._ingress_pass(bytes(data), port, PKT_INSTANCE_TYPE_NORMAL, (), egress_q, ingress_q,
                                       outputs)
                except Exception as exc:
                    self._drop(exc, port)
        finally:
            self._burst[0] = False
        self._drain(egress_q, ingress_q, outputs, len(frames), frames[0][0] if frames else 0)
        return outputs

    def _drain(self, egress_q: deque, ingress_q: deque, outputs: list, passes: int, ingress_port: int) -> None:
        """Run the queued egress passes (first queued, first out) and the passes they cause."""
        budget = self.max_passes * max(passes, 1)
        depth = self._queue_depth
        try:
            while ingress_q or egress_q:
                passes += 1
                if passes > budget + self._replicas_made[0]:
                    log.warning("packet from port %d: more than %d pipeline passes, rest dropped", ingress_port,
                                self.max_passes)
                    break
                try:
                    if egress_q:
                        self._dequeue(egress_q, egress_q.popleft(), ingress_q, outputs)
                    else:
                        self._ingress_pass(*ingress_q.popleft(), egress_q, ingress_q, outputs)
                except Exception as exc:
                    self._drop(exc, ingress_port)
        finally:
            for item in egress_q:  # dropped with the rest: they leave their queues
                depth[item[1]] -= 1

    def advance_clock(self, us: int) -> None:
        """Move the switch's clock `us` microseconds forward (timestamps, queue times): a test lets time pass
        without sleeping, so no verdict depends on how busy the machine is."""
        if us < 0:
            raise ValueError("the clock only moves forward")
        self._t0[0] -= us * 1000

    def _drop(self, exc: Exception, ingress_port: int) -> None:
        """A packet that breaks the program is dropped and logged, never raised: malformed input must not
        take the switch down."""
        if isinstance(exc, AssertionFailed):
            log.error("packet dropped: %s", exc)
        elif isinstance(exc, ParserError):
            log.error("packet dropped: header stack index out of bounds (error %d) outside the parser", exc.code)
        elif isinstance(exc, RecursionError):
            log.error("packet from port %d dropped: the parser loops without end", ingress_port)
        else:
            log.error("packet from port %d dropped: internal error %r", ingress_port, exc, exc_info=exc)

    def _make_passes(self) -> None:
        """Build the two per-pass functions as closures over every slot index (fast local look-ups)."""
        L = self.lowered
        template, parse, verify, ingress = L.template, L.parse, L.verify, L.ingress
        egress, compute, deparse = L.egress, L.compute, L.deparse
        field_lists = L.field_lists
        DATA, POS, DLEN, OUT = self._DATA, self._POS, self._DLEN, self._OUT
        CLONE, RESUB, RECIRC, DIGEST, TRUNC = self._CLONE, self._RESUB, self._RECIRC, self._DIGEST, self._TRUNC
        IG_PORT, EG_SPEC, EG_PORT = self._ingress_port, self._egress_spec, self._egress_port
        ITYPE, PLEN, MCAST, RID = self._instance_type, self._packet_length, self._mcast_grp, self._egress_rid
        PERR, IG_TS, EG_TS = self._parser_error, self._ig_ts, self._eg_ts
        std = self.lowered.std
        ENQ_TS, ENQ_Q = std.get("enq_timestamp", -1), std.get("enq_qdepth", -1)
        DEQ_TD, DEQ_Q = std.get("deq_timedelta", -1), std.get("deq_qdepth", -1)
        queueing = -1 not in (ENQ_TS, ENQ_Q, DEQ_TD, DEQ_Q)
        depth, burst = self._queue_depth, self._burst
        QDEPTH_MAX = (1 << 19) - 1
        lo, hi = self._md_lo, self._md_hi
        md_zero = template[lo:hi]
        pre, digests, T0, now = self.pre, self._digests.append, self._t0, time.monotonic_ns
        replicas_made, egress_clones, max_clones = self._replicas_made, self._egress_clones, self.max_egress_clones
        NORMAL = PKT_INSTANCE_TYPE_NORMAL
        EG_SPEC_START = (DROP_PORT + 1) & 0x1FF  # BMv2 writes drop_port + 1 into the 9-bit field

        def enqueue(egress_q: deque, F: list, port: int, truncate: int) -> None:
            """The traffic manager: queue a copy on its egress port (BMv2's `enqueue`)."""
            d = depth[port]
            if queueing:
                F[ENQ_Q] = d if d < QDEPTH_MAX else QDEPTH_MAX
                F[ENQ_TS] = ((now() - T0[0]) // 1000) & 0xFFFFFFFF
            depth[port] = d + 1
            egress_q.append((F, port, truncate))

        def dequeue(egress_q: deque, item: tuple, ingress_q: deque, outputs: list) -> None:
            """Take a copy off its port's queue (BMv2's egress thread) and run its egress pass."""
            F, port, truncate = item
            d = depth[port] = depth[port] - 1
            if queueing:
                F[DEQ_Q] = d if d < QDEPTH_MAX else QDEPTH_MAX
                F[DEQ_TD] = (((now() - T0[0]) // 1000) - F[ENQ_TS]) & 0xFFFFFFFF
            egress_pass(F, port, truncate, egress_q, ingress_q, outputs)

        def fresh(data: bytes) -> list:
            F = template.copy()
            F[DATA] = data
            F[DLEN] = len(data)
            return F

        def run_parser(F: list) -> None:
            try:
                parse(F)
            except ParserError as exc:
                if PERR is not None:
                    F[PERR] = exc.code

        def reset_metadata(F: list, src: list, field_list: int | None) -> None:
            """BMv2 `reset_metadata` + `copy_fields_between_phvs`: zero all metadata, keep the field list."""
            F[lo:hi] = md_zero
            if field_list is not None:
                for slot in field_lists.get(field_list, ()):
                    F[slot] = src[slot]

        def preserve(F: list, field_list: int | None) -> tuple:
            if field_list is None:
                return ()
            return tuple((slot, F[slot]) for slot in field_lists.get(field_list, ()))

        def ingress_pass(data: bytes, port: int, instance_type: int, preserved: tuple,
                         egress_q: deque, ingress_q: deque, outputs: list) -> None:
            F = fresh(data)
            for slot, value in preserved:
                F[slot] = value
            if instance_type == NORMAL:
                F[IG_PORT] = port
            else:
                F[ITYPE] = instance_type
            F[PLEN] = len(data)
            if IG_TS is not None:
                F[IG_TS] = (now() - T0[0]) // 1000
            run_parser(F)
            if verify is not None:
                verify(F)
            ingress(F)
            clone = F[CLONE]
            if clone:
                session = pre.session(clone[0])
                if session is not None:
                    C = fresh(data)
                    C[IG_PORT] = F[IG_PORT]
                    run_parser(C)
                    reset_metadata(C, F, clone[1])
                    C[ITYPE] = PKT_INSTANCE_TYPE_INGRESS_CLONE
                    C[PLEN] = len(data)
                    for r in session.replicas:
                        copy = C.copy()
                        if RID is not None:
                            copy[RID] = r.rid
                        enqueue(egress_q, copy, r.port, session.truncate)
                else:
                    log.debug("clone to unconfigured session %d ignored", clone[0])
            digest = F[DIGEST]
            if digest:
                digests(DigestMessage(digest[0], digest[1]))
            resub = F[RESUB]
            if resub:
                ingress_q.append((data, 0, PKT_INSTANCE_TYPE_RESUBMIT, preserve(F, resub[0])))
                return
            if MCAST is not None and F[MCAST]:
                replicas = pre.replicas(F[MCAST])
                replicas_made[0] += len(replicas)
                for r in replicas:
                    copy = F.copy()
                    copy[ITYPE] = PKT_INSTANCE_TYPE_REPLICATION
                    if RID is not None:
                        copy[RID] = r.rid
                    enqueue(egress_q, copy, r.port, 0)
                return
            port_out = F[EG_SPEC]
            if port_out == DROP_PORT:
                return
            F[ITYPE] = NORMAL
            if not egress_q and not ingress_q and not burst[0]:
                # the common case: one copy, straight on to egress through an empty queue
                if queueing:
                    d = depth[port_out]
                    F[ENQ_Q] = F[DEQ_Q] = d if d < QDEPTH_MAX else QDEPTH_MAX
                    F[ENQ_TS] = ((now() - T0[0]) // 1000) & 0xFFFFFFFF
                    F[DEQ_TD] = 0
                egress_pass(F, port_out, 0, egress_q, ingress_q, outputs)
            else:
                enqueue(egress_q, F, port_out, 0)

        def egress_pass(F: list, port: int, truncate: int, egress_q: deque, ingress_q: deque,
                        outputs: list) -> None:
            F[EG_PORT] = port
            F[EG_SPEC] = EG_SPEC_START
            F[CLONE] = 0
            if EG_TS is not None:
                F[EG_TS] = (now() - T0[0]) // 1000
            if egress is not None:
                egress(F)
                clone = F[CLONE]
                if clone:
                    session = pre.session(clone[0])
                    if session is not None and egress_clones[0] + len(session.replicas) > max_clones:
                        log.warning("egress clone to session %d dropped: more than %d egress clones for one "
                                    "packet", clone[0], max_clones)
                    elif session is not None:
                        egress_clones[0] += len(session.replicas)
                        replicas_made[0] += len(session.replicas)
                        C = F.copy()
                        reset_metadata(C, F, clone[1])
                        C[ITYPE] = PKT_INSTANCE_TYPE_EGRESS_CLONE
                        C[PLEN] = F[PLEN]
                        C[RECIRC] = 0
                        for r in session.replicas:
                            copy = C.copy()
                            if RID is not None:
                                copy[RID] = r.rid
                            enqueue(egress_q, copy, r.port, session.truncate)
                if F[EG_SPEC] == DROP_PORT:
                    return
            if compute is not None:
                compute(F)
            deparse(F)
            out = F[OUT]
            out.append(F[DATA][F[POS]:])
            packet = b"".join(out)
            if F[TRUNC]:
                packet = packet[: F[TRUNC]]
            recirc = F[RECIRC]
            if recirc:
                ingress_q.append((packet, 0, PKT_INSTANCE_TYPE_RECIRC, preserve(F, recirc[0])))
                return
            if truncate:
                packet = packet[:truncate]
            outputs.append((port, packet))

        self._ingress_pass = ingress_pass
        self._egress_pass = egress_pass
        self._dequeue = dequeue

    def drain_digests(self) -> list[DigestMessage]:
        if not self._digests:  # the common case, once per packet: no copy
            return []
        out = list(self._digests)
        self._digests.clear()  # in place: the compiled pass holds this list's append
        return out

    # ---- tables -------------------------------------------------------------------------------------

    def table(self, name: str) -> Table:
        try:
            return self.lowered.tables[name]
        except KeyError:
            raise TargetError("NOT_FOUND", f"no table {name!r} (tables: {', '.join(sorted(self.lowered.tables))})") from None

    def table_insert(self, entry: TableEntry) -> None:
        self.table(entry.table).insert(entry)

    def table_modify(self, entry: TableEntry) -> None:
        self.table(entry.table).modify(entry)

    def table_delete(self, table: str, match: Mapping[str, Match], priority: int = 0) -> None:
        self.table(table).delete(match, priority)

    def table_entries(self, table: str) -> Sequence[TableEntry]:
        return self.table(table).entries()

    def table_clear(self, table: str) -> None:
        """Delete every non-const entry (P4Runtime's wildcard delete is done entry by entry by the server)."""
        t = self.table(table)
        if not t.const_entries:
            t.clear()

    def table_set_default(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None:
        self.table(table).set_default(action, params)

    def table_get_default(self, table: str) -> tuple[str, Mapping[str, int]]:
        return self.table(table).get_default()

    # ---- externs ------------------------------------------------------------------------------------

    def _named(self, kind: str, objects: Mapping, name: str):
        try:
            return objects[name]
        except KeyError:
            raise TargetError("NOT_FOUND", f"no {kind} {name!r} (known: {', '.join(sorted(objects))})") from None

    def register_read(self, name: str, index: int) -> int:
        return self._named("register", self.lowered.registers, name).read(index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self._named("register", self.lowered.registers, name).write(index, value)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        return self._named("counter", self.lowered.counters, name).read(index)

    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None:
        self._named("counter", self.lowered.counters, name).write(index, packets, bytes_)

    def direct_counter_read(self, table: str, match: Mapping[str, Match], priority: int = 0) -> tuple[int, int]:
        t = self.table(table)
        if not t.direct_counter:
            raise TargetError("NOT_FOUND", f"table {table} has no direct counter")
        cell = t.find(match, priority).counter
        assert cell is not None
        return cell.packets, cell.bytes

    def direct_counter_write(self, table: str, match: Mapping[str, Match], packets: int, bytes_: int,
                             priority: int = 0) -> None:
        t = self.table(table)
        if not t.direct_counter:
            raise TargetError("NOT_FOUND", f"table {table} has no direct counter")
        cell = t.find(match, priority).counter
        assert cell is not None
        cell.packets, cell.bytes = packets, bytes_

    def meter_set(self, name: str, index: int, cir: float, cburst: int, pir: float, pburst: int) -> None:
        """Configure one meter cell (rates per second, P4Runtime's units); `meter_clear` makes it green again."""
        if cir < 0 or pir < 0 or cburst < 0 or pburst < 0:
            raise TargetError("INVALID_ARGUMENT", f"meter {name}: negative rate or burst")
        meter = self._named("meter", self.lowered.meters, name)
        meter.configure(index, MeterConfig(cir / 1e6, cburst, pir / 1e6, pburst))

    def meter_clear(self, name: str, index: int) -> None:
        self._named("meter", self.lowered.meters, name).configure(index, None)

    def value_set_set(self, name: str, members: Sequence[tuple[int, int]]) -> None:
        """Replace a parser value_set's members: (value, mask) pairs."""
        vs = self._named("value_set", self.lowered.value_sets, name)
        if len(members) > vs.size:
            raise TargetError("RESOURCE_EXHAUSTED", f"value_set {name}: more than {vs.size} members")
        vs.members = [(v & m, m) for v, m in members]

    # ---- packet replication engine ------------------------------------------------------------------

    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        self.pre.group_set(group_id, replicas)

    def mcast_group_delete(self, group_id: int) -> None:
        self.pre.group_delete(group_id)

    def clone_session_set(self, session_id: int, replicas: Sequence[Replica], truncate: int = 0) -> None:
        self.pre.session_set(session_id, replicas, truncate)

    def clone_session_delete(self, session_id: int) -> None:
        self.pre.session_delete(session_id)
