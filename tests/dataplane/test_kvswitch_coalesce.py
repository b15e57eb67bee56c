"""Request coalescing (p4src/coalesce.p4): readers of a chunk whose GET is outstanding wait at the switch and get
copies of its reply; the storage node sees one GET.  Runs on every target of `conftest.target`.

Network (kvnet's two hosts plus readers behind ports 1, 3 and 4)::

    reader A 10.0.0.1 :40001 ─┐
    reader A2 10.0.0.1 :40002 ├ port 1
    reader B 10.0.0.11 :40011 ┘
    reader C 10.0.0.3 ──────── port 3       kvswitch ── port 2 ── storage 10.0.0.2
    reader D 10.0.0.4 ──────── port 4

Only packets, table entries, the PRE and counters are used (no registers), so the shared switch processes run
these too; their leftover pending entries are freed by the fresh coalescing epoch each test sets.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.coalescing import (
    ALL_PORTS,
    BATCH,
    WAITERS,
    CoalescingOptions,
    group_layouts,
    sized_group,
)
from kvpool.constants import KVP_UDP_PORT, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    _ip,
    _mac,
    chunk_key,
    value_chunk,
)
from softswitch.target import Lpm, Replica, TableEntry, Target

PORTS = (1, 2, 3, 4)
"""Every port of the test switch (the process targets have veths on exactly these)."""
GROUP = 7
"""The coalescing multicast group; any id the controller does not use otherwise."""
LONG_TIMEOUT_US = 30_000_000
"""Long enough that no entry expires during a test, however slow the target."""
SIMULATED_TIMEOUT_S = 0.3
"""An entry's lifetime on the in-process switch, whose clock the test moves (`advance_clock`): no real time."""
PROCESS_TIMEOUT_S = 5.0
"""An entry's lifetime on a switch process (real time). What must happen before it expires takes a few
quiescence waits (well under a second); five seconds is a margin no busy machine eats, so only the wait for
expiry (which load can only lengthen) is real time."""


def entry_lifetime_s(target: Target) -> float:
    return SIMULATED_TIMEOUT_S if hasattr(target, "advance_clock") else PROCESS_TIMEOUT_S


def let_entries_expire(target: Target, timeout_s: float) -> None:
    """Past every entry's lifetime: the in-process switch's clock moves; a process's takes real time."""
    if hasattr(target, "advance_clock"):
        target.advance_clock(int(timeout_s * 2e6))
    else:
        time.sleep(timeout_s * 1.5)
ENTRIES = 4096
"""COALESCE_ENTRIES: pending entries, indexed by crc32(COALESCE_SALT ‖ key) mod ENTRIES."""
SALT = 0x2545F491
EVENTS = "MyIngress.coalesce_events"
REPLICATED = "MyEgress.coalesce_replicated"


@dataclass(frozen=True)
class Reader:
    name: str
    ip: str
    mac: str
    port: int
    udp_port: int


A = Reader("A", CLIENT_IP, CLIENT_MAC, CLIENT_PORT, 40001)
A2 = Reader("A2", CLIENT_IP, CLIENT_MAC, CLIENT_PORT, 40002)
B = Reader("B", "10.0.0.11", "00:00:00:00:00:0b", CLIENT_PORT, 40011)
C = Reader("C", "10.0.0.3", "00:00:00:00:00:03", 3, 40003)
D = Reader("D", "10.0.0.4", "00:00:00:00:00:04", 4, 40004)
KEY = chunk_key(tenant=7, prefix_hash=0x0C0A1E5CE0000001, chunk_idx=2)


def coalesce_index(key: ChunkKey) -> int:
    """The key's pending entry, computed as the program does (v1model crc32 over salt ‖ tenant ‖ prefix ‖ chunk)."""
    data = SALT.to_bytes(4, "big") + key.tenant.to_bytes(2, "big") + key.prefix_hash.to_bytes(8, "big") \
        + key.chunk_idx.to_bytes(4, "big")  # chunk_idx is 32 bits (protocol v2)
    return zlib.crc32(data) % ENTRIES


