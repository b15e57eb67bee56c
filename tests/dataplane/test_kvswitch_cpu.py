"""The CPU port: client ops punted to the controller, packet-out, and slot access with SLOT_WRITE / SLOT_READ."""

from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import Flag, Opcode, Status
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import (
    CLIENT_PORT,
    CPU_PORT,
    STORAGE_PORT,
    KvNet,
    chunk_key,
    crc,
    kvp_frame,
    value_chunk,
)

KEY = chunk_key(tenant=2, prefix_hash=0x5555_6666_7777_8888, chunk_idx=1)


def test_insert_and_lookup_meta_are_punted_with_ingress_port(net: KvNet, enums) -> None:
    for opcode in (Opcode.INSERT, Opcode.LOOKUP_META):
        frame = kvp_frame(KVP(opcode=opcode, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_idx=1,
                              chunk_count=2, aux=(3 << 16) | 512))
        out = net.send(CLIENT_PORT, frame, frames=1)
        header = struct.pack("!HBB", CLIENT_PORT, enums["punt_reason_t"]["CLIENT_OP"], 0)
        assert out == [(CPU_PORT, header + bytes(frame))]
    assert net.events("PUNT") == 2


def test_packet_out_leaves_unchanged_through_its_port(net: KvNet) -> None:
    reply = kvp_frame(KVP(opcode=Opcode.INSERT_ACK, tenant=KEY.tenant, aux=0b10), to_storage=False)
    assert net.packet_out(CLIENT_PORT, reply, frames=1) == [(CLIENT_PORT, bytes(reply))]
    assert net.events("PACKET_OUT") == 1


def test_slot_write_then_read_returns_key_version_and_value(net: KvNet) -> None:
    value = value_chunk(9)
    net.index(KEY, 17)  # SLOT_WRITE takes its generation from the key's index entry
    ack = net.slot_write(KEY, slot=17, value=value, version=6)
    assert (ack.opcode, ack.status, int(ack.flags) & Flag.VALUE) == (Opcode.SLOT_WRITE_ACK, Status.OK, 0)
    assert not ack.payload or not isinstance(ack.payload, KVPValue)

    got = net.slot_read(17)
    assert (got.opcode, got.status, got.req_id, got.aux) == (Opcode.SLOT_READ_REPLY, Status.OK, 99, 17)
    assert (got.tenant, got.prefix_hash, got.chunk_idx) == (KEY.tenant, KEY.prefix_hash, KEY.chunk_idx)
    assert (got.version, got.value_csum, got.value_len) == (6, crc(value), 128)
    assert got[KVPValue].value_bytes == value


def test_slot_written_by_controller_answers_gets(net: KvNet) -> None:
    net.index(KEY, 17)
    net.slot_write(KEY, slot=17, value=value_chunk(4), version=2)
    out = net.get(KEY, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    reply = Ether(out[0][1])
    assert reply[KVP].status == Status.HIT_SWITCH and reply[KVPValue].value_bytes == value_chunk(4)
    assert reply[IP].len == len(reply[IP]) and reply[UDP].len == len(reply[UDP])


def test_never_written_slot_reads_as_miss(net: KvNet) -> None:
    got = net.slot_read(3)
    assert got.status == Status.MISS
    assert got[KVPValue].value_bytes == bytes(128)


def test_slot_write_with_bad_checksum_is_refused(net: KvNet) -> None:
    net.index(KEY, 4)
    ack = net.slot_write(KEY, slot=4, value=value_chunk(1), version=1, csum=crc(value_chunk(1)) ^ 0xFF)
    assert ack.status == Status.ERR_CHECKSUM
    assert net.slot_read(4).status == Status.MISS


def test_slot_write_older_than_last_acknowledged_put_is_refused(net: KvNet) -> None:
    """Since coherence (docs/dataplane.md, "Coherence"): a PUT alone no longer bounds the slot (it may be refused); its PUT_ACK OK does."""
    net.index(KEY, 4)
    net.put(KEY, value_chunk(1), version=8, frames=1)
    assert net.slot_write(KEY, slot=4, value=value_chunk(1), version=7).status == Status.OK
    net.put_ack(KEY, version=8, frames=1)
    assert net.slot_write(KEY, slot=4, value=value_chunk(1), version=7).status == Status.ERR_STALE
    assert net.slot_write(KEY, slot=4, value=value_chunk(1), version=8).status == Status.OK


def test_slot_write_older_than_the_entrys_min_version_is_refused(net: KvNet) -> None:
    net.index(KEY, 4, min_version=5)
    assert net.slot_write(KEY, slot=4, value=value_chunk(1), version=4).status == Status.ERR_STALE
    assert net.drops("STALE_FILL") == 1
    assert net.slot_write(KEY, slot=4, value=value_chunk(1), version=5).status == Status.OK


@pytest.mark.parametrize("indexed_at", [None, 5], ids=["not-indexed", "indexed-elsewhere"])
def test_slot_write_for_a_key_not_indexed_at_that_slot_is_denied(net: KvNet, indexed_at: int | None) -> None:
    if indexed_at is not None:
        net.index(KEY, indexed_at)
    ack = net.slot_write(KEY, slot=4, value=value_chunk(1), version=1)
    assert ack.status == Status.ERR_DENIED
    assert net.drops("SLOT_NOT_INDEXED") == 1
    assert net.slot_read(4).status == Status.MISS


def test_slot_write_keeps_the_blocks_chunk_count_and_value_len(net: KvNet) -> None:
    """A 3-chunk block written by the controller is served with chunk_count 3, so a reader that
    asked without knowing the block size reads all three chunks."""
    chunks = [value_chunk(20 + i) for i in range(3)]
    lens = [128, 128, 44]
    keys = [chunk_key(KEY.tenant, KEY.prefix_hash, i) for i in range(3)]
    for i, key in enumerate(keys):
        net.index(key, 30 + i)
        ack = net.slot_write(key, slot=30 + i, value=chunks[i], version=3, chunk_count=3, value_len=lens[i])
        assert ack.status == Status.OK
    first = Ether(net.get(keys[0], frames=1)[0][1])[KVP]
    assert (first.status, first.chunk_count, first.version) == (Status.HIT_SWITCH, 3, 3)
    read = b""
    for i in range(first.chunk_count):
        reply = Ether(net.get(keys[i], req_id=i, frames=1)[0][1])
        assert reply[KVP].status == Status.HIT_SWITCH
        read += reply[KVPValue].value_bytes[: reply[KVP].value_len]
    assert read == chunks[0] + chunks[1] + chunks[2][:44]


def test_slot_ops_out_of_range_are_malformed(net: KvNet) -> None:
    assert net.slot_read(1 << 20).status == Status.ERR_MALFORMED
    ack = net.slot_write(KEY, slot=1 << 20, value=value_chunk(1), version=1)
    assert ack.status == Status.ERR_MALFORMED
    assert net.drops("BAD_SLOT") == 2


def test_slot_ops_from_hosts_are_dropped(net: KvNet) -> None:
    frame = kvp_frame(KVP(opcode=Opcode.SLOT_WRITE, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
                          chunk_idx=1, chunk_count=2, aux=4) / KVPValue.from_bytes(value_chunk(1)))
    assert net.send(CLIENT_PORT, frame) == []
    assert net.drops("SLOT_OP_NOT_FROM_CPU", until=1) == 1
    assert net.slot_read(4).status == Status.MISS
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]
