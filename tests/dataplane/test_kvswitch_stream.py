"""The stream join (p4src/stream.p4): a reader whose F_STREAM GET of a block leaves towards the storage node while
another reader's read of the block is under way gets every later reply to that reader pushed to it (F_PUSHED,
req_id 0); the storage node serves the block about once. Runs on every target of `conftest.target`.

Network (kvnet's two hosts plus readers behind ports 1, 3 and 4; port 2 is the storage node's, STORAGE in
`port_role` and in `stream_storage_port`; ports 3 and 4 are FABRIC in kvnet's roles)::

    reader A 10.0.0.1 :40001 ─┐
    reader A2 10.0.0.1 :40002 ├ port 1
    reader B 10.0.0.11 :40011 ┘
    reader C 10.0.0.3 ──────── port 3       kvswitch ── port 2 ── storage 10.0.0.2
    reader D 10.0.0.4 ──────── port 4

Only packets, table entries, clone sessions and counters are used (no registers), so the shared switch processes
run these too; their leftover streams are ended by the fresh stream epoch each test sets.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.coalescing import CoalescingOptions, group_layouts
from controller.streaming import (
    CONFIG_ACTION,
    CONFIG_TABLE,
    EVENTS,
    STORAGE_PORT_ACTION,
    STORAGE_PORT_KEY,
    STORAGE_PORT_TABLE,
    SUBSCRIBERS,
    StreamingOptions,
    session_of,
)
from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    FABRIC_PORTS,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    _ip,
    _mac,
    value_chunk,
)
from softswitch.target import Exact, Lpm, Replica, TableEntry, Target

PORTS = (1, 2, 3, 4)
"""Every port of the test switch (the process targets have veths on exactly these)."""
CHUNKS = 4
"""Chunks of the test block."""
LONG_IDLE_US = 30_000_000
"""Long enough that no stream idles out during a test, however slow the target."""
SIMULATED_IDLE_S = 0.3
"""A stream's idle lifetime on the in-process switch, whose clock the test moves (`advance_clock`): no real time."""
PROCESS_IDLE_S = 5.0
"""... on a switch process (real time): what must happen before it ends takes a few quiescence waits (well under
a second); five seconds is a margin no busy machine eats, so only the wait for the end is real time."""
SALT = 0x53E7A11D
"""STREAM_SALT: the stream cell is crc32(salt ‖ tenant ‖ prefix_hash) mod ENTRIES."""
ENTRIES = 1024
MEMBER_SALT = 0x3E4B3E55
MEMBER_CELLS = 1 << 16


@dataclass(frozen=True)
class Reader:
    name: str
    ip: str
    mac: str
    port: int
    udp_port: int


@dataclass(frozen=True)
class Block:
    tenant: int
    prefix_hash: int


A = Reader("A", CLIENT_IP, CLIENT_MAC, CLIENT_PORT, 40001)
A2 = Reader("A2", CLIENT_IP, CLIENT_MAC, CLIENT_PORT, 40002)
B = Reader("B", "10.0.0.11", "00:00:00:00:00:0b", CLIENT_PORT, 40011)
C = Reader("C", "10.0.0.3", "00:00:00:00:00:03", 3, 40003)
D = Reader("D", "10.0.0.4", "00:00:00:00:00:04", 4, 40004)
BLOCK = Block(tenant=7, prefix_hash=0x5E7EA3B10C000001)


def stream_index(block: Block) -> int:
    """The block's stream cell, computed as the program does (v1model crc32 over salt ‖ tenant ‖ prefix)."""
    data = SALT.to_bytes(4, "big") + block.tenant.to_bytes(2, "big") + block.prefix_hash.to_bytes(8, "big")
    return zlib.crc32(data) % ENTRIES


def member_cell(reader: Reader, block: Block = BLOCK) -> int:
    """The reader's membership cell (crc32 over salt ‖ IPv4 ‖ UDP port ‖ tenant ‖ prefix)."""
    data = MEMBER_SALT.to_bytes(4, "big") + bytes(int(b) for b in reader.ip.split(".")) \
        + reader.udp_port.to_bytes(2, "big") + block.tenant.to_bytes(2, "big") + block.prefix_hash.to_bytes(8, "big")
    return zlib.crc32(data) % MEMBER_CELLS


def idle_lifetime_s(target: Target) -> float:
    return SIMULATED_IDLE_S if hasattr(target, "advance_clock") else PROCESS_IDLE_S


def let_streams_idle_out(target: Target, idle_s: float) -> None:
    """Past every stream's idle lifetime: the in-process switch's clock moves; a process's takes real time."""
    if hasattr(target, "advance_clock"):
        target.advance_clock(int(idle_s * 2e6))
    else:
        time.sleep(idle_s * 1.5)


