"""The storage node's protocol, message by message (`StorageNode.handle`, no sockets).

Tests taking `make_node` run on every storage backend (conftest); the others are the memory backend's tiers."""

from __future__ import annotations

import random
import zlib

import pytest

from kvpool.constants import KVP_HEADER_LEN, KVP_MAX_GET_SPAN, Flag, Opcode, Status, Tier, tier_bitmap
from kvpool.keys import ChunkKey
from kvpool.server import StorageNode, StorageOptions, span_of
from kvpool.wire import Header, Reason, encode


def node(capacity: int = 1 << 20, disk=None) -> StorageNode:
    return StorageNode(StorageOptions(capacity=capacity, disk=disk))


def put(n: StorageNode, ph: int, value: bytes, version: int, idx: int = 0, count: int = 1) -> Header:
    return Header.unpack(n.handle(encode(Header(Opcode.PUT, req_id=1, prefix_hash=ph, chunk_idx=idx,
                                                chunk_count=count, version=version), value)))


def request(n: StorageNode, opcode: Opcode, ph: int, idx: int = 0, **fields) -> tuple[Header, bytes]:
    reply = n.handle(Header(opcode, req_id=7, prefix_hash=ph, chunk_idx=idx, chunk_count=idx + 1, **fields).pack())
    return Header.unpack(reply), reply[KVP_HEADER_LEN:]


def test_put_then_get_returns_the_chunk_as_hit_server(make_node):
    n = make_node()
    ack = put(n, 0xAA, b"value", 3)
    assert (ack.opcode, ack.status, ack.version) == (Opcode.PUT_ACK, Status.OK, 3)
    reply, value = request(n, Opcode.GET, 0xAA)
    assert (reply.opcode, reply.status, reply.version, reply.value_len) == (Opcode.GET_REPLY, Status.HIT_SERVER, 3, 5)
    assert reply.flags == Flag.VALUE and value[:5] == b"value" and len(value) == 128
    assert reply.req_id == 7 and reply.prefix_hash == 0xAA


def test_get_asking_for_a_newer_version_than_stored_is_a_miss_naming_the_stored_one(make_node):
    n = make_node()
    put(n, 0xAA, b"v3", 3)
    reply, value = request(n, Opcode.GET, 0xAA, version=4)
    assert (reply.status, reply.version, value) == (Status.MISS, 3, b"")
    assert request(n, Opcode.GET, 0xAA, version=2)[0].status == Status.HIT_SERVER


def test_get_of_unknown_key_is_a_miss_without_value(make_node):
    reply, value = request(make_node(), Opcode.GET, 0xBB)
    assert reply.status == Status.MISS and value == b"" and not reply.flags & Flag.VALUE


def test_tenants_do_not_share_blocks(make_node):
    n = make_node()
    put(n, 0xAA, b"t0", 1)
    reply = Header.unpack(n.handle(Header(Opcode.GET, tenant=1, prefix_hash=0xAA).pack()))
    assert reply.status == Status.MISS


@pytest.mark.parametrize(("version", "status"), [(1, Status.ERR_STALE), (2, Status.ERR_CONFLICT)])
def test_write_not_newer_than_stored_is_refused_and_not_applied(make_node, version, status):
    # docs/protocol.md, *Atomic blocks*: the same version with other bytes is ERR_CONFLICT now (it was ERR_STALE).
    n = make_node()
    put(n, 0xAA, b"new", 2)
    ack = put(n, 0xAA, b"old", version)
    assert (ack.status, ack.version) == (status, 2)
    assert request(n, Opcode.GET, 0xAA)[1][:3] == b"new"


def test_bad_checksum_is_refused(make_node):
    n = make_node()
    data = bytearray(encode(Header(Opcode.PUT, prefix_hash=1, version=1), b"abc"))
    data[-1] ^= 0xFF
    assert Header.unpack(n.handle(bytes(data))).status == Status.ERR_CHECKSUM
    assert request(n, Opcode.GET, 1)[0].status == Status.MISS


