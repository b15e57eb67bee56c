"""Blocks are atomic to readers (docs/protocol.md, *Atomic blocks*): staged per writer, committed whole, acked at commit; resends idempotent.

Every test taking `make_node` runs on each storage backend (conftest: memory, mooncake-fake, mooncake).

Messages go through `StorageNode.receive` with explicit writer addresses, so two writers are two peers.
"""

from __future__ import annotations

import random
import zlib

import pytest

from kvpool.blocks import split
from kvpool.constants import KVP_HEADER_LEN, Opcode, Status
from kvpool.server import StorageNode, StorageOptions
from kvpool.wire import Header, encode

A, B, C = ("10.0.0.1", 5001), ("10.0.0.2", 5002), ("10.0.0.3", 5003)
READER = ("10.0.0.9", 6000)


def node(**options) -> StorageNode:
    return StorageNode(StorageOptions(**options))


def put_datagrams(ph: int, data: bytes, version: int, tenant: int = 0) -> list[bytes]:
    """The PUTs of a whole block, one per chunk, req_id = 100 + chunk index."""
    return [encode(Header(Opcode.PUT, tenant=tenant, req_id=100 + c.idx, prefix_hash=ph, chunk_idx=c.idx,
                          chunk_count=c.count, version=version), c.value[:c.value_len])
            for c in split(data, version)]


def acks(out) -> list[tuple[tuple[str, int], int, int, int]]:
    """(to, chunk_idx, status, version) of each PUT_ACK verdict sent (STAGED progress acks left out: they say
    nothing about the commit; `only_staged` checks them)."""
    result = []
    for d in out:
        h = Header.unpack(d.data)
        assert h.opcode == Opcode.PUT_ACK
        if h.status != Status.STAGED:
            result.append((d.to, h.chunk_idx, h.status, h.version))
    return result


def only_staged(out) -> bool:
    """The node answered nothing but STAGED progress (protocol v2; v1 answered nothing before the commit)."""
    return all(Header.unpack(d.data).status == Status.STAGED for d in out) and len(out) == 1


def read_block(n: StorageNode, ph: int, count: int) -> list[tuple[int, bytes] | None]:
    """(version, 128 value bytes) of every chunk as a GET sees it now (None: MISS)."""
    chunks = []
    for i in range(count):
        out = n.receive(Header(Opcode.GET, prefix_hash=ph, chunk_idx=i, chunk_count=count).pack(), READER)
        reply = Header.unpack(out[0].data)
        chunks.append((reply.version, out[0].data[KVP_HEADER_LEN:]) if reply.status == Status.HIT_SERVER else None)
    return chunks


def padded(data: bytes, count: int) -> list[bytes]:
    return [c.value for c in split(data, 1)][:count]


def test_chunks_are_invisible_until_the_last_one_arrives_then_all_acks_go_out_at_once(make_node):
    n = make_node()
    data = bytes(range(256)) * 2  # 4 chunks
    puts = put_datagrams(0xB10C, data, 1)
    for p in puts[:-1]:
        assert only_staged(n.receive(p, A))
        assert read_block(n, 0xB10C, 4) == [None] * 4
    out = n.receive(puts[-1], A)
    assert sorted(acks(out)) == [(A, i, Status.OK, 1) for i in range(4)]
    assert [Header.unpack(d.data).req_id for d in out] == [100, 101, 102, 103]  # each ack echoes its request
    assert [c[1] for c in read_block(n, 0xB10C, 4)] == padded(data, 4)


def test_chunks_arriving_in_any_order_commit_when_the_set_is_complete(make_node):
    n = make_node()
    puts = put_datagrams(1, bytes(500), 3)
    assert only_staged(n.receive(puts[3], A)) and only_staged(n.receive(puts[0], A))
    assert only_staged(n.receive(puts[2], A))
    assert len(n.receive(puts[1], A)) == 4


def test_a_resend_after_a_lost_ack_is_ok_and_changes_nothing(make_node):
    n = make_node()
    puts = put_datagrams(7, b"x" * 300, 2)
    for p in puts:
        n.receive(p, A)
    before = read_block(n, 7, 3)
    assert acks(n.receive(puts[1], A)) == [(A, 1, Status.OK, 2)]
    assert read_block(n, 7, 3) == before