@dataclass
class StreamNet:
    """KvNet plus readers on several ports, the stream join configured as controller.streaming does."""

    net: KvNet
    target: Target
    epoch: int

    def configure(self, idle_us: int = LONG_IDLE_US, storage_ports: Sequence[int] = (STORAGE_PORT,)) -> None:
        """Streams on: a clone session per port, the storage port, `set_stream_config`."""
        for port in PORTS:
            self.target.clone_session_set(session_of(port), [Replica(port)])
        for port in storage_ports:
            self.target.table_insert(TableEntry(STORAGE_PORT_TABLE, {STORAGE_PORT_KEY: Exact(port)},
                                                STORAGE_PORT_ACTION, {}))
        options = StreamingOptions(idle_us=idle_us, epoch=self.epoch)
        self.target.table_set_default(CONFIG_TABLE, CONFIG_ACTION, options.config_params())

    def get(self, reader: Reader, chunk: int, req_id: int, block: Block = BLOCK, *, flags: int = Flag.STREAM,
            version: int = 0, chunk_count: int = CHUNKS, dst: str = STORAGE_IP) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.GET, tenant=block.tenant, prefix_hash=block.prefix_hash, chunk_idx=chunk,
                  chunk_count=chunk_count, req_id=req_id, flags=flags, version=version)
        frame = (Ether(dst=SWITCH_MAC, src=reader.mac) / IP(src=reader.ip, dst=dst)
                 / UDP(sport=reader.udp_port, dport=KVP_UDP_PORT) / kvp)
        return self.target.process(reader.port, bytes(frame))

    def reply_frame(self, reader: Reader, chunk: int, req_id: int, block: Block = BLOCK, *, seed: int | None = None,
                    version: int = 3, status: int = Status.HIT_SERVER, flags: int = 0,
                    src: str = STORAGE_IP, chunk_count: int = CHUNKS) -> Ether:
        """The storage node's HIT for chunk `chunk` (value seeded by the chunk unless `seed`) to `reader`."""
        kvp = KVP(opcode=Opcode.GET_REPLY, status=status, tenant=block.tenant, prefix_hash=block.prefix_hash,
                  chunk_idx=chunk, chunk_count=chunk_count, req_id=req_id, version=version)
        if status in (Status.HIT_SERVER, Status.HIT_SWITCH):
            kvp.flags = Flag.VALUE | flags
            kvp = kvp / KVPValue.from_bytes(value_chunk(chunk + 1 if seed is None else seed))
        elif flags:
            kvp.flags = flags
        return (Ether(dst=SWITCH_MAC, src=STORAGE_MAC) / IP(src=src, dst=reader.ip)
                / UDP(sport=KVP_UDP_PORT, dport=reader.udp_port) / kvp)

    def reply(self, reader: Reader, chunk: int, req_id: int, block: Block = BLOCK, *, port: int = STORAGE_PORT,
              **fields) -> list[tuple[int, bytes]]:
        return self.target.process(port, bytes(self.reply_frame(reader, chunk, req_id, block, **fields)))

    def put(self, reader: Reader, chunk: int = 0, block: Block = BLOCK) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.PUT, tenant=block.tenant, prefix_hash=block.prefix_hash, chunk_idx=chunk,
                  chunk_count=CHUNKS, version=4) / KVPValue.from_bytes(value_chunk(9))
        frame = (Ether(dst=SWITCH_MAC, src=reader.mac) / IP(src=reader.ip, dst=STORAGE_IP)
                 / UDP(sport=reader.udp_port, dport=KVP_UDP_PORT) / kvp)
        return self.target.process(reader.port, bytes(frame))

    def put_ack(self, reader: Reader, chunk: int = 0, block: Block = BLOCK) -> list[tuple[int, bytes]]:
        kvp = KVP(opcode=Opcode.PUT_ACK, status=Status.OK, tenant=block.tenant, prefix_hash=block.prefix_hash,
                  chunk_idx=chunk, chunk_count=CHUNKS, version=4, req_id=77)
        frame = (Ether(dst=SWITCH_MAC, src=STORAGE_MAC) / IP(src=STORAGE_IP, dst=reader.ip)
                 / UDP(sport=KVP_UDP_PORT, dport=reader.udp_port) / kvp)
        return self.target.process(STORAGE_PORT, bytes(frame))

    def event(self, name: str) -> int:
        return self.target.counter_read(EVENTS, self.net.enums["stream_event_t"][name])[0]


@pytest.fixture
def sn(net: KvNet, target: Target) -> StreamNet:
    """Routes to every reader, stream counters at zero (a shared switch keeps them), streams not yet on."""
    for reader in (B, C, D):
        target.table_insert(TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(_ip(reader.ip), 32)},
                                       "MyIngress.ipv4_forward", {"dst_mac": _mac(reader.mac), "port": reader.port}))
    for index in net.enums["stream_event_t"].values():
        target.counter_write(EVENTS, index, 0, 0)
    return StreamNet(net, target, epoch=1 + getattr(target, "epoch_offset", 0))


# ---- checks -----------------------------------------------------------------------------------------------

def to_storage(out: Sequence[tuple[int, bytes]]) -> list[Ether]:
    return [Ether(d) for p, d in out if p == STORAGE_PORT]


def checksums_ok(frame: Ether) -> bool:
    """IPv4 header checksum right; UDP checksum right or 0 (copies rewritten past the IPv4 header carry 0)."""
    rebuilt = Ether(bytes(frame))
    del rebuilt[IP].chksum
    if frame[UDP].chksum != 0:
        del rebuilt[UDP].chksum
    rebuilt = Ether(bytes(rebuilt))
    return (rebuilt[IP].chksum, rebuilt[UDP].chksum) == (frame[IP].chksum, frame[UDP].chksum)


