"""The switch pool: misses go to the storage node, replies fill indexed slots, hits are answered by the switch,
PUTs invalidate, and nothing stale, torn or foreign is ever served (docs/dataplane.md, "Coherence")."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CLIENT_UDP_PORT,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    chunk_key,
    crc,
    kvp_frame,
    value_chunk,
)

KEY = chunk_key()
OTHER = chunk_key(tenant=7, prefix_hash=0xFEEDFACECAFEBEEF, chunk_idx=1)
SLOT = 5


def forwarded(frame: Ether, dst_mac: str) -> bytes:
    """The frame as ipv4_forward sends it on: MACs rewritten, TTL − 1, IPv4 checksum recomputed."""
    out = frame.copy()
    out[Ether].src = out[Ether].dst
    out[Ether].dst = dst_mac
    out[IP].ttl -= 1
    del out[IP].chksum
    return bytes(Ether(bytes(out)))


def switch_reply(key: ChunkKey, value: bytes, version: int, value_len: int, req_id: int = 1) -> bytes:
    """The exact GET_REPLY the switch must build for a GET sent by `KvNet.get`."""
    get = kvp_frame(KVP())
    reply = (Ether(dst=CLIENT_MAC, src=SWITCH_MAC)
             / IP(src=STORAGE_IP, dst=CLIENT_IP, ttl=64, id=get[IP].id)
             / UDP(sport=KVP_UDP_PORT, dport=CLIENT_UDP_PORT, chksum=0)
             / KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SWITCH, flags=Flag.VALUE, tenant=key.tenant,
                   req_id=req_id, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx, chunk_count=4,
                   value_len=value_len, version=version, value_csum=crc(value), aux=0)
             / KVPValue.from_bytes(value))
    return bytes(reply)


def fill(net: KvNet, key: ChunkKey, value: bytes, version: int, **kw) -> None:
    out = net.server_reply(key, value, version, **kw, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT], "a storage node's reply always reaches the client"


def test_plain_ipv4_is_routed_with_ttl_decremented(net: KvNet) -> None:
    frame = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP, ttl=9) / UDP(dport=53) / b"x"
    assert net.send(CLIENT_PORT, frame, frames=1) == [(STORAGE_PORT, forwarded(frame, STORAGE_MAC))]


def test_unrouted_packet_is_dropped_and_counted(net: KvNet) -> None:
    frame = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst="192.0.2.9") / UDP(dport=53)
    assert net.send(CLIENT_PORT, frame) == []
    assert net.drops("NO_ROUTE", until=1) == 1


def test_packet_with_expiring_ttl_is_dropped_and_counted(net: KvNet) -> None:
    frame = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP, ttl=1) / UDP(dport=53)
    assert net.send(CLIENT_PORT, frame) == []
    assert net.drops("TTL_EXPIRED", until=1) == 1


def test_get_miss_goes_to_storage_node_unchanged(net: KvNet) -> None:
    get = kvp_frame(KVP(opcode=Opcode.GET, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_count=4, req_id=1))
    assert net.get(KEY, frames=1) == [(STORAGE_PORT, forwarded(get, STORAGE_MAC))]
    assert net.events("GET_MISS") == 1


def test_reply_fills_indexed_slot_and_next_get_is_answered_by_switch(net: KvNet) -> None:
    value = value_chunk(1)
    net.index(KEY, SLOT)
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]
    fill(net, KEY, value, version=3, csum=None)
    assert net.events("FILL") == 1

    out = net.get(KEY, req_id=42, frames=1)
    assert out == [(CLIENT_PORT, switch_reply(KEY, value, version=3, value_len=128, req_id=42))]
    assert net.events("GET_HIT") == 1


def test_switch_reply_keeps_value_len_of_the_filled_chunk(net: KvNet) -> None:
    value = value_chunk(2)[:100].ljust(128, b"\0")
    net.index(KEY, SLOT)
    net.send(STORAGE_PORT, kvp_frame(
        KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
            chunk_count=4, version=1, value_len=100) / KVPValue.from_bytes(value), to_storage=False), frames=1)
    assert net.get(KEY, frames=1) == [(CLIENT_PORT, switch_reply(KEY, value, version=1, value_len=100))]


@pytest.mark.parametrize(("status", "fills"), [
    (Status.HIT_SWITCH, True),    # an upstream switch's reply (leaf-spine: the readers' leaf caches too)
    (Status.ERR_STALE, False),    # an error reply never fills, whatever it carries
    (Status.OK, False),
])
def test_reply_fills_only_when_it_is_a_hit_from_a_server_or_an_upstream_switch(
        net: KvNet, status: Status, fills: bool) -> None:
    value = value_chunk(5)
    net.index(KEY, SLOT)
    net.send(STORAGE_PORT, kvp_frame(
        KVP(opcode=Opcode.GET_REPLY, status=status, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
            chunk_count=4, version=2) / KVPValue.from_bytes(value), to_storage=False), frames=1)
    assert net.events("FILL") == int(fills)
    out = net.get(KEY, req_id=9, frames=1)
    if fills:
        assert out == [(CLIENT_PORT, switch_reply(KEY, value, version=2, value_len=128, req_id=9))]
    else:
        assert [p for p, _ in out] == [STORAGE_PORT]


def test_unindexed_reply_fills_nothing(net: KvNet) -> None:
    fill(net, KEY, value_chunk(1), version=1)
    assert net.events("FILL") == 0
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]


def test_per_slot_hit_counter_counts_answered_gets(net: KvNet) -> None:
    net.index(KEY, SLOT)
    net.index(OTHER, SLOT + 1)
    fill(net, KEY, value_chunk(1), version=1)
    for i in range(3):
        assert [p for p, _ in net.get(KEY, req_id=i, frames=1)] == [CLIENT_PORT]
    net.get(OTHER, frames=1)  # a miss: counts nowhere
    assert (net.slot_hits(SLOT), net.slot_hits(SLOT + 1)) == (3, 0)


def test_raised_min_version_retires_a_valid_copy_and_the_next_reply_replaces_it(net: KvNet) -> None:
    """A PUT that bypassed this switch: the controller raises the entry's min_version; the old copy is no
    longer served, and the storage node's next reply (the new version) replaces it although the slot is valid."""
    old, new = value_chunk(1), value_chunk(2)
    net.index(KEY, SLOT)
    fill(net, KEY, old, version=3)
    assert net.get(KEY, frames=1) == [(CLIENT_PORT, switch_reply(KEY, old, version=3, value_len=128))]

    net.reindex(KEY, SLOT, min_version=4)
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT], "the outdated copy is a miss"
    fill(net, KEY, old, version=3)  # an old reply still in flight: refused
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]
    fill(net, KEY, new, version=4)
    assert net.get(KEY, req_id=7, frames=1) == [
        (CLIENT_PORT, switch_reply(KEY, new, version=4, value_len=128, req_id=7))]


