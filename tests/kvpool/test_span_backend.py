"""A span GET's chunks read from the backend in one call (`read_span`): the same answers as reading them one by one.

The memory backend keeps a row of chunks per block beside its dict of chunks (`read_span` reads the row); every
change of the dict (commits, overwrites with fewer chunks, TIER_MOVE to disk, to DRAM and to ABSENT) must reach the
row, or a span GET would serve what a single GET would not.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kvpool.backends.base import NewChunk, StoreUnavailable
from kvpool.backends.memory import MemoryBackend
from kvpool.constants import Status, Tier
from kvpool.keys import BlockKey, ChunkKey
from kvpool.server import StorageNode, StorageOptions
from tests.kvpool.test_server import put_block, replies, span_get


def _commit(backend: MemoryBackend, block: BlockKey, version: int, count: int, rng: random.Random) -> bool:
    """Commit a block of `count` random chunks; False when it did not fit (nothing changed)."""
    return backend.commit(block, version, [NewChunk(1024, 0, rng.randbytes(1024)) for _ in range(count)])


def _same_as_reads(backend: MemoryBackend, block: BlockKey, first: int, count: int) -> None:
    one_by_one = [backend.read(ChunkKey(block.tenant, block.prefix_hash, i)) for i in range(first, first + count)]
    spanned = backend.read_span(block, first, count)
    assert len(spanned) == count
    for got, want in zip(spanned, one_by_one, strict=True):
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert got[0] is want[0] and bytes(got[1]) == bytes(want[1])


@pytest.mark.parametrize("disk", [False, True])
def test_read_span_answers_as_reads_one_by_one_through_commits_drops_and_moves(tmp_path: Path, disk: bool):
    rng = random.Random(17)
    backend = MemoryBackend(64 * 1024, tmp_path / "disk" if disk else None)  # 64 chunks of DRAM (the rest on disk)
    blocks = [BlockKey(rng.randrange(3), rng.randrange(1 << 64)) for _ in range(4)]
    version, committed = 0, 0
    for _ in range(300):
        block = rng.choice(blocks)
        action = rng.random()
        state = backend.newest(block)
        if action < 0.3 or state is None:
            version += 1
            committed += _commit(backend, block, version, rng.randrange(1, 40), rng)  # more chunks or fewer
        elif action < 0.6:
            key = ChunkKey(block.tenant, block.prefix_hash, rng.randrange(state.chunk_count))
            if backend.chunk(key) is not None:
                target = rng.choice([Tier.ABSENT, Tier.STORAGE_DRAM, Tier.STORAGE_DISK])
                backend.move(key, target, 0.5)
        first = rng.randrange(45)
        _same_as_reads(backend, block, first, rng.randrange(1, 9))
        for other in blocks:
            _same_as_reads(backend, other, 0, 45)
    assert committed > 20, "the rows were put through commits, not only refusals"
    backend.close()
    if disk:  # chunks found on disk at start-up have rows too
        again = MemoryBackend(0, tmp_path / "disk")
        for block in blocks:
            if again.newest(block) is not None:
                _same_as_reads(again, block, 0, 45)
        assert any(again.read_span(block, 0, 45) != [None] * 45 for block in blocks)
        again.close()


def test_read_span_of_a_block_never_stored_is_all_none():
    assert MemoryBackend(1 << 20).read_span(BlockKey(0, 9), 3, 5) == [None] * 5


def test_a_span_asking_fewer_chunks_than_stored_serves_as_far_as_the_stored_block():
    """The reader named a smaller chunk_count than the stored block's: the span is clipped by the stored count (as
    before read_span), the chunks past the request's count read one by one."""
    n = StorageNode(StorageOptions())
    put_block(n, 0x70, 12)
    out = replies(n, span_get(0x70, 2, 4, 8))
    singles = [replies(n, span_get(0x70, 2 + i, 12, 0, req_id=1000 + i))[0] for i in range(8)]
    assert [(h.replace(aux=0, chunk_count=12), v) for h, v in out] == [(h, v) for h, v in singles]


class _Unavailable(MemoryBackend):
    """Chunk `down` cannot be told (its store did not answer): `read_span` of a range with it raises."""

    down = 3

    def read(self, key):
        if key.chunk == self.down:
            raise StoreUnavailable("replica down")
        return super().read(key)

    def read_span(self, block, first, count):
        if first <= self.down < first + count:
            raise StoreUnavailable("replica down")
        return super().read_span(block, first, count)


def test_a_span_the_backend_cannot_read_whole_is_answered_chunk_by_chunk():
    n = StorageNode(StorageOptions(), backend=_Unavailable(1 << 20))
    put_block(n, 0x71, 8)
    out = replies(n, span_get(0x71, 0, 8, 8))
    assert [(h.chunk_idx, h.aux, h.status) for h, _ in out] == [
        (i, i, Status.MISS if i == 3 else Status.HIT_SERVER) for i in range(8)], "chunk 3 alone is a miss"
    replies(n, span_get(0x71, 0, 8, 8))
    assert n.counters["store_unavailable"] == 2, "chunk 3, once per span GET"
    assert [n.gets_of(ChunkKey(0, 0x71, i)) for i in range(8)] == [2] * 8, "each chunk counted once per GET"