def split(out: Sequence[tuple[int, bytes]], origin: Reader) -> tuple[list[tuple[int, Ether]], list[tuple[int, Ether]]]:
    """(the replies to `origin`, every other frame), each with its port."""
    mine, rest = [], []
    for port, data in out:
        frame = Ether(data)
        is_origin = IP in frame and (frame[IP].dst, frame[UDP].dport) == (origin.ip, origin.udp_port)
        (mine if is_origin else rest).append((port, frame))
    return mine, rest


def assert_pushed(out: Sequence[tuple[int, bytes]], origin: Reader, req_id: int, subscribers: Sequence[Reader],
                  chunk: int) -> None:
    """The origin's reply reached the origin unchanged, and each subscriber exactly one pushed copy of it: on its
    port, to its MAC / IPv4 / UDP port, req_id 0, F_PUSHED, every other byte of the header and value the same."""
    mine, pushed = split(out, origin)
    assert len(mine) == 1, [f.summary() for _, f in mine]
    port, original = mine[0]
    assert port == origin.port
    assert original[KVP].req_id == req_id and not original[KVP].flags & Flag.PUSHED
    assert original[KVP].chunk_idx == chunk
    seen = []
    for port, frame in pushed:
        reader = next((r for r in subscribers if (r.ip, r.udp_port) == (frame[IP].dst, frame[UDP].dport)), None)
        assert reader is not None, f"a copy for no subscriber: {frame.summary()}"
        seen.append(reader)
        assert port == reader.port, f"{reader.name}'s copy left through port {port}"
        assert frame[Ether].dst == reader.mac
        assert frame[KVP].req_id == 0
        assert int(frame[KVP].flags) == int(original[KVP].flags) | Flag.PUSHED
        header = ("opcode", "status", "tenant", "prefix_hash", "chunk_idx", "chunk_count", "value_len",
                  "chunk_shift", "version", "value_csum", "aux")
        assert [frame[KVP].getfieldval(f) for f in header] == [original[KVP].getfieldval(f) for f in header]
        assert frame[KVPValue].value_bytes == original[KVPValue].value_bytes
        assert frame[IP].src == STORAGE_IP and frame[UDP].sport == KVP_UDP_PORT
        assert frame[IP].len == len(frame[IP]) and frame[UDP].len == len(frame[UDP])
        assert checksums_ok(frame), frame.show2(dump=True)
    assert sorted(r.name for r in seen) == sorted(r.name for r in subscribers), [r.name for r in seen]


def assert_not_pushed(out: Sequence[tuple[int, bytes]], addressee: Reader) -> None:
    """The reply went to its addressee only (forwarded as without streams)."""
    assert len(out) == 1, [Ether(d).summary() for _, d in out]
    port, data = out[0]
    frame = Ether(data)
    assert (port, frame[IP].dst, frame[UDP].dport) == (addressee.port, addressee.ip, addressee.udp_port)
    assert not frame[KVP].flags & Flag.PUSHED


def many_readers(n: int, ports: Sequence[Reader] = (A, C, D)) -> list[Reader]:
    """`n` distinct readers spread over the ports of `ports` (several per address: their own UDP ports)."""
    return [Reader(f"R{i}", r.ip, r.mac, r.port, 41000 + i) for i, r in zip(range(n), list(ports) * n, strict=False)]


# ---- tests ------------------------------------------------------------------------------------------------

def test_a_reader_joining_mid_block_gets_every_later_reply_pushed(sn: StreamNet) -> None:
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 10))) == 1
    assert len(to_storage(sn.get(A, 1, 11))) == 1
    assert_not_pushed(sn.reply(A, 0, 10), A)  # nobody subscribed yet
    assert sn.event("OPENED") == 1
    # C joins while A reads: its own GET (chunk 0, which it missed) is forwarded all the same
    assert len(to_storage(sn.get(C, 0, 20))) == 1
    assert sn.event("JOINED") == 1
    assert_pushed(sn.reply(A, 1, 11), A, 11, [C], chunk=1)
    assert_not_pushed(sn.reply(C, 0, 20), C)  # the subscriber's own reply: to it only
    assert len(to_storage(sn.get(A, 2, 12))) == 1
    assert_pushed(sn.reply(A, 2, 12), A, 12, [C], chunk=2)
    assert len(to_storage(sn.get(A, 3, 13))) == 1
    assert_pushed(sn.reply(A, 3, 13), A, 13, [C], chunk=3)  # the last chunk is pushed too; C joined at chunk 1:
    assert (sn.event("PUSHED"), sn.event("PATCH_PASS"), sn.event("ENDED_LAST")) == (3, 1, 0)  # the patch pass
    assert_not_pushed(sn.reply(A, 3, 13), A)  # a duplicate: at or above the join point max, not pushed in it


def test_streams_are_off_until_configured(sn: StreamNet) -> None:
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(C, 0, 2))) == 1
    assert_not_pushed(sn.reply(A, 0, 1), A)
    assert sn.event("OPENED") == sn.event("JOINED") == 0