def test_a_resend_is_ok_even_after_a_newer_version_replaced_the_block(make_node):
    n = make_node()
    for p in put_datagrams(7, b"old" * 100, 2):
        n.receive(p, A)
    for p in put_datagrams(7, b"new" * 100, 3):
        n.receive(p, B)
    assert acks(n.receive(put_datagrams(7, b"old" * 100, 2)[0], A)) == [(A, 0, Status.OK, 2)]
    # ... but only for the writer that committed it: anyone else sending v2 now is stale.
    assert acks(n.receive(put_datagrams(7, b"old" * 100, 2)[0], C)) == [(C, 0, Status.ERR_STALE, 3)]


@pytest.mark.parametrize(("version", "data", "status"), [
    (2, b"same" * 80, Status.OK),
    (2, b"diff" * 80, Status.ERR_CONFLICT),
    (1, b"same" * 80, Status.ERR_STALE),
])
def test_another_writer_of_the_committed_version_gets_ok_only_for_identical_bytes(make_node, version, data, status):
    n = make_node()
    for p in put_datagrams(5, b"same" * 80, 2):
        n.receive(p, A)
    out = []
    for p in put_datagrams(5, data, version):
        out += n.receive(p, B)
    assert {s for _, _, s, _ in acks(out)} == {status}
    assert all(v == 2 for _, _, _, v in acks(out))
    assert [c[1] for c in read_block(n, 5, 3)] == padded(b"same" * 80, 3)


def test_a_write_completing_after_another_committed_the_same_version_is_refused_whole(make_node):
    n = make_node()
    first, second = put_datagrams(9, b"A" * 384, 4), put_datagrams(9, b"B" * 384, 4)
    n.receive(second[0], B)  # B starts first ...
    for p in first:           # ... A completes first
        n.receive(p, A)
    out = n.receive(second[1], B) + n.receive(second[2], B)
    assert {s for _, _, s, _ in acks(out)} == {Status.ERR_CONFLICT}
    assert [c[1] for c in read_block(n, 9, 3)] == padded(b"A" * 384, 3)


def test_a_commit_settles_the_staged_writes_it_makes_impossible(make_node):
    n = make_node()
    n.receive(put_datagrams(9, b"old" * 100, 1)[0], B)  # B staged chunk 0 of v1
    n.receive(put_datagrams(9, b"C" * 300, 2)[1], C)     # C staged chunk 1 of v2, other bytes
    out = []
    for p in put_datagrams(9, b"A" * 300, 2):
        out += n.receive(p, A)
    assert sorted(acks(out)) == sorted([(A, i, Status.OK, 2) for i in range(3)]
                                       + [(B, 0, Status.ERR_STALE, 2), (C, 1, Status.ERR_CONFLICT, 2)])
    assert len(n.staging) == 0


def test_one_writer_sending_two_different_chunks_for_one_index_is_refused(make_node):
    n = make_node()
    one = put_datagrams(3, b"a" * 200, 1)
    other = put_datagrams(3, b"b" * 200, 1)
    assert only_staged(n.receive(one[0], A))
    assert acks(n.receive(other[0], A)) == [(A, 0, Status.ERR_CONFLICT, 1)]


def test_a_block_that_does_not_fit_in_dram_is_refused_whole_and_stores_nothing():
    n = node(capacity=3 * 128)  # the memory backend
    out = []
    for p in put_datagrams(4, bytes(4 * 128), 1):
        out += n.receive(p, A)
    assert {s for _, _, s, _ in acks(out)} == {Status.ERR_FULL} and len(acks(out)) == 4
    assert read_block(n, 4, 4) == [None] * 4 and n.backend.dram_used == 0


def test_a_shorter_new_version_drops_the_old_chunks_beyond_it(make_node):
    n = make_node()
    for p in put_datagrams(6, bytes(3 * 128), 1):
        n.receive(p, A)
    for p in put_datagrams(6, b"short", 2):
        n.receive(p, A)
    assert read_block(n, 6, 3)[1:] == [None, None]
    assert n.summary().get("dram_used", 128) == 128


