"""Malformed KVP is counted by reason, forwarded as plain UDP, and never touches the store or the sketch."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from kvpool.constants import KVP_UDP_PORT, Opcode, Status
from kvpool.protocol import KVP, KVPValue, check
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    KvNet,
    chunk_key,
    kvp_frame,
    value_chunk,
)

KEY = chunk_key()
SLOT = 12


def _kvp(**kw) -> KVP:
    base = {"opcode": Opcode.GET, "tenant": KEY.tenant, "prefix_hash": KEY.prefix_hash, "chunk_count": 4}
    return KVP(**(base | kw))


V1_GET = bytes.fromhex("4b5601010000000700000001" "0123456789abcdef" "0004" "0000" "00000000" "00000000" "00000000")
"""A v1 GET of chunk 0 of 4 (docs/protocol.md of v1: 36 bytes, 8-bit chunk_idx and chunk_count)."""
V1_PUT = bytes.fromhex("4b5601030001000700000002" "0123456789abcdef" "0004" "0080" "00000001" "00000000" "00000000") \
    + bytes(128)
"""A v1 PUT with its 128-byte value chunk (164 bytes)."""

MALFORMED = [
    # (reason counted, UDP payload after the UDP header)
    ("SHORT", bytes(_kvp())[:20]),
    ("SHORT", bytes(_kvp())[:2]),  # not even magic and version
    ("BAD_MAGIC", bytes(_kvp(magic=0x1234))),
    ("BAD_VERSION", bytes(_kvp(ver=3))),
    ("BAD_VERSION", V1_GET),  # a protocol-v1 GET (36 bytes): a clear version error, not SHORT
    ("BAD_VERSION", V1_PUT),
    ("BAD_CHUNK_SIZE", bytes(_kvp(chunk_shift=6))),
    ("BAD_CHUNK_SIZE", bytes(_kvp(chunk_shift=14))),
    ("NO_VALUE", bytes(_kvp(opcode=Opcode.PUT, chunk_shift=10, flags=1)) + bytes(1000)),  # 1 KiB chunk, cut
    ("UNKNOWN_OP", bytes(_kvp(opcode=0x7F))),
    ("NO_VALUE", bytes(_kvp(flags=1)) + bytes(50)),  # F_VALUE, value truncated
    ("NO_VALUE", bytes(_kvp(opcode=Opcode.PUT, flags=0))),  # PUT without value
    ("BAD_CHUNK", bytes(_kvp(chunk_count=0))),
    ("BAD_CHUNK", bytes(_kvp(chunk_idx=4, chunk_count=4))),
    ("BAD_VALUE_LEN", bytes(_kvp(opcode=Opcode.PUT, value_len=129) / KVPValue.from_bytes(value_chunk(1)))),
]


def udp_frame(payload: bytes) -> Ether:
    return (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
            / UDP(sport=40001, dport=KVP_UDP_PORT) / Raw(payload))


@pytest.mark.parametrize(("reason", "payload"), MALFORMED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(MALFORMED)])
def test_malformed_kvp_is_counted_and_forwarded_as_plain_udp(net: KvNet, enums, reason: str, payload: bytes) -> None:
    assert check(payload) is not None and check(payload).drop_reason == reason, "host and switch agree"
    frame = udp_frame(payload)
    out = net.send(CLIENT_PORT, frame, frames=1)
    assert [p for p, _ in out] == [STORAGE_PORT]
    sent = Ether(out[0][1])
    assert bytes(sent[UDP].payload) == payload, "the payload is passed on untouched"
    assert (sent[Ether].dst, sent[IP].ttl) == (STORAGE_MAC, frame[IP].ttl - 1)
    counted = {name: net.drops(name) for name in enums["drop_reason_t"] if name != "NONE"}
    assert counted == {name: int(name == reason) for name in counted}


def test_malformed_reply_for_indexed_key_does_not_fill(net: KvNet) -> None:
    net.index(KEY, SLOT)
    bad = _kvp(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, chunk_idx=9) / KVPValue.from_bytes(value_chunk(1))
    assert [p for p, _ in net.send(STORAGE_PORT, kvp_frame(bad, to_storage=False), frames=1)] == [CLIENT_PORT]
    assert net.drops("BAD_CHUNK") == 1
    assert net.events("FILL") == 0
    assert [p for p, _ in net.get(KEY, frames=1)] == [STORAGE_PORT]


def test_malformed_put_does_not_invalidate(net: KvNet) -> None:
    net.index(KEY, SLOT)
    net.server_reply(KEY, value_chunk(1), version=1, frames=1)
    net.send(CLIENT_PORT, kvp_frame(_kvp(opcode=Opcode.PUT, flags=0, version=9)), frames=1)
    assert net.events("PUT_INVALIDATE") == 0
    assert [p for p, _ in net.get(KEY, frames=1)] == [CLIENT_PORT]


def test_non_ipv4_frame_is_dropped_and_counted(net: KvNet) -> None:
    assert net.send(CLIENT_PORT, Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC, type=0x0806) / bytes(28)) == []
    assert net.drops("NOT_IPV4", until=1) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(max_size=200))
def test_random_payload_on_kvp_port_never_breaks_the_pool(net: KvNet, payload: bytes) -> None:
    # the cached value must survive whatever arrives; fill once per example (idempotent after the first)
    net_key = chunk_key(tenant=0xBEEF)
    if not net.target.table_entries("MyIngress.kv_index"):
        net.index(net_key, SLOT)
        net.server_reply(net_key, value_chunk(5), version=1, frames=1)
    for port in (CLIENT_PORT, STORAGE_PORT):
        frame = udp_frame(payload) if port == CLIENT_PORT else (
            Ether(dst=SWITCH_MAC, src=STORAGE_MAC) / IP(src=STORAGE_IP, dst=CLIENT_IP)
            / UDP(sport=KVP_UDP_PORT, dport=40001) / Raw(payload))
        # malformed: forwarded as plain UDP (one frame to wait for); a well-formed KVP may be answered or dropped
        out = net.send(port, frame, frames=1 if check(payload) is not None else None)
        assert len(out) <= 1
    hit = net.get(net_key, frames=1)
    assert [p for p, _ in hit] == [CLIENT_PORT]
    assert Ether(hit[0][1])[KVPValue].value_bytes == value_chunk(5)