def test_only_a_get_towards_a_storage_port_opens_a_stream(sn: StreamNet) -> None:
    """Without port 2 in stream_storage_port (a switch not next to the node), GETs are only forwarded."""
    sn.configure(storage_ports=())
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(C, 0, 2))) == 1
    assert_not_pushed(sn.reply(A, 0, 1), A)
    assert sn.event("OPENED") == 0


SUBSCRIBER_SETS = {
    "3 on one port": many_readers(3, [C]),
    "3 on three ports": many_readers(3),
    "33 on one port": many_readers(33, [D]),
    "33 on three ports": many_readers(33),
}


@pytest.mark.parametrize("subscribers", SUBSCRIBER_SETS.values(), ids=SUBSCRIBER_SETS.keys())
def test_every_subscriber_gets_each_reply_once(sn: StreamNet, subscribers: list[Reader]) -> None:
    """33 subscribers make a chain of 34 egress passes, past the softswitch's old bound of 32 passes."""
    sn.configure()
    origin = B
    assert len(to_storage(sn.get(origin, 0, 1))) == 1
    for i, r in enumerate(subscribers):
        assert len(to_storage(sn.get(r, 0, 100 + i))) == 1
    assert sn.event("JOINED") == len(subscribers)
    assert_pushed(sn.reply(origin, 1, 1), origin, 1, subscribers, chunk=1)
    assert_pushed(sn.reply(origin, 2, 2), origin, 2, subscribers, chunk=2)
    assert sn.event("PUSHED") == 2 * len(subscribers)


def test_a_full_stream_forwards_further_readers(sn: StreamNet) -> None:
    sn.configure()
    readers = many_readers(SUBSCRIBERS + 1)
    members, late = readers[:SUBSCRIBERS], readers[SUBSCRIBERS]
    assert len(to_storage(sn.get(B, 0, 1))) == 1
    for i, r in enumerate(members):
        sn.get(r, 0, 100 + i)
    assert len(to_storage(sn.get(late, 0, 999))) == 1, "a GET beyond the subscriber slots was not forwarded"
    assert (sn.event("JOINED"), sn.event("FULL")) == (SUBSCRIBERS, 1)
    assert_pushed(sn.reply(B, 1, 1), B, 1, members, chunk=1)


def test_a_subscribers_own_gets_do_not_subscribe_it_again(sn: StreamNet) -> None:
    """A subscriber patches the chunks it missed with GETs of its own (F_STREAM still set): they are forwarded
    and change nothing (one copy per reply, the origin unchanged); the origin's GETs keep the stream."""
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    for chunk in range(3):
        assert len(to_storage(sn.get(C, chunk, 20 + chunk))) == 1
    assert len(to_storage(sn.get(A, 1, 2))) == 1
    assert sn.event("JOINED") == 1
    assert_pushed(sn.reply(A, 0, 1), A, 1, [C], chunk=0)
    assert_pushed(sn.reply(A, 1, 2), A, 2, [C], chunk=1)
    assert_not_pushed(sn.reply(C, 0, 20), C)  # below the front, pushed before: C's patch, to it only


def test_a_block_in_a_taken_cell_is_forwarded(sn: StreamNet) -> None:
    sn.configure()
    other = next(b for b in (Block(BLOCK.tenant, BLOCK.prefix_hash + n) for n in range(1, 1 << 16))
                 if stream_index(b) == stream_index(BLOCK))
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(C, 0, 2, block=other))) == 1
    assert len(to_storage(sn.get(D, 0, 3, block=other))) == 1
    assert (sn.event("OPENED"), sn.event("COLLISION")) == (1, 2)
    assert_not_pushed(sn.reply(C, 1, 2, block=other), C)
    assert_not_pushed(sn.reply(A, 1, 1), A)  # nobody joined A's


def test_another_version_or_node_is_not_joined(sn: StreamNet) -> None:
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(C, 0, 2, version=5))) == 1
    assert sn.event("COLLISION") == 1
    assert_not_pushed(sn.reply(A, 1, 1), A)


def test_a_reader_whose_membership_cell_is_taken_is_forwarded(sn: StreamNet) -> None:
    """Two readers of one stream whose membership cells collide: the second is forwarded, never subscribed (so
    no reader is ever subscribed twice)."""
    sn.configure()
    rival = next(r for r in (Reader("rival", ip, mac, port, u) for ip, mac, port in
                             ((A.ip, A.mac, A.port), (B.ip, B.mac, B.port), (D.ip, D.mac, D.port))
                             for u in range(1024, 1 << 16))
                 if member_cell(r) == member_cell(C))
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 2)
    assert len(to_storage(sn.get(rival, 0, 3))) == 1
    assert (sn.event("JOINED"), sn.event("MEMBER_COLLISION")) == (1, 1)
    assert_pushed(sn.reply(A, 1, 1), A, 1, [C], chunk=1)


