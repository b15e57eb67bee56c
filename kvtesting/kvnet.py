"""Helpers of the data-plane tests: the kvswitch program on a Target, wired as a tiny network.

The tests talk to the switch only through `softswitch.target.Target` (packets in, packets out, table
entries, counters, digests), so the same tests can run against another target (BMv2 behind P4Runtime)
by giving `target` another implementation. Registers are read only where a test says why.

Network used by every test (one switch, two hosts, two fabric links, the CPU port)::

    client 10.0.0.1 ── port 1 (HOST) ────┐             ┌─ port 3 (FABRIC) ── another switch
                                         kvswitch ─────┤
    storage 10.0.0.2 ─ port 2 (STORAGE) ─┘     │       └─ port 4 (FABRIC) ── another switch
                                         CPU_PORT 255 (controller)
"""

from __future__ import annotations

import os
import pathlib
import struct
import zlib
from dataclasses import dataclass, field

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.codes import PortRole
from kvpool.constants import KVP_UDP_PORT, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from softswitch.target import DigestMessage, Exact, Lpm, Replica, TableEntry, Target

P4_MAIN = pathlib.Path(os.environ.get("KVSWITCH_P4_MAIN")
                       or pathlib.Path(__file__).resolve().parents[1] / "p4src" / "kvswitch.p4")
"""The program under test; KVSWITCH_P4_MAIN points the tests at a variant (e.g. a deliberately broken copy)."""
CPU_PORT = 255
CLIENT_PORT, STORAGE_PORT = 1, 2
FABRIC_PORTS = (3, 4)
"""Links to other switches of a fabric (port_role FABRIC); nothing is routed through them."""
FABRIC_INVALIDATE_SESSION = 1
"""The clone session of fabric invalidations (`FABRIC_INVALIDATE_SESSION` in p4src/include/constants.p4)."""
CLIENT_IP, STORAGE_IP = "10.0.0.1", "10.0.0.2"
CLIENT_MAC, STORAGE_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02"
SWITCH_MAC = "00:00:00:00:00:fe"
"""The MAC hosts use as next hop; the switch itself never checks it (it routes on IPv4 only)."""
CLIENT_UDP_PORT = 40001
INVALIDATE = 0x30
"""`kvp_opcode_t.INVALIDATE` (switch to switch; not in `kvpool.constants.Opcode` until the lead adds it)."""


def chunk_key(tenant: int = 7, prefix_hash: int = 0x0123456789ABCDEF, chunk_idx: int = 0) -> ChunkKey:
    """The tests' chunk keys: `kvpool.keys.ChunkKey` (the one key type), with defaults the tests share."""
    return ChunkKey(tenant, prefix_hash, chunk_idx)


def value_chunk(seed: int) -> bytes:
    """A recognisable 128-byte value chunk."""
    return bytes((seed * 31 + i) & 0xFF for i in range(128))


def kvp_frame(kvp: KVP, *, to_storage: bool = True, sport: int = CLIENT_UDP_PORT) -> Ether:
    """A KVP message as a host would put it on the wire (client → storage, or storage → client)."""
    if to_storage:
        return (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
                / UDP(sport=sport, dport=KVP_UDP_PORT) / kvp)
    return (Ether(dst=SWITCH_MAC, src=STORAGE_MAC) / IP(src=STORAGE_IP, dst=CLIENT_IP)
            / UDP(sport=KVP_UDP_PORT, dport=sport) / kvp)


def kvp_of(data: bytes, *, packet_in: bool = False) -> Ether:
    """Dissect a frame the switch sent (after a 4-byte packet_in header for the CPU port)."""
    return Ether(data[4:] if packet_in else data)


