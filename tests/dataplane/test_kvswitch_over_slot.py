"""Over-slot replies (p4src/over_slot.p4; docs/dataplane.md, "Over-slot replies"): a trusted GET_REPLY of an
indexed key whose chunk is larger than a slot sends one `over_slot_digest_t` (the key, the reply's chunk_shift,
the index entry's generation) and counts OVER_SLOT_REPLY; an unindexed key's, a host's or a slot-sized reply
sends none. Forwarding never changes. Runs on every target of `conftest.target`.

A digest that should not come is checked with a barrier: a reply that must send one follows, and the switch
sends digests in packet order, so everything drained up to that expected digest is all the earlier packets
caused (a switch process is waited for until the expected digest arrives, however busy the machine is).
"""

from __future__ import annotations

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from kvpool.constants import Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP
from kvtesting.kvnet import CLIENT_PORT, FABRIC_PORTS, STORAGE_PORT, KvNet, chunk_key, kvp_frame, value_chunk

DIGEST = "over_slot_digest_t"
KEY = chunk_key(tenant=5, prefix_hash=0x5000_0000_0000_5000, chunk_idx=0)
"""Chunk 0 of a block of 8 KiB chunks, admitted though no slot can hold it (a reader asked it slot-sized)."""
OTHER = chunk_key(tenant=5, prefix_hash=0x5000_0000_0000_6000, chunk_idx=0)
"""Another block's chunk 0, never indexed."""
SLOT = 17
COUNT = 2048
"""Chunks of a 16 MiB block of 8 KiB chunks."""


def over_slot_reply(key: ChunkKey, shift: int = 13, status: int = Status.HIT_SERVER, req_id: int = 1) -> Ether:
    """The storage node's reply carrying a `1 << shift`-byte chunk (to the client)."""
    kvp = KVP(opcode=Opcode.GET_REPLY, status=status, tenant=key.tenant, prefix_hash=key.prefix_hash,
              chunk_idx=key.chunk_idx, chunk_count=COUNT, chunk_shift=shift, version=3, req_id=req_id)
    payload = bytes((key.prefix_hash + i) & 0xFF for i in range(1 << shift))
    return kvp_frame(kvp / Raw(payload), to_storage=False)


def digests(net: KvNet, expected: int) -> list[dict[str, int]]:
    """The digests the switch sent so far, waiting (switch processes) until `expected` came."""
    target = net.target
    msgs = target.drain_digests_expecting(expected) if hasattr(target, "drain_digests_expecting") \
        else target.drain_digests()
    assert {m.name for m in msgs} <= {DIGEST}, msgs
    return [dict(m.fields) for m in msgs]


def reported(key: ChunkKey, shift: int, generation: int) -> dict[str, int]:
    return {"tenant": key.tenant, "prefix_hash": key.prefix_hash, "chunk_idx": key.chunk_idx, "chunk_shift": shift,
            "generation": generation}


def kvp_bytes(frame: bytes) -> bytes:
    """What the reply carries above UDP (header and chunk), which the switch must leave as it is."""
    return bytes(Ether(frame)[UDP].payload)


@pytest.mark.parametrize("shift", [13, 10])
def test_an_admitted_keys_over_slot_reply_is_reported_with_its_generation(net: KvNet, shift: int) -> None:
    net.index(KEY, SLOT)
    reply = over_slot_reply(KEY, shift)
    out = net.send(STORAGE_PORT, reply)
    assert [p for p, _ in out] == [CLIENT_PORT]
    assert kvp_bytes(out[0][1]) == bytes(reply[UDP].payload), "the reply was changed"
    assert digests(net, 1) == [reported(KEY, shift, net.generations[KEY])]
    assert net.events("OVER_SLOT_REPLY") == 1
    assert net.events("FILL") == 0


def test_the_reply_leaves_exactly_as_an_unindexed_keys_does(net: KvNet) -> None:
    before = net.send(STORAGE_PORT, over_slot_reply(KEY))
    net.index(KEY, SLOT)
    after = net.send(STORAGE_PORT, over_slot_reply(KEY))
    assert after == before
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]


def test_an_unindexed_keys_over_slot_reply_is_not_reported(net: KvNet) -> None:
    net.index(KEY, SLOT)
    assert [p for p, _ in net.send(STORAGE_PORT, over_slot_reply(OTHER))] == [CLIENT_PORT]
    net.send(STORAGE_PORT, over_slot_reply(KEY))  # the barrier
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]
    assert net.events("OVER_SLOT_REPLY") == 1


def test_a_hosts_over_slot_reply_is_not_reported(net: KvNet) -> None:
    """A host may forge any reply: it must not make the controller drop an admission."""
    net.index(KEY, SLOT)
    net.send(CLIENT_PORT, over_slot_reply(KEY))
    assert net.drops("REPLY_FROM_HOST") == 1
    net.send(STORAGE_PORT, over_slot_reply(KEY))  # the barrier
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]


def test_a_slot_sized_reply_fills_and_is_not_reported(net: KvNet) -> None:
    net.index(KEY, SLOT)
    assert [p for p, _ in net.server_reply(KEY, value_chunk(4), version=3)] == [CLIENT_PORT]
    assert net.events("FILL") == 1
    net.send(STORAGE_PORT, over_slot_reply(KEY))  # the barrier
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]
    assert net.events("OVER_SLOT_REPLY") == 1


def test_an_upstream_switchs_hit_is_reported_as_a_storage_nodes(net: KvNet) -> None:
    """A FABRIC port is trusted like a storage node's: its HIT_SWITCH reply of a larger chunk is reported too."""
    net.index(KEY, SLOT)
    out = net.send(FABRIC_PORTS[0], over_slot_reply(KEY, status=Status.HIT_SWITCH))
    assert [p for p, _ in out] == [CLIENT_PORT]
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]


def test_a_miss_reply_is_not_reported(net: KvNet) -> None:
    net.index(KEY, SLOT)
    miss = KVP(opcode=Opcode.GET_REPLY, status=Status.MISS, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
               chunk_idx=KEY.chunk_idx, chunk_count=COUNT, chunk_shift=13, req_id=1)
    assert [p for p, _ in net.send(STORAGE_PORT, kvp_frame(miss, to_storage=False))] == [CLIENT_PORT]
    net.send(STORAGE_PORT, over_slot_reply(KEY))  # the barrier
    assert digests(net, 1) == [reported(KEY, 13, net.generations[KEY])]