@pytest.mark.parametrize("write", ["put", "put_ack", "invalidate", "relayed invalidate"])
def test_a_write_ends_the_stream(sn: StreamNet, write: str) -> None:
    """Nothing is pushed after a write of any chunk of the block (a later reply may be the new version, the
    subscribers must read it themselves). A fabric INVALIDATE with no relays left ends it too: egress sees it."""
    sn.configure()
    sn.net.fabric_session()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 2)
    if write == "put":
        assert [p for p, _ in sn.put(D, chunk=3)] == [STORAGE_PORT]
    elif write == "put_ack":
        # to D, and the fabric invalidations it starts
        assert sorted(p for p, _ in sn.put_ack(D, chunk=3)) == sorted([D.port, *FABRIC_PORTS])
    else:
        hops = 1 if write == "relayed invalidate" else 0
        out = sn.net.invalidate(_chunk_key(3), version=4, hops=hops, port=FABRIC_PORTS[0])
        assert [p for p, _ in out] == ([FABRIC_PORTS[1]] if hops else []), "an INVALIDATE relayed past its hops"
    assert sn.event("ENDED_BY_WRITE") == 1
    assert_not_pushed(sn.reply(A, 1, 1, version=4), A)
    assert sn.event("PUSHED") == 0
    # the next reader opens a new stream, with no subscriber of the old one in it
    assert len(to_storage(sn.get(D, 0, 3))) == 1
    assert sn.event("OPENED") == 2
    assert_not_pushed(sn.reply(D, 1, 3, version=4), D)


def _chunk_key(chunk: int):
    from kvtesting.kvnet import chunk_key

    return chunk_key(tenant=BLOCK.tenant, prefix_hash=BLOCK.prefix_hash, chunk_idx=chunk)


def test_an_idle_stream_ends(sn: StreamNet) -> None:
    idle_s = idle_lifetime_s(sn.target)
    sn.configure(idle_us=int(idle_s * 1e6))
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 2)
    let_streams_idle_out(sn.target, idle_s)
    assert_not_pushed(sn.reply(A, 1, 1), A)
    assert sn.event("EXPIRED") == 1
    # a new reader then opens the block's stream afresh: it is the origin, C is nobody's subscriber
    assert len(to_storage(sn.get(D, 0, 3))) == 1
    assert sn.event("OPENED") == 2
    assert_not_pushed(sn.reply(D, 1, 3), D)


def test_bypass_gets_neither_open_nor_join(sn: StreamNet) -> None:
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1, flags=Flag.STREAM | Flag.BYPASS))) == 1
    assert sn.event("OPENED") == 0
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(C, 0, 2, flags=Flag.STREAM | Flag.BYPASS))) == 1
    assert len(to_storage(sn.get(D, 0, 3, flags=0))) == 1  # no F_STREAM: a reader that takes no pushes
    assert (sn.event("OPENED"), sn.event("JOINED")) == (1, 0)
    assert_not_pushed(sn.reply(A, 1, 1), A)


def test_only_hit_replies_from_the_node_to_the_origin_are_pushed(sn: StreamNet) -> None:
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 2)
    assert_not_pushed(sn.reply(A2, 1, 1), A2)  # another reader at the origin's address
    assert_not_pushed(sn.reply(A, 1, 1, status=Status.MISS), A)
    assert_not_pushed(sn.reply(A, 1, 1, status=Status.BUSY), A)
    # from a port other than the node's (a host forging the node's address): forwarded, never pushed
    forged = sn.reply(A, 1, 1, port=D.port, seed=66)
    assert [p for p, _ in forged] == [A.port] and not Ether(forged[0][1])[KVP].flags & Flag.PUSHED
    assert sn.event("PUSHED") == 0
    assert_pushed(sn.reply(A, 1, 1), A, 1, [C], chunk=1)


@pytest.mark.parametrize("port", [CLIENT_PORT, STORAGE_PORT, FABRIC_PORTS[0]], ids=["host", "storage", "fabric"])
def test_f_pushed_is_cleared_unless_it_comes_from_the_fabric(sn: StreamNet, port: int) -> None:
    """Only a switch pushes: F_PUSHED from a host or a storage node is cleared in ingress, kept from another
    switch (a fabric port)."""
    frame = sn.reply_frame(D, 1, 0, flags=Flag.PUSHED)
    out = sn.target.process(port, bytes(frame))
    assert [p for p, _ in out] == [D.port]
    got = Ether(out[0][1])
    assert bool(got[KVP].flags & Flag.PUSHED) == (port == FABRIC_PORTS[0])
    assert got[KVPValue].value_bytes == value_chunk(2)
    assert checksums_ok(got)


def test_a_forged_get_only_brings_pushes_to_its_own_port(sn: StreamNet) -> None:
    """A hostile host D forging a GET in C's name (C's IPv4 and UDP port) subscribes "C" at D's port: the pushes
    leave through port 4, where the forged GET came in, never through C's port; C's own GET is then taken for a
    subscriber's patch (forwarded: C reads the block itself, as without streams). What D gains is copies of a block it could GET
    anyway, on its own link, at most one per origin reply per forged name (docs/dataplane.md, "Trust")."""
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    forged = Reader("forged C", C.ip, D.mac, D.port, C.udp_port)
    assert len(to_storage(sn.get(forged, 0, 2))) == 1
    assert len(to_storage(sn.get(C, 0, 3))) == 1
    assert sn.event("JOINED") == 1
    assert_pushed(sn.reply(A, 1, 1), A, 1, [forged], chunk=1)