def test_dram_full_refuses_new_chunks_but_accepts_overwrites():
    n = node(capacity=2 * 128)
    assert put(n, 1, b"a", 1).status == Status.OK and put(n, 2, b"b", 1).status == Status.OK
    assert put(n, 3, b"c", 1).status == Status.ERR_FULL
    assert put(n, 1, b"a2", 2).status == Status.OK
    assert n.backend.dram_used == 256


def test_with_a_disk_tier_overflow_goes_to_disk(tmp_path):
    n = node(capacity=128, disk=tmp_path)
    put(n, 1, b"dram", 1)
    assert put(n, 2, b"disk", 1).status == Status.OK
    assert n.backend.chunks[ChunkKey(0, 2, 0)].tier == Tier.STORAGE_DISK
    assert request(n, Opcode.GET, 2)[1][:4] == b"disk"


def test_disk_chunks_survive_a_restart(tmp_path):
    first = node(capacity=0, disk=tmp_path)
    put(first, 5, b"persisted", 4)
    first.close()
    second = node(capacity=0, disk=tmp_path)
    reply, value = request(second, Opcode.GET, 5)
    assert (reply.status, reply.version, value[:9]) == (Status.HIT_SERVER, 4, b"persisted")


def test_tier_move_to_disk_and_back_keeps_the_value(tmp_path):
    n = node(disk=tmp_path)
    put(n, 9, b"moving", 1)
    reply, _ = request(n, Opcode.TIER_MOVE, 9, aux=Tier.STORAGE_DISK | 1500 << 8)
    assert (reply.opcode, reply.status, reply.aux) == (Opcode.TIER_MOVE_ACK, Status.OK, Tier.STORAGE_DISK)
    assert n.backend.dram_used == 0 and n.backend.chunks[ChunkKey(0, 9, 0)].score == 1.5
    assert request(n, Opcode.GET, 9)[1][:6] == b"moving"
    reply, _ = request(n, Opcode.TIER_MOVE, 9, aux=Tier.STORAGE_DRAM)
    assert reply.aux == Tier.STORAGE_DRAM and n.backend.dram_used == 128


def test_tier_move_to_the_same_tier_records_the_score():
    n = node()
    put(n, 9, b"x", 1)
    reply, _ = request(n, Opcode.TIER_MOVE, 9, aux=Tier.STORAGE_DRAM | 250 << 8)
    assert reply.status == Status.OK and n.backend.chunks[ChunkKey(0, 9, 0)].score == 0.25


def test_tier_move_to_absent_drops_the_chunk(make_node):
    n = make_node()
    put(n, 9, b"x", 1)
    assert request(n, Opcode.TIER_MOVE, 9, aux=Tier.ABSENT)[0].status == Status.OK
    assert request(n, Opcode.GET, 9)[0].status == Status.MISS and request(n, Opcode.STAT, 9)[0].status == Status.MISS


@pytest.mark.parametrize(("aux", "status"), [(Tier.STORAGE_DISK, Status.ERR_DENIED), (Tier.SWITCH, Status.ERR_DENIED),
                                             (0x77, Status.ERR_MALFORMED)])
def test_tier_move_to_a_tier_the_node_lacks_is_refused(aux, status):
    n = node()
    put(n, 9, b"x", 1)
    assert request(n, Opcode.TIER_MOVE, 9, aux=aux)[0].status == status
    assert n.backend.chunks[ChunkKey(0, 9, 0)].tier == Tier.STORAGE_DRAM


def test_tier_move_of_unknown_key_is_a_miss(make_node):
    assert request(make_node(), Opcode.TIER_MOVE, 1, aux=Tier.STORAGE_DRAM)[0].status == Status.MISS


def test_stat_counts_every_get_of_the_key(make_node):
    n = make_node()
    put(n, 1, b"x", 1)
    for _ in range(3):
        request(n, Opcode.GET, 1)
    request(n, Opcode.GET, 2)
    reply, _ = request(n, Opcode.STAT, 1)
    assert (reply.opcode, reply.status, reply.aux) == (Opcode.STAT_REPLY, Status.OK, 3)
    assert request(n, Opcode.STAT, 2)[0].aux == 1


