"""Protocol v2 in the data plane: 32-bit chunk indices, chunks of 128 B .. 8 KiB, v1 messages refused.

Only slot-sized chunks (`chunk_shift` 7, 128 bytes) are parsed as a value and may be stored; larger chunks pass
with their payload unparsed, are never stored, and are coalesced like any GET (each waiter's copy carries the
whole payload). Runs on every target of `conftest.target`.
"""

from __future__ import annotations

import struct
import zlib

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from kvpool.constants import KVP_UDP_PORT, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CPU_PORT,
    STORAGE_IP,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    chunk_key,
    kvp_frame,
    kvp_of,
    value_chunk,
)
from tests.dataplane import test_kvswitch_coalesce as coalescing
from tests.dataplane.test_kvswitch_coalesce import KEY, A, C, CoalesceNet, gets_to_storage

coal = coalescing.coal
"""The coalescing tests' fixture: readers on several ports, coalescing configured as the controller does."""

WIDE = chunk_key(tenant=7, prefix_hash=0x0123456789ABCDEF, chunk_idx=262_143)
"""The last chunk of a 256 MiB block in 1 KiB chunks: beyond v1's 8-bit chunk_idx."""
COUNT = 262_144
SLOT = 21
KIB = bytes(range(256)) * 4
"""A recognisable 1 KiB chunk."""
V1_GET = bytes.fromhex("4b5601010000000700000001" "0123456789abcdef" "0004" "0000" "00000000" "00000000" "00000000")
"""A protocol-v1 GET (36 bytes, 8-bit chunk_idx and chunk_count)."""


def large_reply(key: ChunkKey, payload: bytes, shift: int, version: int = 2, req_id: int = 1) -> Ether:
    kvp = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=key.tenant, prefix_hash=key.prefix_hash,
              chunk_idx=key.chunk_idx, chunk_count=COUNT, chunk_shift=shift, version=version, req_id=req_id)
    return kvp_frame(kvp / Raw(payload), to_storage=False)


def get(key: ChunkKey, req_id: int = 1) -> Ether:
    return kvp_frame(KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                         chunk_count=COUNT, req_id=req_id))


def slot_reply(key: ChunkKey, value: bytes, version: int) -> Ether:
    """A storage node's GET_REPLY of a 128-byte chunk of a COUNT-chunk block (so any chunk_idx is in range)."""
    kvp = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=key.tenant, prefix_hash=key.prefix_hash,
              chunk_idx=key.chunk_idx, chunk_count=COUNT, version=version)
    return kvp_frame(kvp / KVPValue.from_bytes(value), to_storage=False)


def test_a_v1_get_is_counted_bad_version_and_forwarded_untouched(net: KvNet) -> None:
    net.index(chunk_key(), SLOT)
    net.server_reply(chunk_key(), value_chunk(1), version=1, frames=1)  # the key is in the pool: a v2 GET would hit
    frame = (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
             / UDP(sport=40001, dport=KVP_UDP_PORT) / Raw(V1_GET))
    out = net.send(CLIENT_PORT, frame, frames=1)
    assert [p for p, _ in out] == [STORAGE_PORT], "never answered from the pool, never dropped"
    assert Ether(out[0][1])[UDP].load == V1_GET
    assert net.drops("BAD_VERSION") == 1 and net.events("GET_HIT") == 0