PARKED_CELLS = 4096
PARKED_SALT = 0x5A17C0DE


def parked_cell(reader: Reader, req_id: int) -> int:
    """A request's coalesce_parked cell, as the program computes it (crc32 over salt ‖ IPv4 ‖ UDP port ‖ req_id)."""
    data = PARKED_SALT.to_bytes(4, "big") + bytes(int(b) for b in reader.ip.split(".")) \
        + reader.udp_port.to_bytes(2, "big") + req_id.to_bytes(4, "big")
    return zlib.crc32(data) % PARKED_CELLS


@dataclass
class CoalesceNet:
    """KvNet plus readers on several ports, coalescing configured as the controller does."""

    net: KvNet
    target: Target
    epoch: int

    def configure(self, timeout_us: int = LONG_TIMEOUT_US, port_groups: bool = True) -> None:
        """Coalescing on, with the controller's groups (`group_layouts`): all ports, and one per port."""
        options = CoalescingOptions(timeout_us=timeout_us, epoch=self.epoch, mcast_group=GROUP,
                                    port_groups=port_groups)
        for group, layout in group_layouts(options, PORTS).items():
            self.target.mcast_group_set(group, [Replica(p, rid) for p, rid in layout])
        self.target.table_set_default("MyIngress.coalesce_config", "MyIngress.set_coalesce_config",
                                      options.config_params())

    def get(self, reader: Reader, req_id: int, key: ChunkKey = KEY, *, frames: int | None = None,
            parks: bool = False, chunk_count: int = 4, **fields: int) -> list[tuple[int, bytes]]:
        """`reader`'s GET; `frames`: what a correct switch sends for it, `parks`: it parks the GET (sends nothing).

        A parked GET gives no frame to wait for: on a switch process the test waits until COALESCED counted it,
        so the reply sent next never overtakes it however busy the machine is."""
        kvp = KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=chunk_count, req_id=req_id, **fields)
        frame = (Ether(dst=SWITCH_MAC, src=reader.mac) / IP(src=reader.ip, dst=STORAGE_IP)
                 / UDP(sport=reader.udp_port, dport=KVP_UDP_PORT) / kvp)
        coalesced = self.event("COALESCED") if parks and expect.waits(self.target) else 0
        out = expect.process(self.target, reader.port, bytes(frame), frames)
        if parks:
            self.event("COALESCED", until=coalesced + 1)
        return out

    def reply(self, reader: Reader, req_id: int, key: ChunkKey = KEY, *, seed: int = 1, version: int = 3,
              port: int = STORAGE_PORT, opcode: int = Opcode.GET_REPLY,
              status: int = Status.HIT_SERVER, frames: int | None = None,
              chunk_count: int = 4, aux: int = 0, value: bytes | None = None) -> list[tuple[int, bytes]]:
        """The storage node's answer to `reader`'s GET `req_id` (from `port`: the storage node's by default);
        `frames`: how many a correct switch sends (one per reader it serves). `aux`: the reply's offset in a span
        GET; `value`: a chunk larger than a slot (its size sets chunk_shift), else a slot's `value_chunk(seed)`."""
        kvp = KVP(opcode=opcode, status=status, tenant=key.tenant, prefix_hash=key.prefix_hash,
                  chunk_idx=key.chunk_idx, chunk_count=chunk_count, req_id=req_id, version=version, aux=aux)
        if opcode == Opcode.GET_REPLY and value is not None:
            kvp.chunk_shift = len(value).bit_length() - 1
            if status in (Status.HIT_SERVER, Status.HIT_SWITCH):
                kvp = kvp / Raw(value)
        elif opcode == Opcode.GET_REPLY:
            kvp = kvp / KVPValue.from_bytes(value_chunk(seed))
        frame = (Ether(dst=SWITCH_MAC, src=STORAGE_MAC) / IP(src=STORAGE_IP, dst=reader.ip)
                 / UDP(sport=KVP_UDP_PORT, dport=reader.udp_port) / kvp)
        return expect.process(self.target, port, bytes(frame), frames)

    def put(self, reader: Reader, key: ChunkKey = KEY, version: int = 4,
            frames: int | None = None) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.PUT, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=4, version=version) / KVPValue.from_bytes(value_chunk(9))
        frame = (Ether(dst=SWITCH_MAC, src=reader.mac) / IP(src=reader.ip, dst=STORAGE_IP)
                 / UDP(sport=reader.udp_port, dport=KVP_UDP_PORT) / kvp)
        return expect.process(self.target, reader.port, bytes(frame), frames)

    def event(self, name: str, until: int | None = None) -> int:
        """The coalesce_event_t counter; `until`: the value a correct switch reaches (`kvtesting.expect.settled`)."""
        index = self.net.enums["coalesce_event_t"][name]
        return expect.settled(self.target, lambda: self.target.counter_read(EVENTS, index)[0], until)

    def replicated(self) -> int:
        return self.target.counter_read(REPLICATED, 0)[0]


