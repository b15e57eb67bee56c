"""Blocks split into 128-byte chunks and come back whole only when every chunk agrees."""

from __future__ import annotations

import pytest

from kvpool.blocks import BlockError, Reassembly, chunk_count, split


@pytest.mark.parametrize(("size", "chunks"), [(0, 1), (1, 1), (128, 1), (129, 2), (256, 2), (32640, 255)])
def test_chunk_count_is_ceil_of_size_over_128(size, chunks):
    assert chunk_count(size) == chunks == len(split(bytes(size), 1))


def test_block_larger_than_255_chunks_is_refused():
    with pytest.raises(BlockError, match="exceeds"):
        split(bytes(255 * 128 + 1), 1)


def reassemble(chunks, version=0, order=None):
    assembly = Reassembly(version)
    for c in (chunks if order is None else [chunks[i] for i in order]):
        assembly.add(c.idx, c.count, c.value_len, c.value, c.version, c.csum)
    return assembly


@pytest.mark.parametrize("size", [0, 5, 128, 300])
def test_split_then_reassemble_in_any_order_gives_the_block_back(size):
    data = bytes((i * 7) % 251 for i in range(size))
    chunks = split(data, 3)
    assembly = reassemble(chunks, order=list(reversed(range(len(chunks)))))
    assert assembly.data() == data and assembly.version == 3


def test_missing_chunk_is_reported_and_blocks_data():
    chunks = split(bytes(300), 1)
    assembly = reassemble(chunks[:1] + chunks[2:])
    assert assembly.missing == [1]
    with pytest.raises(BlockError, match="missing chunks"):
        assembly.data()


def test_corrupted_chunk_fails_its_checksum():
    c = split(b"hello", 1)[0]
    with pytest.raises(BlockError, match="checksum"):
        Reassembly().add(c.idx, c.count, c.value_len, b"j" + c.value[1:], c.version, c.csum)


def test_chunks_of_two_versions_are_not_stitched_together():
    old, new = split(bytes(200), 1), split(bytes(200), 2)
    with pytest.raises(BlockError, match="mixed versions"):
        reassemble([old[0], new[1]])


def test_older_version_than_requested_is_refused():
    with pytest.raises(BlockError, match="older than the requested 5"):
        reassemble(split(b"x", 4), version=5)


def test_newer_version_than_requested_is_accepted():
    assert reassemble(split(b"x", 6), version=5).version == 6


def test_short_middle_chunk_is_refused():
    c = split(bytes(300), 1)[0]
    with pytest.raises(BlockError, match="value_len"):
        Reassembly().add(0, 3, 100, c.value, 1, c.csum)
