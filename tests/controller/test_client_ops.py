"""INSERT / LOOKUP_META punted by the switch: answered with the storage node's addresses, pool updated."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.client_ops import ClientService
from controller.pool import PoolManager
from controller.tiers import StoredChunk, TierMap, TierMover
from kvpool.constants import Flag, Opcode, Status, Tier, tiers_of
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

CLIENT = dict(mac="02:00:00:00:00:01", ip="10.0.0.1", port=40001)
STORAGE = dict(mac="02:00:00:00:00:64", ip="10.0.0.100", port=7420)


def request(kvp, value: bytes | None = None) -> bytes:
    packet = (Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
              / UDP(sport=CLIENT["port"], dport=STORAGE["port"]) / kvp)
    if value is not None:
        packet = packet / KVPValue.from_bytes(value)
    return bytes(packet)


def service(threshold=99, capacity=4):
    dp = FakeDataPlane(capacity)
    pool = PoolManager(dp, make_policies(threshold), mover=TierMover(TierMap(), FakeStorage()), clock=Clock())
    return ClientService(pool), pool, dp


def answer(svc, frame: bytes) -> Ether:
    reply = svc.handle(frame)
    assert reply is not None
    return Ether(reply)


def test_insert_ack_comes_back_in_the_storage_nodes_name():
    svc, _, _ = service()
    reply = answer(svc, request(KVP(opcode="INSERT", tenant=3, req_id=77, prefix_hash=0xAB, aux=(0 << 16) | 512)))
    assert (reply.src, reply.dst) == (STORAGE["mac"], CLIENT["mac"])
    assert (reply[IP].src, reply[IP].dst) == (STORAGE["ip"], CLIENT["ip"])
    assert (reply[UDP].sport, reply[UDP].dport, reply[UDP].chksum) == (STORAGE["port"], CLIENT["port"], 0)
    kvp = reply[KVP]
    assert (kvp.opcode, kvp.status, kvp.req_id, kvp.tenant, kvp.prefix_hash) == (Opcode.INSERT_ACK, Status.OK, 77, 3, 0xAB)
    assert tiers_of(kvp.aux) == {Tier.STORAGE_DRAM, Tier.NODE_HBM}


def test_insert_with_value_and_pin_is_admitted_and_filled_with_what_the_storage_node_holds():
    """Coherence: the client's bytes are never written into the pool; the controller writes the storage node's."""
    svc, pool, dp = service()
    key = ChunkKey(1, 0x55, 0)
    pool.mover.storage.stored[key] = StoredChunk(version=3, chunk_count=2, value=b"real")
    kvp = KVP(opcode="INSERT", tenant=1, prefix_hash=0x55, version=4, flags=Flag.PIN | Flag.VALUE, value_len=6)
    reply = answer(svc, request(kvp, b"forged"))
    assert Tier.SWITCH in tiers_of(reply[KVP].aux)
    assert dp.writes == [(0, key, 3, b"real")] and dp.chunk_counts == [2]
    assert pool.describe(key)["pin"] == "soft"
    assert pool.describe(key)["version"] == 3  # what is stored, not what was claimed


def test_inserts_in_prefix_order_link_children_to_parents():
    svc, pool, _ = service()
    answer(svc, request(KVP(opcode="INSERT", tenant=1, prefix_hash=0x10, aux=0 << 16 | 512)))
    answer(svc, request(KVP(opcode="INSERT", tenant=1, prefix_hash=0x20, aux=1 << 16 | 512)))
    assert pool.describe(ChunkKey(1, 0x20, 0))["parent"] == str(ChunkKey(1, 0x10, 0))
    assert pool.describe(ChunkKey(1, 0x20, 0))["depth"] == 1


def test_lookup_meta_reports_tiers_and_miss():
    svc, pool, _ = service()
    reply = answer(svc, request(KVP(opcode="LOOKUP_META", tenant=1, prefix_hash=0x99)))
    assert (reply[KVP].opcode, reply[KVP].status, reply[KVP].aux) == (Opcode.LOOKUP_META_REPLY, Status.MISS, 0)
    pool.pin(ChunkKey(1, 0x99, 0))
    reply = answer(svc, request(KVP(opcode="LOOKUP_META", tenant=1, prefix_hash=0x99)))
    assert reply[KVP].status == Status.OK and tiers_of(reply[KVP].aux) == {Tier.SWITCH}


def test_malformed_request_is_answered_err_malformed_and_never_applied():
    svc, pool, _ = service(threshold=1)
    reply = answer(svc, request(KVP(opcode="INSERT", tenant=1, prefix_hash=0x1, chunk_idx=5, chunk_count=2)))
    assert reply[KVP].status == Status.ERR_MALFORMED
    assert pool.tracked == {}


def test_garbage_is_ignored_without_a_reply():
    svc, _, _ = service()
    assert svc.handle(b"\x00\x01garbage") is None
    assert svc.handle(bytes(Ether() / IP() / UDP(dport=7420) / b"KV")) is None