@dataclass
class KvNet:
    """The test network around one Target: helpers that speak in hosts, keys and controller actions."""

    target: Target
    enums: dict[str, dict[str, int]]
    epoch_offset: int = 0
    """Added to the epoch `sketch` sets: a switch shared between tests (a switch process) gets a new block of
    epoch numbers per test, so cells a previous test tagged with "its" epoch 1 never count again."""
    generations: dict[ChunkKey, int] = field(default_factory=dict)
    """The generation of each key's current admission (what the controller keeps per index entry)."""
    last_generation: int = 0
    """Generations handed out so far: every `index` is a new admission with a new, larger one."""

    # -- controller-style configuration
    def install_routes(self) -> None:
        for ip, mac, port in ((CLIENT_IP, CLIENT_MAC, CLIENT_PORT), (STORAGE_IP, STORAGE_MAC, STORAGE_PORT)):
            self.target.table_insert(TableEntry(
                "MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(_ip(ip), 32)},
                "MyIngress.ipv4_forward", {"dst_mac": _mac(mac), "port": port}))

    def set_port_roles(self) -> None:
        """STORAGE for the storage node's port, FABRIC for the fabric links; the client's stays HOST."""
        roles = self.enums.get("port_role_t") or {role.name: int(role) for role in PortRole}
        for port, role in [(STORAGE_PORT, "STORAGE")] + [(p, "FABRIC") for p in FABRIC_PORTS]:
            self.target.table_insert(TableEntry(
                "MyIngress.port_role", {"ingress_port": Exact(port)},
                "MyIngress.set_port_role", {"role": roles[role]}))

    def index(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int | None = None) -> None:
        """Admit `key` to `slot`: a new admission, with a fresh generation unless the test names one."""
        if generation is None:
            generation = self.last_generation + 1
        self.last_generation = max(self.last_generation, generation)
        self.generations[key] = generation
        self.target.table_insert(self._index_entry(key, slot, min_version))

    def reindex(self, key: ChunkKey, slot: int, min_version: int) -> None:
        """Modify `key`'s index entry (same admission), as the controller does when it learns of a newer
        version."""
        self.target.table_modify(self._index_entry(key, slot, min_version))

    def evict(self, key: ChunkKey) -> None:
        """Delete `key`'s index entry, as the controller does on eviction."""
        self.target.table_delete("MyIngress.kv_index", _key_match(key))
        del self.generations[key]

    def _index_entry(self, key: ChunkKey, slot: int, min_version: int) -> TableEntry:
        return TableEntry("MyIngress.kv_index", _key_match(key), "MyIngress.set_slot",
                          {"slot": slot, "min_version": min_version, "generation": self.generations[key]})

    def fabric_session(self, ports: tuple[int, ...] = FABRIC_PORTS) -> None:
        """Configure the fabric invalidation clone session with these ports (the controller's job)."""
        self.target.clone_session_set(FABRIC_INVALIDATE_SESSION, [Replica(p, 0) for p in ports])

    def sketch(self, hot_threshold: int, epoch: int) -> None:
        self.target.table_set_default("MyIngress.sketch_config", "MyIngress.set_sketch_config",
                                      {"hot_threshold": hot_threshold, "epoch": epoch + self.epoch_offset})

    # -- hosts (`frames`: how many frames a correct switch sends for this one; a switch process is waited on
    #    until they came, never judged by a quiet gap: `kvtesting.expect`)
    def send(self, port: int, frame: Ether | bytes, frames: int | None = None) -> list[tuple[int, bytes]]:
        return expect.process(self.target, port, bytes(frame), frames)

    def get(self, key: ChunkKey, req_id: int = 1, flags: int = 0, version: int = 0,
            frames: int | None = None) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=4, req_id=req_id, flags=flags, version=version)
        return self.send(CLIENT_PORT, kvp_frame(kvp), frames)

    def server_reply(self, key: ChunkKey, value: bytes, version: int, *, csum: int | None = None,
                     flags: int | None = None, req_id: int = 1, port: int = STORAGE_PORT,
                     status: int = Status.HIT_SERVER, frames: int | None = None) -> list[tuple[int, bytes]]:
        """A GET_REPLY with a value, as the storage node sends it (or a host forging one, `port` = CLIENT_PORT)."""
        kvp = KVP(opcode=Opcode.GET_REPLY, status=status, tenant=key.tenant,
                  prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx, chunk_count=4, req_id=req_id,
                  version=version, value_csum=csum, flags=flags) / KVPValue.from_bytes(value)
        return self.send(port, kvp_frame(kvp, to_storage=False), frames)

    def put(self, key: ChunkKey, value: bytes, version: int, frames: int | None = None) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.PUT, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=4, version=version) / KVPValue.from_bytes(value)
        return self.send(CLIENT_PORT, kvp_frame(kvp), frames)

    def put_ack(self, key: ChunkKey, version: int, *, status: int = Status.OK,
                port: int = STORAGE_PORT, frames: int | None = None) -> list[tuple[int, bytes]]:
        """The storage node's answer to a PUT (from `port`: CLIENT_PORT for a host forging one)."""
        kvp = KVP(opcode=Opcode.PUT_ACK, status=status, tenant=key.tenant, prefix_hash=key.prefix_hash,
                  chunk_idx=key.chunk_idx, chunk_count=4, version=version)
        return self.send(port, kvp_frame(kvp, to_storage=False), frames)

    def invalidate(self, key: ChunkKey, version: int, *, hops: int,
                   port: int = FABRIC_PORTS[0], frames: int | None = None) -> list[tuple[int, bytes]]:
        """Another switch's INVALIDATE (`hops` = relays it may still take), arriving on `port`."""
        kvp = KVP(opcode=INVALIDATE, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=4, version=version, aux=hops)
        return self.send(port, kvp_frame(kvp, to_storage=False), frames)

    # -- controller through the CPU port
    def packet_out(self, egress_port: int, frame: Ether | bytes, frames: int | None = None) -> list[tuple[int, bytes]]:
        return self.send(CPU_PORT, struct.pack("!HH", egress_port, 0) + bytes(frame), frames)

    def slot_write(self, key: ChunkKey, slot: int, value: bytes, version: int,
                   csum: int | None = None, chunk_count: int = 4, value_len: int | None = None) -> KVP:
        kvp = KVP(opcode=Opcode.SLOT_WRITE, tenant=key.tenant, prefix_hash=key.prefix_hash,
                  chunk_idx=key.chunk_idx, chunk_count=chunk_count, version=version, aux=slot,
                  value_csum=csum, value_len=value_len) / KVPValue.from_bytes(value)
        return self._slot_op(kvp)

    def slot_read(self, slot: int) -> KVP:
        return self._slot_op(KVP(opcode=Opcode.SLOT_READ, aux=slot, req_id=99))

    def _slot_op(self, kvp: KVP) -> KVP:
        out = self.packet_out(0, kvp_frame(kvp), frames=1)
        assert [p for p, _ in out] == [CPU_PORT], out
        data = out[0][1]
        assert struct.unpack("!HBB", data[:4]) == (CPU_PORT, self.enums["punt_reason_t"]["SLOT_REPLY"], 0)
        frame = kvp_of(data, packet_in=True)
        assert frame[IP].len == len(frame[IP]) and frame[UDP].len == len(frame[UDP])
        return frame[KVP]

    # -- observations (`until`, `count`: what a correct switch reaches; a switch process is read again until it
    #    did, so a packet it counts after the harness stopped waiting for output still counts: `kvtesting.expect`)
    def drops(self, reason: str, until: int | None = None) -> int:
        return self._packets("MyIngress.drop_reason", self.enums["drop_reason_t"][reason], until)

    def events(self, event: str, until: int | None = None) -> int:
        return self._packets("MyIngress.kvp_events", self.enums["kvp_event_t"][event], until)

    def slot_hits(self, slot: int, until: int | None = None) -> int:
        return self._packets("MyIngress.slot_hits", slot, until)

    def _packets(self, counter: str, index: int, until: int | None) -> int:
        return expect.settled(self.target, lambda: self.target.counter_read(counter, index)[0], until)

    def digests(self, count: int | None = None) -> list[DigestMessage]:
        return expect.digests(self.target, count)


def _key_match(key: ChunkKey) -> dict[str, Exact]:
    return {"hdr.kvp.tenant": Exact(key.tenant), "hdr.kvp.prefix_hash": Exact(key.prefix_hash),
            "hdr.kvp.chunk_idx": Exact(key.chunk_idx)}


def _ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def crc(value: bytes) -> int:
    return zlib.crc32(value) & 0xFFFFFFFF