@pytest.fixture
def coal(net: KvNet, target: Target) -> CoalesceNet:
    """Routes to every reader, coalescing counters at zero (a shared switch keeps them), coalescing not yet on."""
    for reader in (B, C, D):
        target.table_insert(TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(_ip(reader.ip), 32)},
                                       "MyIngress.ipv4_forward", {"dst_mac": _mac(reader.mac), "port": reader.port}))
    for index in net.enums["coalesce_event_t"].values():
        target.counter_write(EVENTS, index, 0, 0)
    target.counter_write(REPLICATED, 0, 0, 0)
    return CoalesceNet(net, target, epoch=1 + getattr(target, "epoch_offset", 0))


# ---- checks -----------------------------------------------------------------------------------------------

def gets_to_storage(out: Sequence[tuple[int, bytes]]) -> int:
    return sum(1 for port, data in out if port == STORAGE_PORT and Ether(data)[KVP].opcode == Opcode.GET)


def assert_each_reader_served_once(out: Sequence[tuple[int, bytes]], readers: dict[Reader, int],
                                   seed: int = 1, version: int = 3) -> None:
    """Exactly one reply per reader, on its port, to its MAC/IP/UDP port, with its request id and the value."""
    seen: dict[tuple[str, int], list[int]] = {}
    for port, data in out:
        frame = Ether(data)
        assert KVP in frame and frame[KVP].opcode == Opcode.GET_REPLY, frame.summary()
        seen.setdefault((frame[IP].dst, frame[UDP].dport), []).append(port)
        reader = next((r for r in readers if (r.ip, r.udp_port) == (frame[IP].dst, frame[UDP].dport)), None)
        assert reader is not None, f"a reply for nobody waiting: {frame.summary()}"
        assert port == reader.port
        assert frame[Ether].dst == reader.mac
        assert frame[KVP].req_id == readers[reader]
        assert (frame[KVP].status, frame[KVP].version) == (Status.HIT_SERVER, version)
        assert frame[KVPValue].value_bytes == value_chunk(seed)
        assert frame[IP].src == STORAGE_IP and frame[UDP].sport == KVP_UDP_PORT
        assert frame[IP].len == len(frame[IP]) and frame[UDP].len == len(frame[UDP])
        assert checksums_ok(frame), frame.show2(dump=True)
    assert sorted(seen) == sorted((r.ip, r.udp_port) for r in readers), seen
    assert all(len(ports) == 1 for ports in seen.values()), seen


def checksums_ok(frame: Ether) -> bool:
    """IPv4 header checksum right; UDP checksum right or 0 (copies rewritten past the IPv4 header carry 0)."""
    rebuilt = Ether(bytes(frame))
    del rebuilt[IP].chksum
    if frame[UDP].chksum != 0:
        del rebuilt[UDP].chksum
    rebuilt = Ether(bytes(rebuilt))
    return (rebuilt[IP].chksum, rebuilt[UDP].chksum) == (frame[IP].chksum, frame[UDP].chksum)