INTERLEAVED_PUSHES_CAP_S = 5.0
"""How long the parked-origin case waits for the two pushes more that one of BMv2's interleaved outcomes sends (a
clone chain of two copies takes milliseconds); another of its outcomes sends none, so not the expect cap's 30 s."""


def test_an_origin_parked_by_coalescing_still_feeds_its_stream(sn: StreamNet, request) -> None:
    """With coalescing on too: a subscriber's own GET of a chunk opens a coalescing entry and the origin's GET of
    that chunk, within the round trip, is parked on it. The origin's copy of the reply (a multicast copy for a
    waiter) is the origin's reply: it is pushed to every subscriber (the one whose GET it answers gets a
    duplicate, which its client drops). D's reply of chunk 2 moved the front past chunk 1 first. Which of the
    multicast's copies egress takes first is the target's choice (BMv2's egress threads take either): A's first,
    and C's copy is C's patch (not pushed); C's first, and it is the first reply of a chunk the front skipped,
    pushed to A and D (REORDERED). On BMv2, whose egress threads may also interleave the two copies' register
    reads and writes, A's copy may then be pushed as an origin's reply as well (duplicates the clients drop), or
    be forwarded as its own reply only. Every way, each reader gets its own reply once, unchanged, only members
    get pushes, and D, which did not ask, gets the chunk."""
    options = CoalescingOptions(timeout_us=LONG_IDLE_US, epoch=sn.epoch, mcast_group=7)
    for group, layout in group_layouts(options, PORTS).items():
        sn.target.mcast_group_set(group, [Replica(p, rid) for p, rid in layout])
    sn.target.table_set_default("MyIngress.coalesce_config", "MyIngress.set_coalesce_config",
                                options.config_params())
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert len(to_storage(sn.get(D, 2, 30))) == 1  # D joins (its GET of chunk 0 would be parked on A's: no join)
    assert len(to_storage(sn.get(C, 1, 20))) == 1  # C joins, and its GET of chunk 1 opens a coalescing entry
    assert sn.get(A, 1, 2) == []  # A's GET of chunk 1 is parked on C's
    assert_pushed(sn.reply(D, 2, 30), D, 30, [A, C], chunk=2)  # beyond the front: front 3
    # every outcome sends at least both own replies and two pushes; the counters say which one it was only once
    # both copies left egress (their own replies are out), and the interleaved one sends two pushes more
    sent = expect.process(sn.target, STORAGE_PORT, bytes(sn.reply_frame(C, 1, 20)), 4)
    while sum(not Ether(d)[KVP].flags & Flag.PUSHED for _, d in sent) < 2 and (later := expect.more(sn.target, 1)):
        sent += later
    bmv2 = request.node.callspec.params["target"] == "bmv2-process"
    if bmv2 and sn.event("REORDERED") == 1 and sn.event("PATCH") == 0:
        sent += expect.more(sn.target, 6 - len(sent), cap_s=INTERLEAVED_PUSHES_CAP_S)
    out = [(p, Ether(d)) for p, d in sent]
    assert {f[KVP].chunk_idx for _, f in out} == {1}
    own = sorted((p, f[UDP].dport, f[KVP].req_id) for p, f in out if not f[KVP].flags & Flag.PUSHED)
    assert own == sorted([(A.port, A.udp_port, 2), (C.port, C.udp_port, 20)])  # each its own reply, once
    pushed = sorted((p, f[UDP].dport) for p, f in out if f[KVP].flags & Flag.PUSHED)
    assert all(f[KVP].req_id == 0 for _, f in out if f[KVP].flags & Flag.PUSHED)
    if sn.event("REORDERED") == 0:  # A's copy first: the origin's reply pushed, C's copy its own patch
        assert pushed == sorted([(C.port, C.udp_port), (D.port, D.udp_port)])
        assert sn.event("PATCH") == 1
    else:  # C's copy's egress came first, or BMv2's egress threads interleaved the two copies
        assert sn.event("REORDERED") == 1
        outcomes = [(sorted([(A.port, A.udp_port), (D.port, D.udp_port)]), 1)]  # A's copy then found it pushed
        if bmv2:  # the copies' register reads and writes interleaved: A's copy acted on part of C's copy's writes
            outcomes += [
                # A's copy pushed as well (duplicates the clients drop)
                (sorted([(A.port, A.udp_port), (C.port, C.udp_port), (D.port, D.udp_port), (D.port, D.udp_port)]), 0),
                # A's copy read the stream between C's copy's writes: forwarded as its own reply only
                (sorted([(A.port, A.udp_port), (D.port, D.udp_port)]), 0),
            ]
        assert (pushed, sn.event("PATCH")) in outcomes, (pushed, sn.event("PATCH"))
    assert (D.port, D.udp_port) in pushed, "D, which did not ask, gets the chunk every way"


def test_f_pushed_is_cleared_on_a_malformed_message_too(sn: StreamNet) -> None:
    """A host's KVP message the switch forwards as plain UDP (here a chunk size out of range) loses F_PUSHED as
    well: no reader can take a host's message for a switch's push."""
    kvp = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=BLOCK.tenant, prefix_hash=BLOCK.prefix_hash,
              chunk_count=CHUNKS, chunk_shift=3, flags=Flag.PUSHED)
    frame = (Ether(dst=SWITCH_MAC, src=A.mac) / IP(src=A.ip, dst=D.ip)
             / UDP(sport=KVP_UDP_PORT, dport=D.udp_port) / kvp)
    out = sn.target.process(A.port, bytes(frame))
    assert [p for p, _ in out] == [D.port]
    assert not Ether(out[0][1])[KVP].flags & Flag.PUSHED


