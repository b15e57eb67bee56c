"""Steering (p4src/steer.p4): one pool address, several storage nodes; LOOKUP_META answered in the data plane.

The test switch of kvnet.py with a second storage node on port 3 (its role STORAGE instead of FABRIC); the
tables are filled by `controller.steering.Steering` itself, through a `Target`, so the controller's entries are
what is tested on every target::

    client 10.0.0.1 ── port 1 (HOST) ──────┐
    node 1 10.0.0.2 ── port 2 (STORAGE) ───┤ kvswitch   pool address 10.0.0.200
    node 2 10.0.0.3 ── port 3 (STORAGE) ───┤
    another switch ─── port 4 (FABRIC) ────┘
"""

from __future__ import annotations

import pathlib
import re

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.hosts import Host
from controller.steering import (
    PoolNode,
    Steering,
    SteeringOptions,
    bucket_of,
    node_of_meta_aux,
)
from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CLIENT_UDP_PORT,
    CPU_PORT,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    chunk_key,
    value_chunk,
)
from p4rt.entities import Exact, TableEntry
from p4rt.errors import P4RuntimeError
from softswitch.target import Target, TargetError

POOL_IP = "10.0.0.200"
NODE2_IP, NODE2_MAC, NODE2_PORT = "10.0.0.3", "00:00:00:00:00:03", 3
NODES = (PoolNode(1, STORAGE_IP), PoolNode(2, NODE2_IP))
ROUTES = [Host("client", CLIENT_IP, CLIENT_MAC, CLIENT_PORT), Host("st1", STORAGE_IP, STORAGE_MAC, STORAGE_PORT),
          Host("st2", NODE2_IP, NODE2_MAC, NODE2_PORT)]
PORT_OF = {1: STORAGE_PORT, 2: NODE2_PORT}
ADDRESS_OF = {1: STORAGE_IP, 2: NODE2_IP}
MAC_OF = {1: STORAGE_MAC, 2: NODE2_MAC}


def key_in_bucket_of(home: int, tenant: int = 3) -> ChunkKey:
    """A key whose bucket's home is node `home` (1 or 2: buckets alternate between the two)."""
    for n in range(1, 10_000):
        key = chunk_key(tenant, 0x5EE0_0000_0000_0000 + n, 0)
        if bucket_of(key.tenant, key.prefix_hash) % 2 == home - 1:
            return key
    raise AssertionError("no key found")


KEY1, KEY2 = key_in_bucket_of(1), key_in_bucket_of(2)


class TargetWriter:
    """`controller.steering.TableWriter` over a Target: a second insert of a match is a P4RuntimeError, as on a
    switch."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def insert(self, entry: TableEntry) -> None:
        try:
            self.target.table_insert(entry)
        except TargetError as exc:
            raise P4RuntimeError("ALREADY_EXISTS", str(exc)) from None

    def modify(self, entry: TableEntry) -> None:
        self.target.table_modify(entry)

    def set_default(self, table: str, action: str, params=None) -> None:
        self.target.table_set_default(table, action, params or {})


class PoolNet:
    """KvNet with the pool configured by the controller's Steering, and helpers that speak to the pool."""

    def __init__(self, net: KvNet, target: Target, shared_store: bool = False) -> None:
        self.net, self.target = net, target
        target.table_insert(TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": _lpm(NODE2_IP)},
                                       "MyIngress.ipv4_forward", {"dst_mac": _mac(NODE2_MAC), "port": NODE2_PORT}))
        target.table_modify(TableEntry("MyIngress.port_role", {"ingress_port": Exact(NODE2_PORT)},
                                       "MyIngress.set_port_role", {"role": net.enums["port_role_t"]["STORAGE"]}))
        self.live = {1: True, 2: True}
        self.steering = Steering(SteeringOptions(POOL_IP, NODES, shared_store=shared_store, failures_to_down=1),
                                 ROUTES, probe=lambda node: self.live[node.node_id])
        self.writer = TargetWriter(target)
        self.steering.install(self.writer)
        for index in net.enums["steer_event_t"].values():
            target.counter_write("MyIngress.steer_events", index, 0, 0)

    def fail(self, node_id: int, live: bool = False) -> None:
        self.live[node_id] = live
        self.steering.check(self.writer)

    def request(self, opcode: int, key: ChunkKey, *, dst: str = POOL_IP, port: int = CLIENT_PORT,
                value: bytes | None = None, req_id: int = 5, version: int = 0, sport: int = CLIENT_UDP_PORT,
                frames: int | None = None) -> list[tuple[int, bytes]]:
        """A client's request; `frames`: how many a correct switch sends for it (`kvtesting.expect`)."""
        kvp = KVP(opcode=opcode, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                  chunk_count=4, req_id=req_id, version=version)
        if value is not None:
            kvp = kvp / KVPValue.from_bytes(value)
        frame = (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=dst)
                 / UDP(sport=sport, dport=KVP_UDP_PORT) / kvp)
        return expect.process(self.target, port, bytes(frame), frames)

    def reply(self, node_id: int, opcode: int, key: ChunkKey, *, status: int = Status.OK,
              value: bytes | None = None, version: int = 1, req_id: int = 5, port: int | None = None,
              sport_ip: str | None = None, dport: int = CLIENT_UDP_PORT,
              frames: int | None = None) -> list[tuple[int, bytes]]:
        """Node `node_id`'s reply to the client (from its port unless `port` says otherwise); `frames`: how many
        a correct switch sends for it."""
        kvp = KVP(opcode=opcode, status=status, tenant=key.tenant, prefix_hash=key.prefix_hash,
                  chunk_idx=key.chunk_idx, chunk_count=4, req_id=req_id, version=version)
        if value is not None:
            kvp = kvp / KVPValue.from_bytes(value)
        frame = (Ether(dst=SWITCH_MAC, src=MAC_OF[node_id]) / IP(src=sport_ip or ADDRESS_OF[node_id], dst=CLIENT_IP)
                 / UDP(sport=KVP_UDP_PORT, dport=dport) / kvp)
        return expect.process(self.target, PORT_OF[node_id] if port is None else port, bytes(frame), frames)

    def event(self, name: str) -> int:
        return self.target.counter_read("MyIngress.steer_events", self.net.enums["steer_event_t"][name])[0]


