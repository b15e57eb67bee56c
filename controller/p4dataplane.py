"""The switch pool over P4Runtime: `DataPlane` in terms of p4src/kvswitch.p4's tables, counters and packet-outs.

Every P4 name the controller uses is in `PipelineNames` (one place, matching docs/naming.md); every number
comes from P4Info (ids, widths, enum values such as `kvp_event_t.GET_HIT` or `punt_reason_t.SLOT_REPLY`).
Only BMv2-supported P4Runtime features are used: table writes/reads, indirect counter reads, packet-out/in.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.dataplane import HitCounts, SlotContents
from controller.errors import P4RuntimeError
from controller.hosts import Host
from controller.keys import ChunkKey
from controller.switch import SwitchConnection
from kvpool import wire
from kvpool.constants import KVP_HEADER_LEN, KVP_UDP_PORT, Opcode, Status
from softswitch.target import Exact, Lpm, TableEntry


@dataclass(frozen=True)
class PipelineNames:
    """P4 names (P4Info aliases) the controller relies on; see docs/naming.md."""

    index_table: str = "MyIngress.kv_index"
    index_action: str = "MyIngress.set_slot"
    index_key: tuple[str, str, str] = ("hdr.kvp.tenant", "hdr.kvp.prefix_hash", "hdr.kvp.chunk_idx")
    slot_param: str = "slot"
    min_version_param: str = "min_version"
    slot_hits_counter: str = "MyIngress.slot_hits"
    events_counter: str = "MyIngress.kvp_events"
    events_enum: str = "kvp_event_t"
    punt_enum: str = "punt_reason_t"
    sketch_table: str = "MyIngress.sketch_config"
    sketch_action: str = "MyIngress.set_sketch_config"
    route_table: str = "MyIngress.ipv4_lpm"
    route_action: str = "MyIngress.ipv4_forward"
    route_key: str = "hdr.ipv4.dst_addr"
    hot_digest: str = "hot_key_digest_t"


@dataclass(frozen=True)
class DetectorOptions:
    """Hot-key detection in the data plane (count-min sketch + once-per-epoch Bloom filter)."""

    hot_threshold: int = 3
    """GET misses of a key in one epoch that make the switch send a digest."""
    epoch_seconds: float = 10.0
    """A new epoch every this many seconds resets the sketch, so a key can be reported again."""


DEFAULT_P4_CONSTANTS = Path(__file__).resolve().parent.parent / "p4src" / "include" / "constants.p4"
"""Where the enums live when the P4Info lacks them (BMv2's P4Info, see docs/naming.md)."""

CONTROLLER_MAC = "02:00:00:00:00:fe"
"""Source MAC of SLOT_* packet-outs: they never leave the switch, any locally administered address does."""
CONTROLLER_IP = "169.254.0.1"
"""Source IP of SLOT_* packet-outs (link-local: never routed)."""


@dataclass(frozen=True, slots=True)
class IndexSwap:
    """What one batched index change (`P4RuntimeDataPlane.swap`) did, update by update."""

    remove_error: P4RuntimeError | None = None
    """Why the victim's entry could not be deleted (None: deleted, already gone, or no victim)."""
    install_error: P4RuntimeError | None = None
    """Why the newcomer could not be indexed (None: its entry is on the switch)."""
    counter_reset: bool = False
    """The slot's hit counter was zeroed in the same write: the newcomer's hits count from 0."""


class P4RuntimeDataPlane:
    """The pool index and slots of one switch running kvswitch.p4."""

    def __init__(self, switch: SwitchConnection, names: PipelineNames | None = None,
                 capacity: int | None = None, slot_read_timeout: float = 2.0,
                 p4_sources: Sequence[Path] = (DEFAULT_P4_CONSTANTS,)) -> None:
        self.switch = switch
        self.names = names or PipelineNames()
        info = switch.p4info
        self.capacity = capacity or info.counter_size(self.names.slot_hits_counter)
        self.events = info.enum_members(self.names.events_enum, p4_sources)
        self.punt_reasons = info.enum_members(self.names.punt_enum, p4_sources)
        self.slot_read_timeout = slot_read_timeout
        self._req_ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        self._waiting_lock = threading.Lock()
        self.slot_write_acks: dict[str, int] = {}

    # ---- index -------------------------------------------------------------------------------------------

    def _index_entry(self, key: ChunkKey, slot: int = 0, min_version: int = 0) -> TableEntry:
        tenant, prefix_hash, chunk = self.names.index_key
        return TableEntry(
            self.names.index_table,
            {tenant: Exact(key.tenant), prefix_hash: Exact(key.prefix_hash), chunk: Exact(key.chunk)},
            self.names.index_action,
            {self.names.slot_param: slot, self.names.min_version_param: min_version},
        )

    def install(self, key: ChunkKey, slot: int, min_version: int = 0) -> None:
        entry = self._index_entry(key, slot, min_version)
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

    def swap(self, victim: ChunkKey | None, key: ChunkKey, slot: int, min_version: int = 0) -> IndexSwap:
        """Delete `victim`'s entry, zero `slot`'s hit counter and index `key` at `slot`: one Write RPC.

        The updates succeed or fail one by one (a victim already gone does not stop the newcomer); a newcomer
        whose entry exists already is modified instead, as `install` does. The three touch different entities,
        so none needs another's effect (the P4Runtime spec lets a server reorder a batch); sent as delete, reset,
        insert, no hit of the victim lands in the newcomer's count where the server keeps that order (softswitch
        does, under its device lock, so the batch is atomic with respect to packets).
        """
        names = self.names
        entry = self._index_entry(key, slot, min_version)
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
        tenant, prefix_hash, chunk = self.names.index_key
        found = {}
        for entry in self.switch.read_table(self.names.index_table):
            match = entry.match
            key = ChunkKey(match[tenant].value, match[prefix_hash].value, match[chunk].value)
            found[key] = entry.params[self.names.slot_param]
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

    def write_slot(self, slot: int, key: ChunkKey, version: int, value: bytes) -> None:
        header = wire.Header(Opcode.SLOT_WRITE, tenant=key.tenant, req_id=next(self._req_ids) & 0xFFFFFFFF,
                             prefix_hash=key.prefix_hash, chunk_idx=key.chunk, chunk_count=key.chunk + 1,
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