# ---- the frontier: whichever member reads ahead feeds the others ------------------------------------------

def test_a_members_reply_beyond_the_front_is_pushed_to_every_other_member(sn: StreamNet) -> None:
    """A subscriber that reads ahead of the origin feeds the origin and the other subscribers (not itself); the
    front moves past each pushed chunk; a member's reply below the front is its patch (to it only), except the
    first reply of a chunk the front skipped (replies out of order: no member has it from the stream yet) and the
    origin's, which is pushed whatever its chunk (a reordered reply of the origin's)."""
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 20)
    sn.get(D, 0, 30)
    assert sn.event("JOINED") == 2
    assert_pushed(sn.reply(A, 0, 1), A, 1, [C, D], chunk=0)  # front 1
    assert_pushed(sn.reply(C, 2, 22), C, 22, [A, D], chunk=2)  # beyond the front: front 3, chunk 1 skipped
    assert_pushed(sn.reply(D, 1, 31), D, 31, [A, C], chunk=1)  # the skipped chunk's first reply: pushed
    assert sn.event("REORDERED") == 1
    assert_not_pushed(sn.reply(D, 1, 32), D)  # pushed before: D's patch
    assert_not_pushed(sn.reply(C, 2, 23), C)  # the front moved past chunk 2
    assert_not_pushed(sn.reply(D, 0, 33), D)  # below the front, pushed before
    assert sn.event("PATCH") == 3
    assert_pushed(sn.reply(A, 1, 2), A, 2, [C, D], chunk=1)  # the origin's, below the front: pushed all the same
    assert (sn.event("PUSHED"), sn.event("ENDED_LAST"), sn.event("REORDERED")) == (8, 0, 1)
    assert_not_pushed(sn.reply(B, 2, 5), B)  # no member: forwarded


def test_a_skipped_chunk_is_pushed_once_within_stream_recent_of_the_front(sn: StreamNet) -> None:
    """Replies out of order: the front jumps past chunks whose replies have not passed yet. The first reply of such
    a chunk is pushed (nobody has it from the stream), if it is within STREAM_RECENT (64) chunks below the front;
    further below, the switch no longer knows and forwards it to its reader only (the others ask for it)."""
    sn.configure()
    big = 200
    assert len(to_storage(sn.get(A, 0, 1, chunk_count=big))) == 1
    sn.get(C, 0, 20, chunk_count=big)
    assert_pushed(sn.reply(C, 70, 21, chunk_count=big), C, 21, [A], chunk=70)  # front 71: 0..69 skipped
    assert_not_pushed(sn.reply(C, 6, 22, chunk_count=big), C)  # 64 below the front: beyond what the switch keeps
    assert_pushed(sn.reply(C, 7, 23, chunk_count=big), C, 23, [A], chunk=7)  # 63 below: pushed
    assert_not_pushed(sn.reply(C, 7, 24, chunk_count=big), C)  # once
    assert_pushed(sn.reply(C, 72, 25, chunk_count=big), C, 25, [A], chunk=72)  # front 73: 71 skipped
    assert_not_pushed(sn.reply(C, 8, 26, chunk_count=big), C)  # 65 below the front now
    assert_pushed(sn.reply(C, 71, 27, chunk_count=big), C, 27, [A], chunk=71)
    assert_not_pushed(sn.reply(C, 70, 28, chunk_count=big), C)  # pushed before, kept as the front moved
    assert (sn.event("REORDERED"), sn.event("PATCH"), sn.event("PUSHED")) == (2, 4, 4)


def test_the_last_chunk_pushed_by_a_subscriber_ends_the_stream(sn: StreamNet) -> None:
    sn.configure()
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    sn.get(C, 0, 20)
    sn.get(D, 0, 30)
    assert_pushed(sn.reply(D, CHUNKS - 1, 33), D, 33, [A, C], chunk=CHUNKS - 1)
    assert sn.event("ENDED_LAST") == 1
    assert_not_pushed(sn.reply(C, 1, 21), C)
    assert_not_pushed(sn.reply(A, 1, 1), A)  # the stream ended: the origin's reply is its own only
    assert sn.event("PUSHED") == 2


def test_the_chain_steps_over_a_subscriber_addressee_in_any_cell(sn: StreamNet) -> None:
    """The addressee's cell may be first, middle or last of the chain: every other member gets one copy."""
    sn.configure()
    subscribers = many_readers(5)
    assert len(to_storage(sn.get(B, 0, 1))) == 1
    for i, r in enumerate(subscribers):
        sn.get(r, 0, 100 + i)
    members = [B, *subscribers]
    for chunk, addressee in enumerate([subscribers[0], subscribers[2], subscribers[4]]):
        others = [m for m in members if m != addressee]
        assert_pushed(sn.reply(addressee, chunk, 200 + chunk), addressee, 200 + chunk, others, chunk=chunk)
    assert sn.event("PUSHED") == 3 * 5



