"""The span GET at the switch (docs/protocol.md, GET `aux`; docs/dataplane.md, "Coalescing"): a GET whose aux k > 1
asks for k consecutive chunks. The switch never answers one from its pool (it holds 128-byte chunks only), and
coalesces identical span GETs: one forwarded GET, every parked reader a copy of each of the k replies with its own
req_id + offset. Runs on every target of `conftest.target`, on test_kvswitch_coalesce's network of readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import KVP_MAX_GET_SPAN, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP
from kvtesting.kvnet import CLIENT_PORT, STORAGE_IP, STORAGE_PORT, KvNet, chunk_key, kvp_frame, value_chunk
from tests.dataplane.test_kvswitch_coalesce import (
    BATCH,
    KEY,
    A,
    C,
    CoalesceNet,
    D,
    Reader,
    assert_each_reader_served_once,
    checksums_ok,
    coal,  # noqa: F401 (the fixture)
    entry_lifetime_s,
    gets_to_storage,
    let_entries_expire,
    many_readers,
)

SPAN = 4
"""Chunks one span GET asks for in these tests."""


# ---- the span GET's packets ----------------------------------------------------------------------------------

CHUNK_BYTES = 8192
"""8 KiB chunks: a reader asks spans only of blocks whose chunks are larger than a slot."""
BLOCK_CHUNKS = 16
FIRST = chunk_key(tenant=7, prefix_hash=0x5BA0C0A1E5CE0001, chunk_idx=8)
"""The span's first chunk (aligned, as the client sends them): the span covers chunks 8 .. 8 + SPAN - 1."""


def chunk_value(chunk_idx: int) -> bytes:
    """Chunk `chunk_idx`'s 8 KiB, different for every chunk (a copy of the wrong reply shows)."""
    return bytes((chunk_idx * 31 + i) % 251 for i in range(CHUNK_BYTES))


def at(key: ChunkKey, offset: int) -> ChunkKey:
    return chunk_key(key.tenant, key.prefix_hash, (key.chunk_idx + offset) % (1 << 32))


@dataclass
class SpanNet:
    """test_kvswitch_coalesce's network, speaking span GETs of 8 KiB chunks and their storage node's replies."""

    coal: CoalesceNet

    def get(self, reader: Reader, req_id: int, *, span: int = SPAN, key: ChunkKey = FIRST,
            chunk_count: int = BLOCK_CHUNKS, frames: int | None = None, parks: bool = False,
            ) -> list[tuple[int, bytes]]:
        return self.coal.get(reader, req_id, key, aux=span, chunk_shift=13, chunk_count=chunk_count,
                             frames=frames, parks=parks)

    def reply(self, origin: Reader, req_id: int, offset: int, *, key: ChunkKey = FIRST,
              chunk_count: int = BLOCK_CHUNKS, status: int = Status.HIT_SERVER, port: int = STORAGE_PORT,
              frames: int | None = None) -> list[tuple[int, bytes]]:
        """The storage node's reply `offset` to `origin`'s span GET `req_id`: chunk + offset, req_id + offset, aux
        offset."""
        chunk = at(key, offset)
        return self.coal.reply(origin, (req_id + offset) % (1 << 32), chunk, version=3, status=status, port=port,
                               chunk_count=chunk_count, aux=offset, value=chunk_value(chunk.chunk_idx),
                               frames=frames)


@pytest.fixture
def span(coal: CoalesceNet) -> SpanNet:  # noqa: F811
    coal.configure()
    return SpanNet(coal)