@pytest.fixture
def pool(net: KvNet, target: Target) -> PoolNet:
    return PoolNet(net, target)


def only(out: list[tuple[int, bytes]], port: int) -> Ether:
    assert [p for p, _ in out] == [port], [(p, Ether(d).summary()) for p, d in out]
    return Ether(out[0][1])


# ---- requests are steered by bucket -----------------------------------------------------------------------

@pytest.mark.parametrize("opcode", [Opcode.GET, Opcode.PUT, Opcode.STAT])
def test_requests_to_the_pool_address_go_to_the_node_of_their_bucket(pool: PoolNet, opcode: int) -> None:
    for node_id, key in ((1, KEY1), (2, KEY2)):
        value = value_chunk(node_id) if opcode == Opcode.PUT else None
        frame = only(pool.request(opcode, key, value=value, frames=1), PORT_OF[node_id])
        assert (frame[IP].dst, frame[Ether].dst) == (ADDRESS_OF[node_id], MAC_OF[node_id])
        assert (frame[IP].src, frame[UDP].sport, frame[UDP].chksum) == (CLIENT_IP, CLIENT_UDP_PORT, 0)
        assert frame[IP].ttl == 63 and frame[KVP].opcode == opcode and frame[KVP].req_id == 5
        if value is not None:
            assert frame[KVPValue].value_bytes == value
    assert pool.event("STEERED") == 2


def test_every_chunk_of_a_block_goes_to_one_node(pool: PoolNet) -> None:
    ports = {only(pool.request(Opcode.GET, chunk_key(KEY2.tenant, KEY2.prefix_hash, idx), frames=1), NODE2_PORT)[IP].dst
             for idx in range(4)}
    assert ports == {NODE2_IP}


def test_other_addresses_are_routed_as_before(pool: PoolNet) -> None:
    frame = only(pool.request(Opcode.GET, KEY1, dst=NODE2_IP, frames=1), NODE2_PORT)
    assert frame[IP].dst == NODE2_IP and pool.event("STEERED") == 0


# ---- replies leave in the pool's name ---------------------------------------------------------------------

@pytest.mark.parametrize("opcode", [Opcode.GET_REPLY, Opcode.PUT_ACK, Opcode.STAT_REPLY])
def test_a_members_reply_from_its_storage_port_leaves_in_the_pool_name(pool: PoolNet, opcode: int) -> None:
    value = value_chunk(7) if opcode == Opcode.GET_REPLY else None
    status = Status.HIT_SERVER if opcode == Opcode.GET_REPLY else Status.OK
    for node_id in (1, 2):
        frame = only(pool.reply(node_id, opcode, KEY1, status=status, value=value, frames=1), CLIENT_PORT)
        assert (frame[IP].src, frame[IP].dst, frame[UDP].sport) == (POOL_IP, CLIENT_IP, KVP_UDP_PORT)
        assert frame[UDP].chksum == 0 and frame[KVP].status == status
        assert not int(frame[KVP].flags) & Flag.BYPASS
    assert pool.event("REPLY_REWRITTEN") == 2


