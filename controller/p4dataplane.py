"""The switch pool over P4Runtime: `DataPlane` in terms of p4src/kvswitch.p4's tables, counters and packet-outs.

Every P4 name the controller uses is in `PipelineNames` (one place, matching docs/naming.md), by P4Info alias
(the shortest unique suffix), so the program may move objects into sub-controls. Every number comes from P4Info
(ids, widths, enum values such as `kvp_event_t.GET_HIT`), or, for enums p4c leaves out of P4Info, from the
packaged `controller.codes`; the P4 source is never read at run time. Only BMv2-supported P4Runtime features
are used: table writes/reads, indirect counter reads, packet-out/in.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.codes import KvpEvent, PortRole, PuntReason, members
from controller.dataplane import HitCounts, IndexSwap, SlotContents
from controller.hosts import Host
from kvpool import wire
from kvpool.constants import KVP_HEADER_LEN, KVP_UDP_PORT, Opcode, Status
from kvpool.keys import ChunkKey
from p4rt.connection import SwitchConnection
from p4rt.entities import Exact, Lpm, TableEntry
from p4rt.errors import P4RuntimeError


@dataclass(frozen=True)
class PipelineNames:
    """P4 names (P4Info aliases) the controller relies on; see docs/naming.md."""

    index_table: str = "kv_index"
    index_action: str = "set_slot"
    index_key: tuple[str, str, str] = ("tenant", "prefix_hash", "chunk_idx")
    """Key fields of kv_index by their last name component (P4Info: `hdr.kvp.tenant`, ...)."""
    slot_param: str = "slot"
    min_version_param: str = "min_version"
    generation_param: str = "generation"
    """Admission generation (docs/dataplane.md, *Coherence*)."""
    slot_hits_counter: str = "slot_hits"
    events_counter: str = "kvp_events"
    events_enum: str = "kvp_event_t"
    punt_enum: str = "punt_reason_t"
    port_role_enum: str = "port_role_t"
    sketch_table: str = "sketch_config"
    sketch_action: str = "set_sketch_config"
    route_table: str = "ipv4_lpm"
    route_action: str = "ipv4_forward"
    route_key: str = "dst_addr"
    port_role_table: str = "port_role"
    port_role_action: str = "set_port_role"
    port_role_key: str = "ingress_port"
    port_role_param: str = "role"
    hot_digest: str = "hot_key_digest_t"
    over_slot_digest: str = "over_slot_digest_t"
    """A trusted reply of an indexed key carried a chunk larger than a slot (docs/dataplane.md, *Over-slot
    replies*)."""


@dataclass(frozen=True)
class DetectorOptions:
    """Hot-key detection in the data plane (count-min sketch + once-per-epoch Bloom filter)."""

    hot_threshold: int = 3
    """GET misses of a key in one epoch that make the switch send a digest."""
    epoch_seconds: float = 10.0
    """A new epoch every this many seconds resets the sketch, so a key can be reported again."""


CONTROLLER_MAC = "02:00:00:00:00:fe"
"""Source MAC of SLOT_* packet-outs: they never leave the switch, any locally administered address does."""
CONTROLLER_IP = "169.254.0.1"
"""Source IP of SLOT_* packet-outs (link-local: never routed)."""


class P4RuntimeDataPlane:
    """The pool index and slots of one switch running kvswitch.p4."""

    def __init__(self, switch: SwitchConnection, names: PipelineNames | None = None,
                 capacity: int | None = None, slot_read_timeout: float = 2.0) -> None:
        self.switch = switch
        self.names = names = names or PipelineNames()
        info = switch.p4info
        self.capacity = capacity or info.counter_size(names.slot_hits_counter)
        self.events = info.enum_members(names.events_enum, members(KvpEvent))
        self.punt_reasons = info.enum_members(names.punt_enum, members(PuntReason))
        self.port_roles = info.enum_members(names.port_role_enum, members(PortRole))
        self._key_fields = tuple(info.match_field(names.index_table, field).name for field in names.index_key)
        """kv_index's key fields by their full P4Info names (how entries read back name them)."""
        self.slot_read_timeout = slot_read_timeout
        self._req_ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        self._waiting_lock = threading.Lock()
        self.slot_write_acks: dict[str, int] = {}

    # ---- index -------------------------------------------------------------------------------------------

    def _index_entry(self, key: ChunkKey, slot: int = 0, min_version: int = 0, generation: int = 0) -> TableEntry:
        names = self.names
        tenant, prefix_hash, chunk = self._key_fields
        params = {names.slot_param: slot, names.min_version_param: min_version, names.generation_param: generation}
        return TableEntry(
            names.index_table,
            {tenant: Exact(key.tenant), prefix_hash: Exact(key.prefix_hash), chunk: Exact(key.chunk)},
            names.index_action, params,
        )

    def install(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int = 0) -> None:
        entry = self._index_entry(key, slot, min_version, generation)
        try:
            self.switch.insert(entry)
        except P4RuntimeError as exc:
            if not exc.only("ALREADY_EXISTS"):
                raise
            self.switch.modify(entry)

    def remove(self, key: ChunkKey) -> None:
        try:
            self.switch.delete(self._index_entry(key))
        except P4RuntimeError as exc:
            if not exc.only("NOT_FOUND"):
                raise

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0,
             generation: int = 0) -> IndexSwap:
        """Delete `victim`'s entry, zero `slot`'s hit counter and index `key` at `slot`: one Write RPC.

        The updates succeed or fail one by one (a victim already gone does not stop the newcomer); a newcomer
        whose entry exists already is modified instead, as `install` does. The three touch different entities,
        so none needs another's effect (the P4Runtime spec lets a server reorder a batch); sent as delete, reset,
        insert, no hit of the victim lands in the newcomer's count where the server keeps that order (softswitch
        does, under its device lock, so the batch is atomic with respect to packets).
        """
        names = self.names
        entry = self._index_entry(key, slot, min_version, generation)
        updates = [self.switch.table_update("DELETE", self._index_entry(victim))] if victim is not None else []
        updates.append(self.switch.counter_update(names.slot_hits_counter, slot))
        updates.append(self.switch.table_update("INSERT", entry))
        try:
            outcomes = self.switch.write_each(updates)
        except P4RuntimeError as exc:  # nothing applied
            return IndexSwap(exc if victim is not None else None, exc, False)
        removed = outcomes[0] if victim is not None else None
        if removed is not None and removed.only("NOT_FOUND"):
            removed = None
        installed = outcomes[-1]
        if installed is not None and installed.only("ALREADY_EXISTS"):
            try:
                self.switch.modify(entry)
                installed = None
            except P4RuntimeError as exc:
                installed = exc
        return IndexSwap(removed, installed, outcomes[-2] is None)

    def installed(self) -> dict[ChunkKey, int]:
        return {key: slot for key, (slot, _) in self.installed_entries().items()}

    def installed_entries(self) -> dict[ChunkKey, tuple[int, int]]:
        """The index read back: key → (slot, generation); generation 0 on a program without them."""
        tenant, prefix_hash, chunk = self._key_fields
        found = {}
        for entry in self.switch.read_table(self.names.index_table):
            match = entry.match
            key = ChunkKey(match[tenant].value, match[prefix_hash].value, match[chunk].value)  # type: ignore[union-attr]
            found[key] = (entry.params[self.names.slot_param], entry.params.get(self.names.generation_param, 0))
        return found

    # ---- counters ----------------------------------------------------------------------------------------

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        """Given slots are read cell by cell in one Read (cheap for the few occupied slots of a young pool);
        beyond a quarter of the pool, or for None, the whole counter array at once."""
        name = self.names.slot_hits_counter
        if slots is not None and len(slots) <= self.capacity // 4:
            cells = self.switch.read_counter(name, slots)
            return {slot: cells.get(slot, (0, 0))[0] for slot in slots}
        every = {index: packets for index, (packets, _) in self.switch.read_counter(name).items()}
        return every if slots is None else {slot: every.get(slot, 0) for slot in slots}

    def hit_counts(self) -> HitCounts:
        cells = self.switch.read_counter(self.names.events_counter)

        def packets(event: str) -> int:
            return cells.get(self.events.get(event, -1), (0, 0))[0]

        return HitCounts(switch=packets("GET_HIT"), server=packets("GET_MISS"), fills=packets("FILL"),
                         digests=packets("HOT_DIGEST"))

    # ---- configuration -----------------------------------------------------------------------------------

    def configure_detector(self, options: DetectorOptions, epoch: int) -> None:
        """Set the sketch's threshold and epoch (sketch_config's default action); epoch must be ≠ 0."""
        self.switch.set_default(self.names.sketch_table, self.names.sketch_action,
                                {"hot_threshold": options.hot_threshold, "epoch": epoch & 0xFFFFFFFF or 1})

    def install_port_roles(self, roles: Mapping[int, PortRole]) -> int:
        """One `port_role` entry per port whose role is not the default (HOST)."""
        names = self.names
        written = 0
        for port, role in sorted(roles.items()):
            if role is PortRole.HOST:
                continue
            entry = TableEntry(names.port_role_table, {names.port_role_key: Exact(port)}, names.port_role_action,
                               {names.port_role_param: self.port_roles[role.name]})
            try:
                self.switch.insert(entry)
            except P4RuntimeError as exc:
                if not exc.only("ALREADY_EXISTS"):
                    raise
                self.switch.modify(entry)
            written += 1
        return written

    def install_routes(self, hosts: Sequence[Host]) -> int:
        """One /32 route per host: IPv4 destination → (its MAC, its switch port)."""
        for host in hosts:
            entry = TableEntry(
                self.names.route_table,
                {self.names.route_key: Lpm(int(ipaddress.IPv4Address(host.ip)), 32)},
                self.names.route_action,
                {"dst_mac": int(host.mac.replace(":", ""), 16), "port": host.port},
            )
            try:
                self.switch.insert(entry)
            except P4RuntimeError as exc:
                if not exc.only("ALREADY_EXISTS"):
                    raise
                self.switch.modify(entry)
        return len(hosts)

    # ---- slot packet-outs --------------------------------------------------------------------------------

    def _slot_packet(self, header: wire.Header, value: bytes | None) -> bytes:
        payload = wire.encode(header, value)
        packet = (Ether(src=CONTROLLER_MAC, dst=CONTROLLER_MAC) / IP(src=CONTROLLER_IP, dst=CONTROLLER_IP, ttl=64)
                  / UDP(sport=KVP_UDP_PORT, dport=KVP_UDP_PORT, chksum=0) / payload)
        return bytes(packet)

    def write_slot(self, slot: int, key: ChunkKey, version: int, value: bytes, chunk_count: int) -> None:
        """SLOT_WRITE what the storage node holds: its version, the block's real chunk_count and the value. The
        switch fills the slot under the generation of `key`'s index entry (installed first)."""
        header = wire.Header(Opcode.SLOT_WRITE, tenant=key.tenant, req_id=next(self._req_ids) & 0xFFFFFFFF,
                             prefix_hash=key.prefix_hash, chunk_idx=key.chunk, chunk_count=chunk_count,
                             version=version, aux=slot)
        self.switch.packet_out(self._slot_packet(header, value), {"egress_port": 0})

    def read_slot(self, slot: int) -> SlotContents:
        """SLOT_READ packet-out, wait for the SLOT_READ_REPLY packet-in. Raises TimeoutError or ValueError."""
        if not 0 <= slot < self.capacity:
            raise ValueError(f"slot {slot} outside the pool (0..{self.capacity - 1})")
        req_id = next(self._req_ids) & 0xFFFFFFFF
        done = threading.Event()
        box: list = []
        with self._waiting_lock:
            self._waiting[req_id] = (done, box)
        try:
            header = wire.Header(Opcode.SLOT_READ, req_id=req_id, aux=slot)
            self.switch.packet_out(self._slot_packet(header, None), {"egress_port": 0})
            if not done.wait(self.slot_read_timeout):
                raise TimeoutError(f"no SLOT_READ_REPLY for slot {slot} within {self.slot_read_timeout} s")
        finally:
            with self._waiting_lock:
                self._waiting.pop(req_id, None)
        reply, value = box[0]
        if reply.status not in (Status.OK, Status.MISS):
            raise ValueError(f"switch refused SLOT_READ of slot {slot}: status {reply.status:#x}")
        key = ChunkKey(reply.tenant, reply.prefix_hash, reply.chunk_idx)
        return SlotContents(slot, key, reply.status == Status.OK, reply.version, (value or b"")[: reply.value_len])

    def on_slot_reply(self, kvp: bytes) -> bool:
        """A SLOT_WRITE_ACK / SLOT_READ_REPLY packet-in's KVP bytes; True when it was one of ours."""
        if len(kvp) < KVP_HEADER_LEN:
            return False
        header = wire.Header.unpack(kvp)
        if header.opcode == Opcode.SLOT_WRITE_ACK:
            name = Status(header.status).name if header.status in Status._value2member_map_ else str(header.status)
            self.slot_write_acks[name] = self.slot_write_acks.get(name, 0) + 1
            return True
        if header.opcode != Opcode.SLOT_READ_REPLY:
            return False
        with self._waiting_lock:
            waiter = self._waiting.get(header.req_id)
        if waiter is None:
            return False
        done, box = waiter
        box.append((header, wire.value_of(kvp)))
        done.set()
        return True