def test_lookup_meta_without_controller_reports_the_local_tier(make_node):
    n = make_node()
    put(n, 1, b"x", 6)
    reply, _ = request(n, Opcode.LOOKUP_META, 1)
    assert (reply.opcode, reply.aux, reply.version) == (Opcode.LOOKUP_META_REPLY, tier_bitmap({Tier.STORAGE_DRAM}), 6)


def test_slot_messages_are_for_the_switch(make_node):
    reply = Header.unpack(make_node().handle(Header(Opcode.SLOT_READ, aux=3).pack()))
    assert (reply.opcode, reply.status) == (Opcode.SLOT_READ_REPLY, Status.ERR_DENIED)


def test_replies_are_never_answered(make_node):
    n = make_node()
    assert n.handle(Header(Opcode.GET_REPLY, status=Status.HIT_SERVER).pack()) is None
    assert n.handle(Header(Opcode.PUT_ACK, chunk_count=0).pack()) is None


@pytest.mark.parametrize(("data", "reason"), [
    (Header(Opcode.GET, req_id=5, chunk_count=0).pack(), Reason.ZERO_CHUNK_COUNT),
    (Header(Opcode.PUT, req_id=5, version=1).pack(), Reason.VALUE_MISSING),
    (Header(0x66, req_id=5).pack(), Reason.UNKNOWN_OP),
    (Header(Opcode.GET, req_id=5).pack()[:20], Reason.SHORT_HEADER),
])
def test_malformed_request_is_answered_with_its_error_and_counted(make_node, data, reason):
    n = make_node()
    reply = Header.unpack(n.handle(data))
    assert (reply.status, reply.req_id) == (reason.status, 5)
    assert n.counters[f"malformed.{reason.value}"] == 1
    assert n.backend.chunk(ChunkKey(0, 0, 0)) is None


@pytest.mark.parametrize("data", [b"", b"K", b"KV\x01", b"\x00" * 36, b"GET / HTTP/1.0\r\n" * 4])
def test_datagrams_without_magic_or_req_id_get_no_answer(data):
    assert node().handle(data) is None


def test_two_thousand_random_datagrams_neither_crash_nor_corrupt_the_node(make_node):
    rng = random.Random(7420)
    n = make_node(capacity=64 * 128)
    put(n, 0xC0FFEE, b"survivor", 1)
    templates = [Header(op, prefix_hash=rng.getrandbits(64)).pack() for op in Opcode]
    for _ in range(2000):
        kind = rng.random()
        if kind < 0.3:
            data = rng.randbytes(rng.randrange(0, 200))
        else:  # a real header with random bytes flipped: reaches the deeper code paths
            data = bytearray(rng.choice(templates) + rng.randbytes(rng.choice([0, 64, 128])))
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(2, len(data))] = rng.randrange(256)
            data = bytes(data)
        reply = n.handle(data)
        assert reply is None or len(reply) in (KVP_HEADER_LEN, KVP_HEADER_LEN + 128)
    reply, value = request(n, Opcode.GET, 0xC0FFEE)
    assert reply.status == Status.HIT_SERVER and value[:8] == b"survivor"
    assert sum(v for k, v in n.counters.items() if k.startswith("malformed.")) > 100


def test_tier_move_to_absent_frees_the_dram_it_held():
    n = node()
    put(n, 9, b"x", 1)
    request(n, Opcode.TIER_MOVE, 9, aux=Tier.ABSENT)
    assert n.backend.dram_used == 0


# ---- overload: a bounded queue, BUSY instead of silent loss ----------------------------------------------

def _get(ph: int, idx: int, req_id: int) -> bytes:
    return Header(Opcode.GET, req_id=req_id, prefix_hash=ph, chunk_idx=idx, chunk_count=idx + 1).pack()


def test_a_batch_within_the_queue_limit_is_served_whole():
    n = StorageNode(StorageOptions(queue_limit=8))
    put(n, 1, b"v", 1)
    out = n.receive_batch([(_get(1, 0, i), ("10.0.0.1", 4000)) for i in range(8)])
    assert [Header.unpack(d.data).status for d in out] == [Status.HIT_SERVER] * 8
    assert n.counters["shed.busy"] == 0