def test_a_reply_from_a_host_port_is_not_renamed_into_the_pool(pool: PoolNet) -> None:
    """A host forging a member's reply (its source address) cannot speak in the pool's name; it is delivered
    as before the pool existed: marked F_BYPASS, never stored."""
    frame = only(pool.reply(1, Opcode.GET_REPLY, KEY1, status=Status.HIT_SERVER, value=value_chunk(6),
                            port=CLIENT_PORT, frames=1), CLIENT_PORT)
    assert frame[IP].src == STORAGE_IP
    assert int(frame[KVP].flags) & Flag.BYPASS
    assert pool.event("REPLY_REWRITTEN") == 0


def test_a_reply_of_an_address_outside_the_pool_is_not_renamed(pool: PoolNet) -> None:
    frame = only(pool.reply(1, Opcode.GET_REPLY, KEY1, status=Status.HIT_SERVER, value=value_chunk(6),
                            sport_ip="10.0.0.77", frames=1), CLIENT_PORT)
    assert frame[IP].src == "10.0.0.77"


# ---- the switch store and failures ------------------------------------------------------------------------

def test_the_switch_store_serves_pool_gets_in_the_pool_name(pool: PoolNet) -> None:
    pool.net.index(KEY2, 9)
    only(pool.reply(2, Opcode.GET_REPLY, KEY2, status=Status.HIT_SERVER, value=value_chunk(2), version=3, frames=1),
         CLIENT_PORT)
    frame = only(pool.request(Opcode.GET, KEY2, frames=1), CLIENT_PORT)
    assert (frame[KVP].status, frame[KVP].version, frame[IP].src) == (Status.HIT_SWITCH, 3, POOL_IP)
    assert frame[KVPValue].value_bytes == value_chunk(2)


def test_a_down_nodes_buckets_are_answered_miss_and_writes_refused(pool: PoolNet) -> None:
    """Private stores (memory): nobody else holds node 2's blocks, so the switch answers MISS (PUT: ERR_FULL,
    nothing stored) instead of asking another node, until node 2 answers probes again."""
    pool.fail(2)
    for opcode, status in ((Opcode.GET, Status.MISS), (Opcode.STAT, Status.MISS), (Opcode.PUT, Status.ERR_FULL)):
        value = value_chunk(1) if opcode == Opcode.PUT else None
        frame = only(pool.request(opcode, KEY2, value=value, req_id=31, frames=1), CLIENT_PORT)
        assert (frame[KVP].opcode, frame[KVP].status, frame[KVP].req_id) == (opcode + 1, status, 31)
        assert (frame[IP].src, frame[IP].dst, frame[UDP].sport, frame[UDP].dport) == \
            (POOL_IP, CLIENT_IP, KVP_UDP_PORT, CLIENT_UDP_PORT)
        assert KVPValue not in frame and frame[IP].len == len(frame[IP]) and frame[UDP].len == len(frame[UDP])
    assert pool.event("UNAVAILABLE") == 3
    assert only(pool.request(Opcode.GET, KEY1, frames=1), STORAGE_PORT)[IP].dst == STORAGE_IP, "node 1 still serves"
    pool.fail(2, live=True)
    assert only(pool.request(Opcode.GET, KEY2, frames=1), NODE2_PORT)[IP].dst == NODE2_IP


def test_a_switch_hit_is_served_while_its_node_is_down(pool: PoolNet) -> None:
    pool.net.index(KEY2, 4)
    only(pool.reply(2, Opcode.GET_REPLY, KEY2, status=Status.HIT_SERVER, value=value_chunk(8), version=2, frames=1),
         CLIENT_PORT)
    pool.fail(2)
    frame = only(pool.request(Opcode.GET, KEY2, frames=1), CLIENT_PORT)
    assert (frame[KVP].status, frame[KVPValue].value_bytes) == (Status.HIT_SWITCH, value_chunk(8))


def test_with_a_shared_store_a_down_nodes_buckets_go_to_a_live_node(net: KvNet, target: Target) -> None:
    pool = PoolNet(net, target, shared_store=True)
    pool.fail(2)
    assert only(pool.request(Opcode.GET, KEY2, frames=1), STORAGE_PORT)[IP].dst == STORAGE_IP
    pool.fail(2, live=True)
    assert only(pool.request(Opcode.GET, KEY2, frames=1), NODE2_PORT)[IP].dst == NODE2_IP


# ---- LOOKUP_META in the data plane ------------------------------------------------------------------------

