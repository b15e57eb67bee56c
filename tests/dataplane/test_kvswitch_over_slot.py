"""Over-slot replies (p4src/over_slot.p4; docs/dataplane.md, "Over-slot replies"): a trusted GET_REPLY of an
indexed key whose chunk is larger than a slot sends one `over_slot_digest_t` (the key, the reply's chunk_shift,
the index entry's generation) and counts OVER_SLOT_REPLY; an unindexed key's, a host's or a slot-sized reply
sends none. Forwarding never changes. And the sketch reports a hot key only at a trusted slot-sized reply of it, so
the slot-sized GETs that readers of a cold block of larger chunks send for its chunk 0 never make it hot, however
many, while a small block's hot chunk is still reported. Runs on every target of `conftest.target`.

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
from kvtesting.kvnet import (
    CLIENT_PORT,
    FABRIC_PORTS,
    STORAGE_PORT,
    KvNet,
    chunk_key,
    kvp_frame,
    value_chunk,
)

DIGEST = "over_slot_digest_t"
HOT_DIGEST = "hot_key_digest_t"
KEY = chunk_key(tenant=5, prefix_hash=0x5000_0000_0000_5000, chunk_idx=0)
"""Chunk 0 of a block of 8 KiB chunks, admitted though no slot can hold it (a reader asked it slot-sized)."""
OTHER = chunk_key(tenant=5, prefix_hash=0x5000_0000_0000_6000, chunk_idx=0)
"""Another block's chunk 0, never indexed."""
SMALL = chunk_key(tenant=5, prefix_hash=0x5000_0000_0000_7000, chunk_idx=0)
"""Chunk 0 of a small block (128-byte chunks: a slot holds it)."""
READERS = 8
THRESHOLD = 3
SLOT = 17
COUNT = 2048
"""Chunks of a 16 MiB block of 8 KiB chunks."""


def over_slot_reply(key: ChunkKey, shift: int = 13, status: int = Status.HIT_SERVER, req_id: int = 1) -> Ether:
    """The storage node's reply carrying a `1 << shift`-byte chunk (to the client)."""
    kvp = KVP(opcode=Opcode.GET_REPLY, status=status, tenant=key.tenant, prefix_hash=key.prefix_hash,
              chunk_idx=key.chunk_idx, chunk_count=COUNT, chunk_shift=shift, version=3, req_id=req_id)
    payload = bytes((key.prefix_hash + i) & 0xFF for i in range(1 << shift))
    return kvp_frame(kvp / Raw(payload), to_storage=False)


def digests(net: KvNet, expected: int, name: str = DIGEST) -> list[dict[str, int]]:
    """The digests the switch sent so far, waiting (switch processes) until `expected` came; all named `name`."""
    target = net.target
    msgs = target.drain_digests_expecting(expected) if hasattr(target, "drain_digests_expecting") \
        else target.drain_digests()
    assert {m.name for m in msgs} <= {name}, msgs
    return [dict(m.fields) for m in msgs]


def discovery_get(key: ChunkKey, req_id: int) -> Ether:
    """A reader's GET of `key` asked slot-sized (it does not know the block's chunk size yet)."""
    return kvp_frame(KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
                         chunk_count=1, req_id=req_id))


def hot(key: ChunkKey, estimate: int) -> dict[str, int]:
    return {"tenant": key.tenant, "prefix_hash": key.prefix_hash, "chunk_idx": key.chunk_idx, "estimate": estimate}


def make_small_block_hot(net: KvNet) -> None:
    """SMALL's readers miss it THRESHOLD times and the storage node's slot-sized reply passes: one hot digest."""
    for i in range(THRESHOLD):
        assert [p for p, _ in net.send(CLIENT_PORT, discovery_get(SMALL, 100 + i), frames=1)] == [STORAGE_PORT]
    assert [p for p, _ in net.server_reply(SMALL, value_chunk(7), version=1, frames=1)] == [CLIENT_PORT]


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