def test_a_version_dropped_by_tier_move_cannot_be_written_again_with_other_bytes(make_node):
    n = make_node()
    for p in put_datagrams(8, b"A" * 200, 2):
        n.receive(p, A)
    for i in range(2):
        n.handle(Header(Opcode.TIER_MOVE, prefix_hash=8, chunk_idx=i, chunk_count=i + 1, aux=0).pack())
    out = []
    for p in put_datagrams(8, b"B" * 200, 2):
        out += n.receive(p, B)
    assert {s for _, _, s, _ in acks(out)} == {Status.ERR_STALE}


@pytest.mark.parametrize("seed", range(200))
def test_two_writers_of_one_version_never_leave_a_stitched_block(make_node, seed):
    """Randomised interleavings of two writers' chunks (resends included) and readers' GETs, checked against
    a model: readers see nothing, the old block, or exactly one writer's whole block, and that never changes
    once committed; the writer whose acks are all OK is the one whose bytes are stored."""
    rng = random.Random(seed)
    count = rng.randrange(2, 9)
    base = rng.randbytes(count * 128)
    old = rng.randbytes(count * 128)
    mine = {A: bytearray(base), B: bytearray(base)}
    for writer in (A, B):  # each writer differs from the common base in a few random chunks
        for i in rng.sample(range(count), rng.randrange(1, count + 1)):
            mine[writer][i * 128:(i + 1) * 128] = rng.randbytes(128)
    n = make_node()
    for p in put_datagrams(0x5EED, old, 1):
        n.receive(p, C)
    events = [(w, p) for w in (A, B) for p in put_datagrams(0x5EED, bytes(mine[w]), 2)]
    events += [(w, p) for w, p in rng.sample(events, rng.randrange(0, len(events)))]  # resends
    rng.shuffle(events)
    events += [(None, None)] * rng.randrange(1, 10)  # readers
    rng.shuffle(events)
    expected_versions = {tuple(padded(old, count)): 1}
    committed: tuple[bytes, ...] | None = None
    got: dict[tuple[str, int], dict[int, int]] = {A: {}, B: {}}
    for writer, datagram in events:
        if writer is not None:
            for to, idx, status, _ in acks(n.receive(datagram, writer)):
                got[to].setdefault(idx, status)  # the first verdict per chunk (a resend repeats it)
        seen = read_block(n, 0x5EED, count)
        assert all(c is not None for c in seen)
        block = tuple(c[1] for c in seen)
        versions = {c[0] for c in seen}
        assert len(versions) == 1, f"chunks of two versions: {versions}"
        if versions == {2}:
            assert block in (tuple(padded(bytes(mine[A]), count)), tuple(padded(bytes(mine[B]), count))), "stitched"
            assert committed in (None, block), "the committed version changed its bytes"
            committed = block
        else:
            assert {block: 1} == expected_versions
    winners = [w for w in (A, B) if len(got[w]) == count and set(got[w].values()) == {Status.OK}]
    assert committed is not None and len(winners) >= 1
    assert tuple(padded(bytes(mine[winners[0]]), count)) == committed
    for w in (A, B):  # every OK a writer got is true of what is stored
        for idx, status in got[w].items():
            same = bytes(mine[w][idx * 128:(idx + 1) * 128]) == committed[idx]
            assert status == (Status.OK if same else Status.ERR_CONFLICT), (w, idx, status)


def test_every_ack_of_a_commit_reports_a_checksum_the_node_serves(make_node):
    n = make_node()
    data = random.Random(3).randbytes(1000)
    out = []
    for p in put_datagrams(2, data, 1):
        out += n.receive(p, A)
    assert len(acks(out)) == 8 and len(out) == 8 + 7  # and 7 STAGED progress acks before the commit
    for version, value in read_block(n, 2, 8):
        assert version == 1 and len(value) == 128
    assert [zlib.crc32(v) for _, v in read_block(n, 2, 8)] == [c.csum for c in split(data, 1)]