def test_lookup_meta_of_an_indexed_key_is_answered_by_the_switch(pool: PoolNet) -> None:
    pool.net.index(KEY2, 12, min_version=4)
    frame = only(pool.request(Opcode.LOOKUP_META, KEY2, req_id=77, frames=1), CLIENT_PORT)
    assert (frame[KVP].opcode, frame[KVP].status, frame[KVP].req_id) == (Opcode.LOOKUP_META_REPLY, Status.OK, 77)
    assert (frame[IP].src, frame[IP].dst, frame[UDP].dport) == (POOL_IP, CLIENT_IP, CLIENT_UDP_PORT)
    assert node_of_meta_aux(frame[KVP].aux) == 2 and frame[KVP].aux & 0xFF == 0, "not in the switch yet"
    assert frame[KVP].version == 4, "the entry's min_version: the newest the controller knows"

    only(pool.reply(2, Opcode.GET_REPLY, KEY2, status=Status.HIT_SERVER, value=value_chunk(3), version=6, frames=1),
         CLIENT_PORT)
    frame = only(pool.request(Opcode.LOOKUP_META, KEY2, frames=1), CLIENT_PORT)
    assert frame[KVP].aux == (2 << 24) | (1 << 1) and frame[KVP].version == 6, "SWITCH tier, slot's version"
    assert pool.event("META_ANSWERED") == 2 and pool.net.events("PUNT") == 0


def test_lookup_meta_of_an_unknown_key_is_punted_to_the_controller(pool: PoolNet) -> None:
    out = pool.request(Opcode.LOOKUP_META, KEY1, frames=1)
    assert [p for p, _ in out] == [CPU_PORT]
    assert pool.net.events("PUNT") == 1 and pool.event("META_ANSWERED") == 0


def test_lookup_meta_is_answered_without_a_pool_too(net: KvNet) -> None:
    """Metadata in the data plane does not need steering: node id 0 ("not said")."""
    net.index(KEY1, 3)
    net.server_reply(KEY1, value_chunk(1), version=2, frames=1)
    frame = only(net.send(CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
                          / UDP(sport=CLIENT_UDP_PORT, dport=KVP_UDP_PORT)
                          / KVP(opcode=Opcode.LOOKUP_META, tenant=KEY1.tenant, prefix_hash=KEY1.prefix_hash,
                                chunk_count=4), frames=1), CLIENT_PORT)
    assert (frame[KVP].aux, frame[KVP].version, frame[IP].src) == (1 << 1, 2, STORAGE_IP)


# ---- coalescing keyed by the pool ---------------------------------------------------------------------------

def test_coalescing_keys_pool_gets_by_the_pool_not_the_node(pool: PoolNet, target: Target) -> None:
    """Two readers GET one cold chunk through the pool address: one GET reaches the node, its reply (renamed)
    is replicated to both, each in the pool's name."""
    from controller.coalescing import CoalescingOptions, group_layouts

    options = CoalescingOptions(timeout_us=30_000_000, epoch=1 + getattr(target, "epoch_offset", 0), mcast_group=7)
    for group, layout in group_layouts(options, (1, 2, 3, 4)).items():
        target.mcast_group_set(group, list(_replicas(layout)))
    target.table_set_default("MyIngress.coalesce_config", "MyIngress.set_coalesce_config", options.config_params())
    first = only(pool.request(Opcode.GET, KEY2, req_id=1, sport=40001, frames=1), NODE2_PORT)
    assert first[IP].dst == NODE2_IP
    coalesced = pool.net.enums["coalesce_event_t"]["COALESCED"]

    def parked() -> int:
        return target.counter_read("MyIngress.coalesce_events", coalesced)[0]

    before = parked()
    assert pool.request(Opcode.GET, KEY2, req_id=2, sport=40002) == [], "the second reader waits"
    # nothing to wait for but the count: the reply below must not overtake the parked GET on a busy machine
    assert expect.settled(target, parked, before + 1) == before + 1
    out = pool.reply(2, Opcode.GET_REPLY, KEY2, status=Status.HIT_SERVER, value=value_chunk(4), req_id=1,
                     dport=40001, frames=2)
    got = sorted((Ether(d)[UDP].dport, Ether(d)[KVP].req_id, Ether(d)[IP].src, p) for p, d in out)
    assert got == [(40001, 1, POOL_IP, CLIENT_PORT), (40002, 2, POOL_IP, CLIENT_PORT)]


def _replicas(layout):
    from softswitch.target import Replica

    return [Replica(p, rid) for p, rid in layout]


# ---- names ------------------------------------------------------------------------------------------------

def test_steer_events_table_in_naming_matches_the_program(enums) -> None:
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "naming.md").read_text(encoding="utf-8")
    after = doc.split("\n`steer_event_t` (", 1)[1]
    table = re.search(r"^\|.*?(?=\n\n|\Z)", after, re.M | re.S).group(0)
    rows = {name: int(value) for value, name in re.findall(r"^\| (\d+) \| `([A-Z0-9_]+)` \|", table, re.M)}
    assert rows == enums["steer_event_t"]


def _lpm(ip: str):
    from p4rt.entities import Lpm

    return Lpm(int.from_bytes(bytes(int(x) for x in ip.split(".")), "big"), 32)


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)