# ---- the sketch reports a key only at a trusted slot-sized reply ------------------------------------------------


def test_a_cold_blocks_slot_sized_discovery_gets_never_make_its_chunk_0_hot(net: KvNet) -> None:
    """Eight readers ask chunk 0 of a block of 8 KiB chunks slot-sized, all before the first reply, then every reply
    passes: no hot digest (nothing for the controller to admit, nothing to undo); a small block's chunk, hot in the
    same epoch, is reported (the barrier)."""
    net.sketch(hot_threshold=THRESHOLD, epoch=1)
    for i in range(READERS):
        assert [p for p, _ in net.send(CLIENT_PORT, discovery_get(KEY, i), frames=1)] == [STORAGE_PORT]
    for i in range(READERS):
        assert [p for p, _ in net.send(STORAGE_PORT, over_slot_reply(KEY, req_id=i), frames=1)] == [CLIENT_PORT]
    make_small_block_hot(net)
    assert digests(net, 1, HOT_DIGEST) == [hot(SMALL, THRESHOLD)]
    assert net.events("HOT_DIGEST") == 1 and net.events("OVER_SLOT_REPLY") == 0


def test_a_small_blocks_hot_chunk_is_reported_once_at_its_next_reply(net: KvNet) -> None:
    """A reply before the threshold reports nothing and costs nothing: the key is reported at the first reply after
    its estimate reached the threshold, once per epoch (a lost reply only defers it to the next)."""
    net.sketch(hot_threshold=THRESHOLD, epoch=1)
    net.send(CLIENT_PORT, discovery_get(SMALL, 1), frames=1)
    net.server_reply(SMALL, value_chunk(7), version=1, frames=1)  # estimate 1: not hot yet
    for i in range(2, THRESHOLD + 2):
        net.send(CLIENT_PORT, discovery_get(SMALL, i), frames=1)  # their replies are lost
    net.server_reply(SMALL, value_chunk(7), version=1, frames=1)
    net.server_reply(SMALL, value_chunk(7), version=1, frames=1)  # reported already this epoch
    make_small_block_hot(net)  # more misses and a reply of the same key: still nothing new
    net.sketch(hot_threshold=THRESHOLD, epoch=2)
    make_small_block_hot(net)  # the next epoch reports it again (the barrier)
    assert digests(net, 2, HOT_DIGEST) == [hot(SMALL, THRESHOLD + 1), hot(SMALL, THRESHOLD)]


def test_a_hosts_slot_sized_reply_never_reports_a_hot_key(net: KvNet) -> None:
    """A host may forge a slot-sized reply of any key: only a storage node's or an upstream switch's counts."""
    net.sketch(hot_threshold=THRESHOLD, epoch=1)
    for i in range(THRESHOLD):
        net.send(CLIENT_PORT, discovery_get(KEY, i), frames=1)
    net.server_reply(KEY, value_chunk(7), version=1, port=CLIENT_PORT, frames=1)
    assert net.drops("REPLY_FROM_HOST") == 1
    make_small_block_hot(net)  # the barrier
    assert digests(net, 1, HOT_DIGEST) == [hot(SMALL, THRESHOLD)]


def test_an_upstream_switchs_slot_sized_hit_reports_a_hot_key(net: KvNet) -> None:
    """In a fabric the readers' leaf sees the upstream switch's HIT_SWITCH reply: it reports the key as well."""
    net.sketch(hot_threshold=THRESHOLD, epoch=1)
    for i in range(THRESHOLD):
        net.send(CLIENT_PORT, discovery_get(SMALL, i), frames=1)
    out = net.server_reply(SMALL, value_chunk(7), version=1, port=FABRIC_PORTS[0], status=Status.HIT_SWITCH,
                           frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    assert digests(net, 1, HOT_DIGEST) == [hot(SMALL, THRESHOLD)]