def test_put_invalidates_slot_but_does_not_bound_it(net: KvNet) -> None:
    """Since coherence (docs/dataplane.md, "Coherence"): a PUT may still be refused (or forged), so it only invalidates; a reply of the
    current version may fill again until a PUT_ACK says the new version is committed."""
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=3)
    assert [p for p, _ in net.get(KEY, frames=1)] == [CLIENT_PORT]

    assert [p for p, _ in net.put(KEY, value_chunk(2), version=4, frames=1)] == [STORAGE_PORT]
    assert net.events("PUT_INVALIDATE") == 1
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT], "invalidated: the storage node answers"

    fill(net, KEY, value_chunk(1), version=3)  # v4 is not acknowledged: v3 is still the committed value
    assert net.get(KEY, frames=1) == [(CLIENT_PORT, switch_reply(KEY, value_chunk(1), version=3, value_len=128))]


def test_acknowledged_put_bounds_the_slot_and_older_value_never_comes_back(net: KvNet) -> None:
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=3)
    net.put(KEY, value_chunk(2), version=4, frames=1)
    assert [p for p, _ in net.put_ack(KEY, version=4, frames=1)] == [CLIENT_PORT], "the ack reaches the writer"
    assert net.events("PUT_ACK_BOUND") == 1

    fill(net, KEY, value_chunk(1), version=3)  # a reply that was in flight before the PUT
    assert net.drops("STALE_FILL") == 1
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]

    fill(net, KEY, value_chunk(2), version=4)
    assert net.get(KEY, frames=1) == [(CLIENT_PORT, switch_reply(KEY, value_chunk(2), version=4, value_len=128))]


def test_acknowledged_put_retires_an_older_valid_copy(net: KvNet) -> None:
    """A PUT that went around this switch but whose ack passes through it: the old copy stops being served."""
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=3)
    net.put_ack(KEY, version=4, frames=1)
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]
    fill(net, KEY, value_chunk(2), version=4)
    assert net.get(KEY, frames=1) == [(CLIENT_PORT, switch_reply(KEY, value_chunk(2), version=4, value_len=128))]


def test_index_min_version_bounds_fills(net: KvNet) -> None:
    net.index(KEY, SLOT, min_version=5)
    fill(net, KEY, value_chunk(1), version=4)
    assert net.drops("STALE_FILL") == 1
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]
    fill(net, KEY, value_chunk(1), version=5)
    assert [p for p, _ in net.get(KEY, frames=1)] == [CLIENT_PORT]


def test_fill_with_bad_checksum_is_refused(net: KvNet) -> None:
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=1, csum=crc(value_chunk(1)) ^ 1)
    assert net.drops("BAD_CHECKSUM") == 1
    assert net.events("FILL") == 0
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]


@pytest.mark.parametrize("other", [
    chunk_key(tenant=KEY.tenant + 1, prefix_hash=KEY.prefix_hash, chunk_idx=KEY.chunk_idx),
    chunk_key(tenant=KEY.tenant, prefix_hash=KEY.prefix_hash ^ 1, chunk_idx=KEY.chunk_idx),
    chunk_key(tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_idx=KEY.chunk_idx + 1),
], ids=["tenant", "prefix_hash", "chunk_idx"])
def test_slot_never_serves_another_keys_value(net: KvNet, other: ChunkKey) -> None:
    net.index(KEY, SLOT)
    net.index(other, SLOT)  # a stale or conflicting index entry pointing at the same slot
    fill(net, KEY, value_chunk(1), version=1)
    assert [p for p, _ in net.get(other, frames=1)] == [STORAGE_PORT]
    assert [p for p, _ in net.get(KEY, frames=1)] == [CLIENT_PORT]


def test_bypass_get_is_not_answered_and_bypass_reply_does_not_fill(net: KvNet) -> None:
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=1, flags=int(Flag.VALUE | Flag.BYPASS))
    assert net.events("FILL") == 0
    fill(net, KEY, value_chunk(1), version=1)
    assert [p for p, _ in net.get(KEY, flags=int(Flag.BYPASS), frames=1)] == [STORAGE_PORT]
    assert net.slot_hits(SLOT) == 0


def test_get_asking_for_newer_version_than_cached_misses(net: KvNet) -> None:
    net.index(KEY, SLOT)
    fill(net, KEY, value_chunk(1), version=2)
    assert [p for p, _ in net.get(KEY, version=3, frames=1)] == [STORAGE_PORT]
    assert [p for p, _ in net.get(KEY, version=2, frames=1)] == [CLIENT_PORT]