def assert_offset_served(out: Sequence[tuple[int, bytes]], readers: dict[Reader, int], offset: int,
                         key: ChunkKey = FIRST, status: int = Status.HIT_SERVER) -> None:
    """Exactly one copy of reply `offset` per reader: on its port, to its MAC/IP/UDP port, with its req_id +
    offset, the chunk and its value unchanged."""
    chunk = at(key, offset)
    got = {}
    for port, data in out:
        frame = Ether(data)
        kvp = frame[KVP]
        reader = next((r for r in readers if (r.ip, r.udp_port) == (frame[IP].dst, frame[UDP].dport)), None)
        assert reader is not None, f"a reply for nobody waiting: {frame.summary()}"
        assert reader not in got, f"{reader.name} got reply {offset} twice"
        got[reader] = kvp.req_id
        assert (port, frame[Ether].dst) == (reader.port, reader.mac)
        assert (kvp.opcode, kvp.status, kvp.chunk_idx, kvp.aux) == (Opcode.GET_REPLY, status, chunk.chunk_idx,
                                                                    offset)
        if status == Status.HIT_SERVER:
            assert bytes(kvp.payload) == chunk_value(chunk.chunk_idx)
        assert frame[IP].src == STORAGE_IP and frame[IP].len == len(frame[IP])
        assert checksums_ok(frame), frame.show2(dump=True)
    assert got == {r: (req + offset) % (1 << 32) for r, req in readers.items()}


# ---- stage 1: a span GET is never answered from the pool ---------------------------------------------------

def test_a_span_get_of_a_pooled_chunk_goes_to_its_storage_node(net: KvNet) -> None:
    """A valid 128-byte chunk in the pool answers a single GET (aux 0 or 1: HIT_SWITCH); a span GET starting at it
    goes to the storage node unchanged: the pool cannot answer its other chunks."""
    net.index(KEY, slot=5)
    assert [p for p, _ in net.server_reply(KEY, value_chunk(1), version=3, frames=1)] == [CLIENT_PORT]
    for req_id, aux in ((10, 0), (11, 1)):
        single = pool_get(net, req_id, aux)
        assert [p for p, _ in single] == [CLIENT_PORT]
        assert Ether(single[0][1])[KVP].status == Status.HIT_SWITCH
    span = pool_get(net, 12, SPAN)
    assert [p for p, _ in span] == [STORAGE_PORT], "a span GET was answered from the pool"
    frame = Ether(span[0][1])
    assert (frame[KVP].opcode, frame[KVP].aux, frame[KVP].req_id) == (Opcode.GET, SPAN, 12)
    assert net.slot_hits(5, until=2) == 2


def test_a_span_get_beside_a_pending_single_get_is_forwarded(coal: CoalesceNet) -> None:  # noqa: F811
    """A span GET of a chunk whose single GET is pending is forwarded (it asks another question), and the single
    GET's waiters still get their reply."""
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    assert gets_to_storage(coal.get(D, 3, aux=SPAN, frames=1)) == 1, "a span GET parked on a single GET's entry"
    assert coal.event("COALESCED") == 1
    assert_each_reader_served_once(coal.reply(A, 1, frames=2), {A: 1, C: 2})
    # the span GET's first reply goes to its reader only
    assert_each_reader_served_once(coal.reply(D, 3, frames=1), {D: 3})
    assert coal.replicated() == 1


def pool_get(net: KvNet, req_id: int, aux: int) -> list[tuple[int, bytes]]:
    """The client's GET of KEY with `aux` (the span), and what the switch sends for it (one frame)."""
    kvp = KVP(opcode=Opcode.GET, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_idx=KEY.chunk_idx,
              chunk_count=4, req_id=req_id, aux=aux)
    return net.send(CLIENT_PORT, kvp_frame(kvp), frames=1)


# ---- stage 2: span coalescing ------------------------------------------------------------------------------

def test_identical_span_gets_share_one_get(span: SpanNet) -> None:
    """Two readers' identical span GETs cost the storage node one GET; each reader gets all SPAN chunks, each
    with its own req_id + offset (the origin's wraps past 2^32 - 1)."""
    readers = {A: 0xFFFFFFFE, C: 100}
    assert gets_to_storage(span.get(A, readers[A], frames=1)) == 1
    assert span.get(C, readers[C], parks=True) == []
    for offset in range(SPAN):
        assert_offset_served(span.reply(A, readers[A], offset, frames=2), readers, offset)
    events = span.coal.event
    assert (events("PENDING"), events("COALESCED"), events("REPLIED")) == (1, 1, 1)
    assert span.coal.replicated() == SPAN
    # the last offset freed the entry: the next span GET opens a new one, and its replies reach its reader only
    assert gets_to_storage(span.get(D, 7, frames=1)) == 1
    assert events("PENDING") == 2
    assert_offset_served(span.reply(D, 7, 0, frames=1), {D: 7}, 0)