def test_gets_over_the_queue_limit_are_answered_busy_without_a_value_and_nothing_is_lost():
    n = StorageNode(StorageOptions(queue_limit=4))
    put(n, 1, b"v", 1)
    batch = [(_get(1, 0, i), ("10.0.0.1", 4000)) for i in range(10)]
    out = [Header.unpack(d.data) for d in n.receive_batch(batch)]
    assert len(out) == 10, "every request gets an answer"
    assert [h.status for h in out] == [Status.HIT_SERVER] * 4 + [Status.BUSY] * 6  # the newest are shed
    busy = [h for h in out if h.status == Status.BUSY]
    assert all(h.opcode == Opcode.GET_REPLY and h.value_len == 0 and not h.flags & Flag.VALUE for h in busy)
    assert [h.req_id for h in busy] == list(range(4, 10)), "each BUSY echoes its request"
    assert n.counters["shed.busy"] == 6 and n.gets_of(ChunkKey(0, 1, 0)) == 4, "a shed GET is not served"


def test_shedding_is_fair_between_sources():
    n = StorageNode(StorageOptions(queue_limit=12))
    put(n, 1, b"v", 1)
    heavy = [(_get(1, 0, i), ("10.0.0.1", 4000)) for i in range(20)]
    light = [(_get(1, 0, 100 + i), ("10.0.0.2", 4000)) for i in range(3)]
    medium = [(_get(1, 0, 200 + i), ("10.0.0.3", 4000)) for i in range(6)]
    out = n.receive_batch(heavy[:10] + light + medium + heavy[10:])
    served: dict[str, int] = {}
    for d in out:
        if Header.unpack(d.data).status == Status.HIT_SERVER:
            served[d.to[0]] = served.get(d.to[0], 0) + 1
    assert served == {"10.0.0.1": 4, "10.0.0.2": 3, "10.0.0.3": 4}  # light keeps all, the rest share equally


def test_puts_over_the_limit_are_answered_busy_and_nothing_is_staged():
    n = StorageNode(StorageOptions(queue_limit=1))
    chunks = [encode(Header(Opcode.PUT, req_id=i, prefix_hash=5, chunk_idx=i, chunk_count=3, version=1), b"x")
              for i in range(3)]
    out = [Header.unpack(d.data) for d in n.receive_batch([(c, ("10.0.0.1", 4000)) for c in chunks])]
    assert [h.status for h in out] == [Status.STAGED, Status.BUSY, Status.BUSY]
    assert n.staging.bytes == KVP_HEADER_LEN + 128


def test_control_metadata_and_malformed_datagrams_are_never_shed():
    n = StorageNode(StorageOptions(queue_limit=1))
    put(n, 1, b"v", 1)
    stat = Header(Opcode.STAT, req_id=1, prefix_hash=1).pack()
    bad = Header(Opcode.GET, req_id=2, prefix_hash=1, chunk_shift=3).pack()  # chunk_shift out of range
    batch = [(stat, ("10.0.0.1", 1)), (stat, ("10.0.0.1", 1)), (bytes(bad), ("10.0.0.1", 1)),
             (b"\x00" * 3, ("10.0.0.1", 1))]
    statuses = [Header.unpack(d.data).status for d in n.receive_batch(batch)]
    assert Status.BUSY not in statuses and statuses[:2] == [Status.OK, Status.OK]