# ---- the patch pass: the late members share the chunks they missed -----------------------------------------

def enter_patch_pass(sn: StreamNet) -> None:
    """A opens the stream; C joins at front 1, D at front 2 (the join point max); A's replies of every chunk are
    pushed, and the last one begins the patch pass over chunks 0 and 1."""
    assert len(to_storage(sn.get(A, 0, 1))) == 1
    assert_not_pushed(sn.reply(A, 0, 1), A)  # nobody joined yet: front 1
    assert len(to_storage(sn.get(C, 0, 20))) == 1  # C joins at 1
    assert_pushed(sn.reply(A, 1, 2), A, 2, [C], chunk=1)  # front 2
    assert len(to_storage(sn.get(D, 0, 30))) == 1  # D joins at 2
    assert sn.event("JOINED") == 2
    assert_pushed(sn.reply(A, 2, 3), A, 3, [C, D], chunk=2)
    assert_pushed(sn.reply(A, 3, 4), A, 4, [C, D], chunk=CHUNKS - 1)
    assert (sn.event("PATCH_PASS"), sn.event("ENDED_LAST"), sn.event("PUSHED")) == (1, 0, 5)


def test_the_patch_pass_pushes_a_late_members_patch_at_or_beyond_its_front_until_the_join_point_max(
        sn: StreamNet) -> None:
    """In the patch pass a member's reply of a chunk at or beyond the patch front and below the join point max
    goes to every other member (the origin too); below the patch front, or at or above the join point max, it is
    the member's own patch; the patch front reaching the join point max ends the stream."""
    sn.configure()
    enter_patch_pass(sn)
    assert_pushed(sn.reply(D, 0, 31), D, 31, [A, C], chunk=0)  # patch front 0 → 1
    assert_not_pushed(sn.reply(C, 0, 21), C)  # below the patch front: C's own
    assert_not_pushed(sn.reply(C, 2, 22), C)  # at the join point max: nobody misses it
    assert_not_pushed(sn.reply(A, 0, 5), A)  # the origin's reply is no exception in the patch pass
    assert sn.event("PATCH") == 3
    assert_pushed(sn.reply(C, 1, 23), C, 23, [A, D], chunk=1)  # patch front 2 = the join point max: the end
    assert (sn.event("PATCH_PUSHED"), sn.event("ENDED_PATCHED"), sn.event("PUSHED")) == (2, 1, 9)
    assert_not_pushed(sn.reply(D, 1, 32), D)  # the stream ended
    assert sn.event("PUSHED") == 9


def test_a_reader_joining_in_the_patch_pass_makes_it_cover_the_whole_block(sn: StreamNet) -> None:
    """A reader arriving in the patch pass missed the whole first pass: it joins at the first pass's front (the
    chunk count), so the patch pass goes on to the block's end, a second pass it shares with the late members."""
    sn.configure()
    enter_patch_pass(sn)
    assert len(to_storage(sn.get(B, 0, 40))) == 1
    assert sn.event("JOINED") == 3
    assert_pushed(sn.reply(D, 0, 33), D, 33, [A, B, C], chunk=0)  # patch front 1
    assert_pushed(sn.reply(C, 2, 22), C, 22, [A, B, D], chunk=2)  # past the late members' join point max: pushed
    # chunk 1, skipped by the patch front (3): its first reply is pushed (D missed it), later ones are B's own
    assert_pushed(sn.reply(B, 1, 41), B, 41, [A, C, D], chunk=1)
    assert_not_pushed(sn.reply(D, 1, 34), D)
    assert (sn.event("REORDERED"), sn.event("PATCH"), sn.event("ENDED_PATCHED")) == (1, 1, 0)
    assert_pushed(sn.reply(B, 3, 42), B, 42, [A, C, D], chunk=CHUNKS - 1)  # patch front 4: the block's end
    assert (sn.event("PATCH_PUSHED"), sn.event("ENDED_PATCHED")) == (3, 1)


def test_a_write_ends_the_patch_pass(sn: StreamNet) -> None:
    sn.configure()
    enter_patch_pass(sn)
    assert [p for p, _ in sn.put(B, chunk=1)] == [STORAGE_PORT]
    assert sn.event("ENDED_BY_WRITE") == 1
    assert_not_pushed(sn.reply(D, 0, 31), D)
    assert (sn.event("PATCH_PUSHED"), sn.event("PUSHED")) == (0, 5)


def test_an_idle_patch_pass_ends(sn: StreamNet) -> None:
    """Late members that never patch (they asked for their chunks at once, or died) leave the stream idle: it
    ends at its lifetime, and a reply after that is its reader's only."""
    idle_s = idle_lifetime_s(sn.target)
    sn.configure(idle_us=int(idle_s * 1e6))
    enter_patch_pass(sn)
    let_streams_idle_out(sn.target, idle_s)
    assert_not_pushed(sn.reply(D, 0, 31), D)
    assert (sn.event("EXPIRED"), sn.event("PATCH_PUSHED")) == (1, 0)
    assert len(to_storage(sn.get(B, 0, 40))) == 1  # the cell is free again: B opens a new stream
    assert sn.event("OPENED") == 2