# ---- tests ------------------------------------------------------------------------------------------------

GROUPS = {
    "two readers, two ports": (A, C),
    "three readers, three ports": (A, C, D),
    "two readers, one port": (A, A2),
    "three readers, one port": (A, A2, B),
    "five readers, two share the origin's port": (A, A2, C, B, D),
}


@pytest.mark.parametrize("readers", GROUPS.values(), ids=GROUPS.keys())
def test_readers_of_a_pending_chunk_share_one_get(coal: CoalesceNet, readers: tuple[Reader, ...]) -> None:
    coal.configure()
    req_ids = {r: 100 + i for i, r in enumerate(readers)}
    forwarded = [coal.get(readers[0], req_ids[readers[0]], frames=1)]
    forwarded += [coal.get(r, req_ids[r], parks=True) for r in readers[1:]]
    assert gets_to_storage(forwarded[0]) == 1
    assert all(out == [] for out in forwarded[1:]), "a waiter's GET left the switch"
    out = coal.reply(readers[0], req_ids[readers[0]], frames=len(req_ids))
    assert_each_reader_served_once(out, req_ids)
    assert (coal.event("PENDING"), coal.event("COALESCED"), coal.event("REPLIED")) == (1, len(readers) - 1, 1)
    assert coal.replicated() == len(readers) - 1
    # the entry is free again: the next GET is forwarded and its reply goes to its reader only
    assert gets_to_storage(coal.get(C, 900, frames=1)) == 1
    assert_each_reader_served_once(coal.reply(C, 900, seed=2, frames=1), {C: 900}, seed=2)


def _break_group(coal: CoalesceNet, group: int) -> None:
    """Replace `group` by one that serves nobody (a copy on port 2 with a rid no waiter has)."""
    coal.target.mcast_group_set(group, [Replica(2, 100)])


def test_a_batch_uses_the_group_sized_to_it(coal: CoalesceNet) -> None:
    """Groups sized to a batch: readers behind one port use that port's group for their batch size, readers on
    several ports the all-ports group of their batch size, never the full all-ports group. Shown by breaking
    every group the batch must NOT use: each reader is still served exactly once."""
    options = CoalescingOptions(mcast_group=GROUP)
    coal.configure()
    base = options.port_group_base
    # 1 + 3 readers behind port 1: only group (3 waiters, port 1) is needed
    for group in group_layouts(options, PORTS):
        if group != base + sized_group(3, A.port):
            _break_group(coal, group)
    one_port = {A: 1, A2: 2, B: 3, Reader("A3", A.ip, A.mac, A.port, 40099): 4}
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    for r, req in list(one_port.items())[1:]:
        assert coal.get(r, req, parks=True) == []
    assert_each_reader_served_once(coal.reply(A, 1, frames=len(one_port)), one_port)
    # readers on ports 1, 3, 4: only group (2 waiters, all ports) is needed
    coal.configure()
    for group in group_layouts(options, PORTS):
        if group != base + sized_group(2, ALL_PORTS):
            _break_group(coal, group)
    assert gets_to_storage(coal.get(A, 11, frames=1)) == 1
    assert coal.get(C, 12, parks=True) == [] and coal.get(D, 13, parks=True) == []
    assert_each_reader_served_once(coal.reply(A, 11, frames=3), {A: 11, C: 12, D: 13})