def test_a_different_span_does_not_park(span: SpanNet) -> None:
    """A GET of the same first chunk asking another span (or one chunk) asks another question: forwarded."""
    assert gets_to_storage(span.get(A, 1, frames=1)) == 1
    assert gets_to_storage(span.get(C, 2, span=2, frames=1)) == 1, "a span-2 GET parked on a span-4 entry"
    assert gets_to_storage(span.get(D, 3, span=0, frames=1)) == 1, "a single GET parked on a span entry"
    assert (span.coal.event("COALESCED"), span.coal.event("COLLISION")) == (0, 2)
    for offset in range(SPAN):
        assert_offset_served(span.reply(A, 1, offset, frames=1), {A: 1}, offset)
    assert_offset_served(span.reply(C, 2, 0, frames=1), {C: 2}, 0)
    assert span.coal.replicated() == 0


def test_a_get_after_the_first_reply_is_forwarded(span: SpanNet) -> None:
    """Once reply 0 passed, a new waiter could never get it: the identical GET goes to the storage node, and the
    entry's later replies still serve only the readers parked before."""
    assert gets_to_storage(span.get(A, 1, frames=1)) == 1
    assert span.get(C, 20, parks=True) == []
    assert_offset_served(span.reply(A, 1, 0, frames=2), {A: 1, C: 20}, 0)
    assert gets_to_storage(span.get(D, 300, frames=1)) == 1, "a GET parked after the span's replies began"
    assert span.coal.event("LATE") == 1
    for offset in range(1, SPAN):
        assert_offset_served(span.reply(A, 1, offset, frames=2), {A: 1, C: 20}, offset)
    # D's own replies (its GET was forwarded) reach D only
    assert_offset_served(span.reply(D, 300, 0, frames=1), {D: 300}, 0)
    assert span.coal.replicated() == SPAN  # C's copy of each offset
    assert (span.coal.event("PENDING"), span.coal.event("COALESCED"), span.coal.event("REPLIED")) == (1, 1, 1)


def test_a_lost_last_reply_lets_the_entry_expire(coal: CoalesceNet) -> None:  # noqa: F811
    """The last reply is lost: the entry lives out its timeout (taking no new waiter), then the next GET opens a
    new one; the lost reply's late twin matches nothing."""
    timeout_s = entry_lifetime_s(coal.target)
    coal.configure(timeout_us=int(timeout_s * 1e6))
    span = SpanNet(coal)
    assert gets_to_storage(span.get(A, 1, frames=1)) == 1
    assert span.get(C, 20, parks=True) == []
    for offset in range(SPAN - 1):
        assert_offset_served(span.reply(A, 1, offset, frames=2), {A: 1, C: 20}, offset)
    let_entries_expire(coal.target, timeout_s)
    assert gets_to_storage(span.get(D, 300, frames=1)) == 1, "a reader stayed blocked behind a lost reply"
    assert (coal.event("EXPIRED"), coal.event("PENDING")) == (1, 2)
    assert span.get(C, 21, parks=True) == [], "a GET did not park on the reopened entry"
    assert_offset_served(span.reply(A, 1, SPAN - 1, frames=1), {A: 1}, SPAN - 1)
    for offset in range(SPAN):
        assert_offset_served(span.reply(D, 300, offset, frames=2), {D: 300, C: 21}, offset)
    assert coal.event("REPLIED") == 1


