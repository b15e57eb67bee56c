"""Hot-key detection: a count-min sketch of GET misses; a hot key is reported at a trusted slot-sized reply of it
(the storage node's word that a slot can hold its chunk), one digest per hot key and epoch, reset by epoch."""

from __future__ import annotations

from kvtesting.kvnet import CLIENT_PORT, STORAGE_PORT, KvNet, chunk_key, value_chunk

HOT = chunk_key(tenant=3, prefix_hash=0xAAAA_BBBB_CCCC_DDDD, chunk_idx=2)
COLD = chunk_key(tenant=3, prefix_hash=0x1111_2222_3333_4444, chunk_idx=0)


def reply(net: KvNet, key, seed: int = 1) -> None:
    """The storage node's slot-sized reply of `key` (unindexed: forwarded to the client, not stored)."""
    assert [p for p, _ in net.server_reply(key, value_chunk(seed), version=1, frames=1)] == [CLIENT_PORT]


def digest_fields(net: KvNet, count: int | None = None) -> list[dict[str, int]]:
    """The digests that came; `count`: how many a correct switch sends (a switch process is waited on)."""
    msgs = net.digests(count)
    assert {m.name for m in msgs} <= {"hot_key_digest_t"}
    return [dict(m.fields) for m in msgs]


def test_hot_key_triggers_one_digest_at_its_reply(net: KvNet) -> None:
    net.sketch(hot_threshold=3, epoch=1)
    for i in range(3):
        assert [p for p, _ in net.get(HOT, req_id=i, frames=1)] == [STORAGE_PORT], "detection never changes forwarding"
    assert digest_fields(net) == [], "hot, but only its reply shows that a slot can hold it"
    reply(net, HOT)
    for i in range(3, 8):
        net.get(HOT, req_id=i, frames=1)
        reply(net, HOT)
    assert digest_fields(net, count=1) == [
        {"tenant": HOT.tenant, "prefix_hash": HOT.prefix_hash, "chunk_idx": HOT.chunk_idx, "estimate": 3}
    ]
    assert net.events("HOT_DIGEST") == 1


def test_key_below_threshold_is_not_reported(net: KvNet) -> None:
    net.sketch(hot_threshold=3, epoch=1)
    net.get(COLD, frames=1)
    net.get(COLD, frames=1)
    net.get(HOT, frames=1)
    reply(net, COLD)
    reply(net, HOT)
    assert digest_fields(net) == []


def test_sketch_off_by_default_sends_no_digest(net: KvNet) -> None:
    for _ in range(5):
        net.get(HOT, frames=1)
    reply(net, HOT)
    assert digest_fields(net) == []


def test_new_epoch_resets_counts_and_reports_again(net: KvNet) -> None:
    net.sketch(hot_threshold=2, epoch=1)
    net.get(HOT, frames=1)
    net.get(COLD, frames=1)
    net.get(HOT, frames=1)
    reply(net, HOT)
    assert [d["prefix_hash"] for d in digest_fields(net, count=1)] == [HOT.prefix_hash]

    net.sketch(hot_threshold=2, epoch=2)
    net.get(COLD, frames=1)  # COLD's single miss of epoch 1 no longer counts
    reply(net, COLD)
    assert digest_fields(net) == []
    net.get(HOT, frames=1)
    reply(net, HOT)
    assert digest_fields(net) == []
    net.get(HOT, frames=1)
    reply(net, HOT)
    assert digest_fields(net, count=1) == [
        {"tenant": HOT.tenant, "prefix_hash": HOT.prefix_hash, "chunk_idx": HOT.chunk_idx, "estimate": 2}
    ]


def test_hits_do_not_count_towards_hotness(net: KvNet) -> None:
    net.index(HOT, 9)
    net.server_reply(HOT, value_chunk(3), version=1, frames=1)
    net.sketch(hot_threshold=1, epoch=1)
    for _ in range(4):
        assert [p for p, _ in net.get(HOT, frames=1)] == [CLIENT_PORT]
    assert digest_fields(net) == []


def test_many_keys_each_reported_once(net: KvNet) -> None:
    net.sketch(hot_threshold=2, epoch=7)
    keys = [chunk_key(tenant=1, prefix_hash=0x9E3779B97F4A7C15 * (i + 1) % (1 << 64), chunk_idx=i % 3)
            for i in range(12)]
    for _round in range(3):
        for k in keys:
            net.get(k, frames=1)
    for k in keys:
        reply(net, k)
    reported = sorted((d["prefix_hash"], d["chunk_idx"]) for d in digest_fields(net, count=len(keys)))
    assert reported == sorted((k.prefix_hash, k.chunk_idx) for k in keys)


def test_misses_of_chunks_larger_than_a_slot_are_not_counted(net: KvNet) -> None:
    """A slot holds a 128-byte chunk (chunk_shift KVP_SLOT_SHIFT = 7): a GET for an 8 KiB chunk can never be
    served from one, so it never makes its key hot (the controller would admit what it cannot serve)."""
    from kvpool.constants import Opcode
    from kvpool.protocol import KVP
    from kvtesting.kvnet import kvp_frame

    net.sketch(hot_threshold=2, epoch=1)
    for i in range(4):
        kvp = KVP(opcode=Opcode.GET, tenant=HOT.tenant, prefix_hash=HOT.prefix_hash, chunk_idx=HOT.chunk_idx,
                  chunk_count=4, chunk_shift=13, req_id=i)
        assert [p for p, _ in net.send(CLIENT_PORT, kvp_frame(kvp), frames=1)] == [STORAGE_PORT]
    reply(net, HOT)
    assert digest_fields(net) == []
    net.get(HOT, frames=1)
    net.get(HOT, frames=1)  # the same key's slot-sized chunks still count, from zero
    reply(net, HOT)
    assert [d["estimate"] for d in digest_fields(net, count=1)] == [2]