def test_full_batches_carry_on_through_the_full_sized_groups(coal: CoalesceNet) -> None:
    """2 full batches + 1 behind port 1: groups (8, port 1) twice, then (1, port 1); nothing else."""
    options = CoalescingOptions(mcast_group=GROUP)
    coal.configure()
    base = options.port_group_base
    for group in group_layouts(options, PORTS):
        if group not in (base + sized_group(BATCH, A.port), base + sized_group(1, A.port)):
            _break_group(coal, group)
    readers = [Reader(f"A{i}", A.ip, A.mac, A.port, 42000 + i) for i in range(2 * BATCH + 2)]
    req_ids = {r: 600 + i for i, r in enumerate(readers)}
    assert gets_to_storage(coal.get(readers[0], req_ids[readers[0]], frames=1)) == 1
    for r in readers[1:]:
        assert coal.get(r, req_ids[r], parks=True) == []
    assert_each_reader_served_once(coal.reply(readers[0], req_ids[readers[0]], frames=len(req_ids)), req_ids)
    assert coal.event("CARRIED") == 2


def test_without_port_groups_every_batch_uses_the_all_ports_group(coal: CoalesceNet) -> None:
    coal.configure(port_groups=False)
    readers = [A, A2, B, C, D] + [Reader(f"A{i}", A.ip, A.mac, A.port, 42000 + i) for i in range(BATCH)]
    req_ids = {r: 800 + i for i, r in enumerate(readers)}
    assert gets_to_storage(coal.get(readers[0], req_ids[readers[0]], frames=1)) == 1
    for r in readers[1:]:
        assert coal.get(r, req_ids[r], parks=True) == []
    assert_each_reader_served_once(coal.reply(readers[0], req_ids[readers[0]], frames=len(req_ids)), req_ids)


def test_coalescing_is_off_until_configured(coal: CoalesceNet) -> None:
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert gets_to_storage(coal.get(C, 2, frames=1)) == 1
    assert_each_reader_served_once(coal.reply(A, 1, frames=1), {A: 1})
    assert coal.event("PENDING") == 0


def test_lone_reader_gets_the_reply_unchanged(coal: CoalesceNet) -> None:
    coal.configure()
    assert gets_to_storage(coal.get(C, 5, frames=1)) == 1
    out = coal.reply(C, 5, frames=1)
    assert_each_reader_served_once(out, {C: 5})
    assert Ether(out[0][1])[UDP].chksum != 0, "the unreplicated reply keeps its UDP checksum"
    assert coal.replicated() == 0


def test_expired_entry_lets_the_next_get_through(coal: CoalesceNet) -> None:
    timeout_s = entry_lifetime_s(coal.target)
    coal.configure(timeout_us=int(timeout_s * 1e6))
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    let_entries_expire(coal.target, timeout_s)  # the reply to A is lost
    assert gets_to_storage(coal.get(C, 2, frames=1)) == 1, "a reader stayed blocked behind a lost reply"
    assert coal.event("EXPIRED") == 1
    # A's late reply reaches A only; C's entry (opened by C's GET) replicates nothing for it
    assert_each_reader_served_once(coal.reply(A, 1, frames=1), {A: 1})
    assert_each_reader_served_once(coal.reply(C, 2, frames=1), {C: 2})
    assert coal.replicated() == 0


def many_readers(n: int) -> list[Reader]:
    """`n` distinct readers spread over ports 1, 3 and 4 (several per address: their own UDP ports)."""
    return [Reader(f"R{i}", r.ip, r.mac, r.port, 41000 + i) for i, r in zip(range(n), [A, C, D] * n, strict=False)]