def test_a_clipped_span_ends_at_the_blocks_last_chunk(span: SpanNet) -> None:
    """A span past the block's end is answered up to its last chunk (chunk_count - 1): that reply frees the
    entry."""
    readers = {A: 1, C: 2}
    assert gets_to_storage(span.get(A, 1, chunk_count=10, frames=1)) == 1
    assert span.get(C, 2, chunk_count=10, parks=True) == []
    for offset in range(2):  # chunks 8 and 9 of 10
        assert_offset_served(span.reply(A, 1, offset, chunk_count=10, frames=2), readers, offset)
    assert span.coal.event("REPLIED") == 1
    assert gets_to_storage(span.get(D, 3, chunk_count=10, frames=1)) == 1
    assert span.coal.event("PENDING") == 2


def test_a_miss_frees_the_span_entry(span: SpanNet) -> None:
    """A MISS (the block is not stored) is the only reply of a span: every waiter gets it, and the entry is free."""
    readers = {A: 1, C: 2}
    assert gets_to_storage(span.get(A, 1, frames=1)) == 1
    assert span.get(C, 2, parks=True) == []
    assert_offset_served(span.reply(A, 1, 0, status=Status.MISS, frames=2), readers, 0, status=Status.MISS)
    assert span.coal.event("REPLIED") == 1
    assert gets_to_storage(span.get(D, 3, frames=1)) == 1
    assert span.coal.event("PENDING") == 2


@pytest.mark.parametrize("waiters", [BATCH + 2], ids=lambda n: f"{n} waiters")
def test_more_waiters_than_a_batch_get_every_offset(span: SpanNet, waiters: int) -> None:
    """Past 8 waiters every reply of the span is recirculated to serve the next batch, each copy with its
    reader's req_id + offset."""
    readers = many_readers(waiters + 1)
    req_ids = {r: 1000 + 10 * i for i, r in enumerate(readers)}
    assert gets_to_storage(span.get(readers[0], req_ids[readers[0]], frames=1)) == 1
    for r in readers[1:]:
        assert span.get(r, req_ids[r], parks=True) == []
    for offset in range(SPAN):
        out = span.reply(readers[0], req_ids[readers[0]], offset, frames=len(readers))
        assert_offset_served(out, req_ids, offset)
    batches = -(-waiters // BATCH)
    assert (span.coal.event("CARRIED"), span.coal.event("STALE")) == (SPAN * (batches - 1), 0)
    assert span.coal.replicated() == SPAN * waiters


def test_a_span_wider_than_the_maximum_is_never_coalesced(span: SpanNet) -> None:
    """aux > KVP_MAX_GET_SPAN (the storage node answers it ERR_MALFORMED): every such GET is forwarded."""
    assert gets_to_storage(span.get(A, 1, span=KVP_MAX_GET_SPAN + 1, frames=1)) == 1
    assert gets_to_storage(span.get(C, 2, span=KVP_MAX_GET_SPAN + 1, frames=1)) == 1
    assert (span.coal.event("PENDING"), span.coal.event("COALESCED")) == (0, 0)


def test_a_forged_reply_below_chunk_0_changes_nothing(span: SpanNet) -> None:
    """A reply whose aux exceeds its chunk_idx names no span (chunk_idx - aux would wrap to the top of the block):
    it matches no entry, even one whose first chunk is that wrapped value, from the storage port itself."""
    top = at(FIRST, -FIRST.chunk_idx - 2)  # chunk 2^32 - 2, the last of a block of 2^32 - 1 chunks
    count = (1 << 32) - 1
    readers = {A: 1, C: 2}
    assert gets_to_storage(span.get(A, 1, key=top, chunk_count=count, frames=1)) == 1
    assert span.get(C, 2, key=top, chunk_count=count, parks=True) == []
    # chunk 1, aux 3: 1 - 3 wraps to the entry's chunk, req_id 1 + 3 to its origin's
    forged = span.reply(A, 1, 3, key=top, chunk_count=count, frames=1)
    assert [(p, Ether(d)[KVP].chunk_idx) for p, d in forged] == [(A.port, 1)]
    assert span.coal.replicated() == 0
    # the honest reply (the span clipped to the block's last chunk) still serves both readers
    assert_offset_served(span.reply(A, 1, 0, key=top, chunk_count=count, frames=2), readers, 0, key=top)
    assert span.coal.event("REPLIED") == 1