def test_random_datagrams_in_an_overloaded_batch_neither_crash_nor_shed_anything_unanswerable():
    rng = random.Random(7)
    n = StorageNode(StorageOptions(queue_limit=16))
    put(n, 1, b"v", 1)
    batch = []
    for i in range(400):
        data = bytearray(_get(1, 0, i))
        for _ in range(rng.randrange(4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        batch.append((bytes(data[:rng.randrange(len(data) + 1)] if rng.random() < 0.2 else data),
                      (f"10.0.0.{rng.randrange(1, 5)}", 4000)))
    for d in n.receive_batch(batch):
        h = Header.unpack(d.data[:KVP_HEADER_LEN].ljust(KVP_HEADER_LEN, b"\0"))
        assert h.status != Status.BUSY or h.opcode in (Opcode.GET_REPLY, Opcode.PUT_ACK)


# ---- the hot path's one unpack: `wire.checked` hands the node the header `check` validated ----------------

_VALID_GET = Header(Opcode.GET, tenant=3, req_id=9, prefix_hash=0xAB, chunk_idx=2, chunk_count=4).pack()


@pytest.mark.parametrize(("datagram", "reason"), [
    (_VALID_GET, None),
    (encode(Header(Opcode.PUT, chunk_count=1), b"v"), None),
    (b"KV", Reason.SHORT_HEADER),
    (b"\x00\x00\x02" + bytes(41), Reason.NOT_KVP),
    (_VALID_GET[:2] + b"\x01" + _VALID_GET[3:], Reason.BAD_VERSION),
    (_VALID_GET[:20], Reason.SHORT_HEADER),
    (Header(0x7F).pack(), Reason.UNKNOWN_OP),
    (Header(Opcode.GET, chunk_shift=14).pack(), Reason.BAD_CHUNK_SIZE),
    (Header(Opcode.GET_REPLY, flags=Flag.VALUE).pack(), Reason.VALUE_TRUNCATED),
    (Header(Opcode.PUT).pack(), Reason.VALUE_MISSING),
    (Header(Opcode.GET, chunk_count=0).pack(), Reason.ZERO_CHUNK_COUNT),
    (Header(Opcode.GET, chunk_idx=4, chunk_count=4).pack(), Reason.CHUNK_IDX_RANGE),
    (Header(Opcode.GET, value_len=129).pack(), Reason.VALUE_LEN_RANGE),
])
def test_checked_returns_the_valid_header_or_the_reason_check_gives(datagram, reason):
    from kvpool.wire import check, checked

    verdict = checked(datagram)
    assert check(datagram) is reason
    if reason is None:
        assert verdict == Header.unpack(datagram), "the header the node then handles, unpacked once"
    else:
        assert verdict is reason


def test_a_malformed_datagram_is_refused_with_its_reason_counted():
    node = StorageNode(StorageOptions())
    out = node.receive(Header(Opcode.GET, chunk_idx=4, chunk_count=4).pack(), ("10.0.0.1", 40000))
    assert len(out) == 1 and Header.unpack(out[0].data).status == Status.ERR_MALFORMED
    assert node.counters["malformed.chunk_idx_range"] == 1 and node.counters["GET"] == 0


# ---- span GETs: `aux` = k chunks from chunk_idx, one reply each (docs/protocol.md, *Span GETs*) ----------

SPAN_PEER = ("10.0.0.7", 4100)


def put_block(n: StorageNode, ph: int, count: int, version: int = 1, chunk_len: int = 1024) -> None:
    """Commit a block of `count` chunks whose chunk i holds bytes([i]) * 100."""
    for i in range(count):
        n.receive(encode(Header(Opcode.PUT, req_id=i, prefix_hash=ph, chunk_idx=i, chunk_count=count, version=version,
                                chunk_shift=chunk_len.bit_length() - 1), bytes([i]) * 100), ("10.0.0.1", 5000))


def span_get(ph: int, idx: int, count: int, span: int, req_id: int = 1000, **fields) -> bytes:
    return Header(Opcode.GET, req_id=req_id, prefix_hash=ph, chunk_idx=idx, chunk_count=count, chunk_shift=10,
                  aux=span, **fields).pack()


def replies(n: StorageNode, data: bytes) -> list[tuple[Header, bytes]]:
    out = n.receive(data, SPAN_PEER)
    assert all(d.to == SPAN_PEER for d in out)
    return [(Header.unpack(d.data), d.data[KVP_HEADER_LEN:]) for d in out]


def test_a_span_answers_each_chunk_of_the_stored_block_clipped_at_its_end(make_node):
    n = make_node()
    put_block(n, 0x5A, 20)
    out = replies(n, span_get(0x5A, 16, 20, 8))
    assert [(h.chunk_idx, h.req_id, h.aux) for h, _ in out] == [(16 + i, 1000 + i, i) for i in range(4)]
    for h, value in out:
        assert (h.opcode, h.status, h.flags, h.chunk_count, h.version, h.value_len) == (
            Opcode.GET_REPLY, Status.HIT_SERVER, Flag.VALUE, 20, 1, 100)
        assert value[:100] == bytes([h.chunk_idx]) * 100 and len(value) == 1024
        assert h.value_csum == zlib.crc32(value)
    assert n.counters["status.HIT_SERVER"] == 4 and n.counters["GET"] == 1


def test_each_chunk_of_a_span_is_answered_as_its_single_get_would_be(make_node):
    n = make_node()
    put_block(n, 0x5B, 12)
    span = replies(n, span_get(0x5B, 2, 12, 8))
    singles = [replies(n, span_get(0x5B, 2 + i, 12, 0, req_id=1000 + i))[0] for i in range(8)]
    assert [(h.replace(aux=0), v) for h, v in span] == [(h, v) for h, v in singles]


@pytest.mark.parametrize("span", [0, 1])
def test_span_0_and_1_answer_one_chunk_with_aux_0(make_node, span):
    n = make_node()
    put_block(n, 0x5C, 8)
    [(h, value)] = replies(n, span_get(0x5C, 3, 8, span))
    assert (h.status, h.chunk_idx, h.req_id, h.aux, value[:1]) == (Status.HIT_SERVER, 3, 1000, 0, b"\x03")
    assert n.counters["get.span"] == 0


def test_the_req_ids_of_a_span_wrap_at_2_to_the_32(make_node):
    n = make_node()
    put_block(n, 0x5D, 4)
    out = replies(n, span_get(0x5D, 0, 4, 4, req_id=0xFFFFFFFE))
    assert [(h.req_id, h.aux) for h, _ in out] == [(0xFFFFFFFE, 0), (0xFFFFFFFF, 1), (0, 2), (1, 3)]


@pytest.mark.parametrize(("ph", "version", "stored_version"), [(0x77, 0, 0), (0x5E, 3, 2)])
def test_a_span_of_a_block_not_stored_or_older_than_asked_is_one_miss(make_node, ph, version, stored_version):
    n = make_node()
    put_block(n, 0x5E, 8, version=2)
    [(h, value)] = replies(n, span_get(ph, 0, 8, 8, version=version))
    assert (h.status, h.req_id, h.chunk_idx, h.aux, h.version, value) == (Status.MISS, 1000, 0, 0, stored_version, b"")


def test_a_span_past_the_blocks_end_is_one_miss(make_node):
    n = make_node()
    put_block(n, 0x5F, 4)
    [(h, _)] = replies(n, span_get(0x5F, 6, 10, 4))  # the reader thinks the block has 10 chunks
    assert (h.status, h.chunk_idx, h.aux) == (Status.MISS, 6, 0)


def test_a_span_over_the_limit_is_malformed_and_serves_nothing(make_node):
    n = make_node()
    put_block(n, 0x60, 20)
    [(h, value)] = replies(n, span_get(0x60, 0, 20, KVP_MAX_GET_SPAN + 1))
    assert (h.opcode, h.status, h.req_id, h.chunk_idx, h.aux, value) == (
        Opcode.GET_REPLY, Status.ERR_MALFORMED, 1000, 0, 0, b"")
    assert n.counters["malformed.get_span"] == 1 and n.counters["status.HIT_SERVER"] == 0 and not n.gets


def test_every_chunk_of_a_span_counts_for_stat(make_node):
    n = make_node()
    put_block(n, 0x61, 10)
    replies(n, span_get(0x61, 0, 10, 8))
    replies(n, span_get(0x61, 4, 10, 8))
    assert [n.gets_of(ChunkKey(0, 0x61, i)) for i in range(10)] == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1]
    assert request(n, Opcode.STAT, 0x61, idx=5)[0].aux == 2


def test_a_dropped_chunk_inside_a_span_is_its_own_miss_and_the_rest_are_served():
    n = node()
    put_block(n, 0x62, 6)
    request(n, Opcode.TIER_MOVE, 0x62, idx=2, aux=Tier.ABSENT)
    out = replies(n, span_get(0x62, 0, 6, 6))
    assert [(h.chunk_idx, h.aux, h.status) for h, _ in out] == [
        (i, i, Status.MISS if i == 2 else Status.HIT_SERVER) for i in range(6)]


def test_handle_gives_the_first_reply_of_a_span(make_node):
    n = make_node()
    put_block(n, 0x63, 8)
    reply = Header.unpack(n.handle(span_get(0x63, 0, 8, 8)))
    assert (reply.status, reply.chunk_idx, reply.req_id, reply.aux) == (Status.HIT_SERVER, 0, 1000, 0)


@pytest.mark.parametrize(("data", "weight"), [
    (span_get(1, 0, 20, 8), 8),
    (span_get(1, 16, 20, 8), 8),  # the most it may bring: the node clips at the stored block's end
    (span_get(1, 0, 20, KVP_MAX_GET_SPAN), KVP_MAX_GET_SPAN),
    (span_get(1, 0, 20, KVP_MAX_GET_SPAN + 1), 1),  # answered ERR_MALFORMED: one reply
    (span_get(1, 0, 20, 0xFFFFFFFF), 1),
    (span_get(1, 0, 20, 1), 1),
    (span_get(1, 25, 20, 8), 8),  # malformed (chunk_idx >= chunk_count), but not read so far: no harm
    (span_get(1, 0, 20, 8)[:40], 1),  # short
    (Header(Opcode.PUT, aux=8).pack(), 1),
    (Header(Opcode.STAT, aux=8).pack(), 1),
])
def test_span_of_weighs_a_span_get_by_its_span_and_anything_else_as_one(data, weight):
    assert span_of(data) == weight


def test_a_shed_span_is_answered_busy_per_chunk_and_weighs_its_chunks_in_the_limit():
    n = StorageNode(StorageOptions(queue_limit=10))
    put_block(n, 0x64, 20)
    spans = [(span_get(0x64, idx, 20, 8, req_id=100 * idx), ("10.0.0.1", 4000)) for idx in (0, 16)]
    singles = [(_get(0x64, i, 900 + i), ("10.0.0.2", 4000)) for i in range(2)]
    # weights: source .1 asks 8 + 8 chunks, source .2 asks 2; the limit of 10 leaves .1 a share of 8; the shed
    # span at chunk 16 of 20 is answered with 4 BUSYs (as far as its chunk_count says)
    out = [Header.unpack(d.data) for d in n.receive_batch([spans[0], singles[0], spans[1], singles[1]])]
    assert [(h.status, h.chunk_idx, h.req_id, h.aux) for h in out] == (
        [(Status.HIT_SERVER, i, i, i) for i in range(8)] + [(Status.HIT_SERVER, 0, 900, 0)]
        + [(Status.BUSY, 16 + i, 1600 + i, i) for i in range(4)] + [(Status.HIT_SERVER, 1, 901, 0)])
    assert all(h.opcode == Opcode.GET_REPLY and h.value_len == 0 for h in out if h.status == Status.BUSY)
    assert n.counters["shed.busy"] == 4 and n.gets_of(ChunkKey(0, 0x64, 16)) == 0


def test_a_batch_of_spans_within_the_limit_by_datagrams_but_over_it_by_chunks_is_shed():
    n = StorageNode(StorageOptions(queue_limit=16))
    put_block(n, 0x65, 16)
    batch = [(span_get(0x65, 0, 16, 16, req_id=i * 16), ("10.0.0.1", 4000)) for i in range(3)]
    statuses = [Header.unpack(d.data).status for d in n.receive_batch(batch)]
    assert statuses == [Status.HIT_SERVER] * 16 + [Status.BUSY] * 32