@pytest.mark.parametrize("n", [BATCH + 1, 20], ids=lambda n: f"{n} readers")
def test_more_readers_than_one_batch_share_one_get(coal: CoalesceNet, n: int) -> None:
    """Past one batch (8 waiters) the reply is recirculated to serve the next batch: still one GET, every
    reader exactly one reply on its port, with its own addresses and request id."""
    coal.configure()
    readers = many_readers(n)
    req_ids = {r: 300 + 7 * i for i, r in enumerate(readers)}
    assert gets_to_storage(coal.get(readers[0], req_ids[readers[0]], frames=1)) == 1
    for r in readers[1:]:
        assert coal.get(r, req_ids[r], parks=True) == [], f"{r.name}'s GET left the switch"
    out = coal.reply(readers[0], req_ids[readers[0]], frames=len(req_ids))
    assert_each_reader_served_once(out, req_ids)
    batches = -(-(n - 1) // BATCH)
    assert (coal.event("PENDING"), coal.event("COALESCED"), coal.event("REPLIED")) == (1, n - 1, 1)
    assert (coal.event("CARRIED"), coal.event("STALE"), coal.event("OVERFLOW")) == (batches - 1, 0, 0)
    assert coal.replicated() == n - 1
    # the entry is free again, and no carried state lingers: the next reply goes to its reader only
    assert gets_to_storage(coal.get(C, 900, frames=1)) == 1
    assert_each_reader_served_once(coal.reply(C, 900, seed=2, frames=1), {C: 900}, seed=2)


def test_a_late_reply_still_serves_the_waiters_of_an_entry_nobody_reopened(coal: CoalesceNet) -> None:
    """Expiry lets new GETs reopen the cell; a reply that comes late to an entry still holding its GET serves
    that entry's waiters (they asked exactly this), counted EXPIRED."""
    timeout_s = entry_lifetime_s(coal.target)
    coal.configure(timeout_us=int(timeout_s * 1e6))
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == [] and coal.get(D, 3, parks=True) == []
    let_entries_expire(coal.target, timeout_s)
    assert_each_reader_served_once(coal.reply(A, 1, frames=3), {A: 1, C: 2, D: 3})
    assert (coal.event("EXPIRED"), coal.event("REPLIED")) == (1, 0)
    assert coal.replicated() == 2


def test_full_entry_forwards_further_gets(coal: CoalesceNet) -> None:
    coal.configure()
    readers = many_readers(WAITERS + 2)
    req_ids = {r: 200 + i for i, r in enumerate(readers)}
    origin, waiters, late = readers[0], readers[1: WAITERS + 1], readers[WAITERS + 1]
    assert gets_to_storage(coal.get(origin, req_ids[origin], frames=1)) == 1
    for r in waiters:
        assert coal.get(r, req_ids[r], parks=True) == []
    assert gets_to_storage(coal.get(late, req_ids[late], frames=1)) == 1, "a GET beyond the waiter slots was not forwarded"
    assert coal.event("OVERFLOW") == 1
    out = coal.reply(origin, req_ids[origin], frames=1 + len(waiters))
    assert_each_reader_served_once(out, {r: req_ids[r] for r in [origin, *waiters]})
    assert coal.replicated() == WAITERS
    assert coal.event("CARRIED") == WAITERS // BATCH - 1
    assert_each_reader_served_once(coal.reply(late, req_ids[late], frames=1), {late: req_ids[late]})


def test_hash_collision_forwards(coal: CoalesceNet) -> None:
    coal.configure()
    other = next(k for k in (chunk_key(KEY.tenant, KEY.prefix_hash + n, KEY.chunk_idx) for n in range(1, 1 << 16))
                 if coalesce_index(k) == coalesce_index(KEY))
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert gets_to_storage(coal.get(C, 2, key=other, frames=1)) == 1, "a GET of another key in the same cell was held"
    assert coal.event("COLLISION") == 1
    assert_each_reader_served_once(coal.reply(A, 1, frames=1), {A: 1})
    assert_each_reader_served_once(coal.reply(C, 2, key=other, frames=1), {C: 2})


def test_different_version_or_storage_node_is_not_joined(coal: CoalesceNet) -> None:
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert gets_to_storage(coal.get(C, 2, version=5, frames=1)) == 1
    assert coal.event("COLLISION") == 1


@pytest.mark.parametrize("write", ["put", "put_ack", "invalidate"])
def test_write_releases_the_pending_entry(coal: CoalesceNet, write: str) -> None:
    """A waiter never gets a reply that may predate a write: the entry is freed, the waiter retries. In a fabric
    the write may have been acknowledged at another switch: its INVALIDATE releases the entry too (a reader
    told of the write must not join a GET sent before it; fails without that)."""
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    if write == "put":
        assert [p for p, _ in coal.put(D, frames=1)] == [STORAGE_PORT]
    elif write == "invalidate":
        assert coal.net.invalidate(KEY, version=4, hops=0, port=STORAGE_PORT) == []
    else:
        assert [p for p, _ in coal.reply(D, 77, opcode=Opcode.PUT_ACK, status=Status.OK, version=4, frames=1)] == [D.port]
    assert coal.event("RELEASED", until=1) == 1
    assert_each_reader_served_once(coal.reply(A, 1, frames=1), {A: 1})  # A's own reply, as without coalescing
    assert coal.replicated() == 0
    assert gets_to_storage(coal.get(C, 3, frames=1)) == 1, "the retry of the released waiter was held"
    assert_each_reader_served_once(coal.reply(C, 3, version=4, frames=1), {C: 3}, version=4)


def test_reply_from_a_host_port_is_not_replicated(coal: CoalesceNet) -> None:
    """A host cannot answer other readers: only a reply arriving where the GET left (port 2) replicates."""
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    forged = coal.reply(A, 1, seed=66, port=D.port, frames=1)
    assert [p for p, _ in forged] == [A.port]  # forwarded to its addressee as without coalescing
    assert coal.event("FOREIGN_REPLY") == 1
    assert coal.replicated() == 0
    assert_each_reader_served_once(coal.reply(A, 1, frames=2), {A: 1, C: 2})


def test_a_waiters_retransmission_is_forwarded(coal: CoalesceNet) -> None:
    """A parked waiter that resends its GET (same address, port and request id) has waited a whole retry timeout:
    the reply it waits for is not coming through this entry (lost, or one that cannot replicate), so its retry
    goes on to the storage node instead of parking behind itself again until the entry expires."""
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    assert gets_to_storage(coal.get(C, 2, frames=1)) == 1, "a waiter's retransmission was parked behind itself"
    assert coal.event("RETRY") == 1
    assert (coal.event("PENDING"), coal.event("COALESCED")) == (1, 1)
    # another reader still joins, and the reply reaches every waiter once
    assert coal.get(D, 3, parks=True) == []
    assert_each_reader_served_once(coal.reply(A, 1, frames=3), {A: 1, C: 2, D: 3})
    assert coal.replicated() == 2


def test_a_waiter_sharing_a_parked_cell_with_another_is_not_a_retry(coal: CoalesceNet) -> None:
    """Two waiters of one entry whose requests hash to the same coalesce_parked cell: the second is parked, not
    taken for the first one's retransmission."""
    coal.configure()
    other = next(r for r in range(1, 1 << 20) if parked_cell(D, r) == parked_cell(C, 2))
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    assert coal.get(D, other, parks=True) == [], "a waiter sharing a parked cell was forwarded as a retry"
    assert coal.event("RETRY") == 0
    assert_each_reader_served_once(coal.reply(A, 1, frames=3), {A: 1, C: 2, D: other})


def test_a_retransmission_of_a_waiter_in_a_later_batch_is_forwarded(coal: CoalesceNet) -> None:
    """The retry check covers every waiter of the entry, not only the first batch; a new request of a parked
    reader (another req_id) is a new waiter."""
    coal.configure()
    readers = many_readers(2 * BATCH + 3)
    req_ids = {r: 500 + i for i, r in enumerate(readers)}
    assert gets_to_storage(coal.get(readers[0], req_ids[readers[0]], frames=1)) == 1
    for r in readers[1:]:
        assert coal.get(r, req_ids[r], parks=True) == []
    last = readers[-1]
    assert gets_to_storage(coal.get(last, req_ids[last], frames=1)) == 1, "a late-batch waiter's retry was parked again"
    assert coal.event("RETRY") == 1
    again = Reader("again", last.ip, last.mac, last.port, last.udp_port)
    assert coal.get(again, 999, parks=True) == [], "the same reader's next request was taken for a retry"
    out = coal.reply(readers[0], req_ids[readers[0]], frames=len(readers) + 1)
    # every waiter once; the retried waiter's copy still comes (a stray duplicate of the forwarded retry's)
    served = [(Ether(d)[UDP].dport, Ether(d)[KVP].req_id) for _, d in out]
    assert sorted(served) == sorted([(r.udp_port, req_ids[r]) for r in readers] + [(last.udp_port, 999)])


def test_bypass_get_is_never_held(coal: CoalesceNet) -> None:
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert gets_to_storage(coal.get(C, 2, flags=0x02, frames=1)) == 1
    assert coal.event("COALESCED") == 0


# ---- process level: real readers and a real storage node over veth ----------------------------------------

READERS = 8
VETH_TIMEOUT_US = 1_500_000
"""Below the bed's client timeout (2 s), so no retry joins the entry it already waits in."""


@pytest.fixture(scope="module")
def veth_bed(tmp_path_factory):
    """kvtesting.vethnet's bed (client and storage namespaces, softswitch process) with coalescing configured."""
    import os

    if os.geteuid() != 0:
        pytest.skip("network namespaces and veth pairs need root")
    from kvtesting.vethnet import VethNet, VethNetOptions
    from p4rt.p4info import P4Info

    with VethNet(VethNetOptions(tag="co"), workdir=tmp_path_factory.mktemp("coalesce-veth")) as bed:
        from controller.coalescing import coalescing_updates

        p4info = P4Info.load(bed.workdir / "build" / "kvswitch.p4info.txtpb")
        ports = [bed.options.client.port, bed.options.storage.port]  # VethNet made the storage port STORAGE
        for update in coalescing_updates(p4info, CoalescingOptions(timeout_us=VETH_TIMEOUT_US), ports):
            bed.switch.sh.client.write_update(update)
        yield bed


def _coalesced(bed) -> int:
    ce = bed.switch.sh.CounterEntry(EVENTS)
    ce.index = 2  # coalesce_event_t.COALESCED (checked against the program by test_kvswitch_naming)
    return sum(e.data.packet_count for e in ce.read())


@pytest.mark.slow
@pytest.mark.root
def test_concurrent_readers_cost_the_storage_node_one_get(veth_bed) -> None:
    """N kvpool clients read one cold chunk at once: the storage node answers one GET, every reader verifies.

    The storage node is paused (SIGSTOP) until all N GETs reached the switch, so the test does not depend on
    the readers beating the reply; then it answers the one GET it got."""
    import signal
    import threading

    bed = veth_bed
    ph = 0xC0A1E5CE00000042
    bed.request("put", ph=ph, data=bytes(range(100)).hex(), version=1)
    storage = next(p for p in bed.processes if p.name == "storage node")
    before = _coalesced(bed)
    result: dict = {}
    storage.popen.send_signal(signal.SIGSTOP)
    try:
        readers = threading.Thread(target=lambda: result.update(
            bed.request("readers", ph=ph, chunks=1, reads=1, readers=READERS)))
        readers.start()
        deadline = time.monotonic() + 10
        while _coalesced(bed) - before < READERS - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        storage.popen.send_signal(signal.SIGCONT)
    readers.join(timeout=60)
    assert _coalesced(bed) - before == READERS - 1, bed.logs()
    assert result.get("errors") == [] and result.get("block_reads") == READERS, result
    assert result["retries"] == 0, result
    assert bed.request("stat", ph=ph, chunks=1)["counts"] == [1]

    # the same with F_BYPASS (no coalescing): one GET per reader
    bed.request("readers", ph=ph, chunks=1, reads=1, readers=READERS, bypass=True)
    assert bed.request("stat", ph=ph, chunks=1)["counts"] == [1 + READERS]