def test_a_1_kib_chunk_is_forwarded_whole_but_never_stored(net: KvNet) -> None:
    net.index(WIDE, SLOT)
    assert [p for p, _ in net.send(CLIENT_PORT, get(WIDE), frames=1)] == [STORAGE_PORT]
    out = net.send(STORAGE_PORT, large_reply(WIDE, KIB, shift=10), frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    reply = Ether(out[0][1])[KVP]
    assert (reply.chunk_shift, reply.chunk_idx, reply.value) == (10, WIDE.chunk_idx, KIB)
    assert net.events("FILL") == 0 and net.drops("NO_VALUE") == 0
    assert [p for p, _ in net.send(CLIENT_PORT, get(WIDE, 2), frames=1)] == [STORAGE_PORT], "a 1 KiB chunk was stored"


def test_an_8_kib_put_passes_and_still_invalidates(net: KvNet) -> None:
    key = chunk_key(tenant=7, prefix_hash=0x0123456789ABCDEF, chunk_idx=300)
    net.index(key, SLOT)
    net.send(STORAGE_PORT, slot_reply(key, value_chunk(1), version=1), frames=1)
    assert [p for p, _ in net.send(CLIENT_PORT, get(key), frames=1)] == [CLIENT_PORT], "filled and served"
    put = KVP(opcode=Opcode.PUT, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
              chunk_count=COUNT, chunk_shift=13, version=2) / Raw(bytes(8192))
    out = net.send(CLIENT_PORT, kvp_frame(put), frames=1)
    assert [p for p, _ in out] == [STORAGE_PORT] and len(Ether(out[0][1])[KVP].payload) == 8192
    assert net.events("PUT_INVALIDATE") == 1
    assert [p for p, _ in net.send(CLIENT_PORT, get(key, 2), frames=1)] == [STORAGE_PORT]


def test_a_128_byte_chunk_beyond_index_255_is_stored_and_served(net: KvNet) -> None:
    key = chunk_key(tenant=7, prefix_hash=0x0123456789ABCDEF, chunk_idx=70_000)
    net.index(key, SLOT)
    net.send(STORAGE_PORT, slot_reply(key, value_chunk(5), version=3), frames=1)
    assert net.events("FILL") == 1
    out = net.send(CLIENT_PORT, get(key, req_id=77), frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    reply = Ether(out[0][1])[KVP]
    assert (reply.status, reply.chunk_idx, reply.chunk_shift, reply.req_id) == (Status.HIT_SWITCH, 70_000, 7, 77)
    assert reply[KVPValue].value_bytes == value_chunk(5)
    assert net.slot_hits(SLOT) == 1


def test_chunk_idx_beyond_255_does_not_alias_its_low_byte(net: KvNet) -> None:
    low, high = chunk_key(chunk_idx=4), chunk_key(chunk_idx=4 + 256)
    net.index(low, SLOT)
    net.send(STORAGE_PORT, slot_reply(low, value_chunk(1), version=1), frames=1)
    assert [p for p, _ in net.send(CLIENT_PORT, get(low), frames=1)] == [CLIENT_PORT]
    assert [p for p, _ in net.send(CLIENT_PORT, get(high), frames=1)] == [STORAGE_PORT], "chunk 260 got chunk 4's slot"
    assert net.drops("BAD_CHUNK") == 0


def test_a_hot_key_digest_carries_the_32_bit_chunk_idx(net: KvNet) -> None:
    net.sketch(hot_threshold=2, epoch=1)
    for i in range(2):
        net.send(CLIENT_PORT, get(WIDE, 10 + i), frames=1)
    net.send(STORAGE_PORT, slot_reply(WIDE, value_chunk(2), version=1), frames=1)  # reported at its reply
    fields = [dict(m.fields) for m in net.digests(count=1)]
    assert [f["chunk_idx"] for f in fields] == [WIDE.chunk_idx]


def test_a_slot_write_of_a_chunk_larger_than_a_slot_is_malformed(net: KvNet) -> None:
    net.index(WIDE, SLOT)
    write = KVP(opcode=Opcode.SLOT_WRITE, tenant=WIDE.tenant, prefix_hash=WIDE.prefix_hash,
                chunk_idx=WIDE.chunk_idx, chunk_count=COUNT, chunk_shift=10, version=1, aux=SLOT) / Raw(KIB)
    out = net.packet_out(0, kvp_frame(write), frames=1)
    assert [p for p, _ in out] == [CPU_PORT]
    assert struct.unpack("!H", out[0][1][:2]) == (CPU_PORT,)
    assert kvp_of(out[0][1], packet_in=True)[KVP].status == Status.ERR_MALFORMED
    assert net.events("SLOT_WRITE") == 0


def test_readers_of_a_pending_1_kib_chunk_share_one_get_and_each_gets_the_whole_payload(coal: CoalesceNet) -> None:
    coal.configure()
    assert gets_to_storage(coal.get(A, 100, frames=1)) == 1
    assert coal.get(C, 200, parks=True) == [], "the second reader's GET left the switch"
    kvp = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
              chunk_idx=KEY.chunk_idx, chunk_count=4, chunk_shift=10, req_id=100, version=3) / Raw(KIB)
    frame = (Ether(dst="00:00:00:00:00:fe", src="00:00:00:00:00:02") / IP(src="10.0.0.2", dst=A.ip)
             / UDP(sport=7420, dport=A.udp_port) / kvp)
    out = expect.process(coal.target, STORAGE_PORT, bytes(frame), frames=2)
    got = {(Ether(d)[IP].dst, Ether(d)[UDP].dport): (p, Ether(d)[KVP]) for p, d in out}
    assert set(got) == {(A.ip, A.udp_port), (C.ip, C.udp_port)}
    for reader, req_id in ((A, 100), (C, 200)):
        port, reply = got[reader.ip, reader.udp_port]
        assert (port, reply.req_id, reply.chunk_shift, reply.value) == (reader.port, req_id, 10, KIB)
        assert zlib.crc32(reply.value) == reply.value_csum
    assert coal.replicated() == 1
