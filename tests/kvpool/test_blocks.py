"""Blocks split into chunks of one size (128 B .. 8 KiB) and come back whole only when every chunk agrees."""

from __future__ import annotations

import pytest

from kvpool.blocks import BlockError, Reassembly, chunk_count, split


@pytest.mark.parametrize(("size", "chunks"), [(0, 1), (1, 1), (128, 1), (129, 2), (256, 2), (32640, 255)])
def test_chunk_count_is_ceil_of_size_over_128(size, chunks):
    assert chunk_count(size) == chunks == len(split(bytes(size), 1))


def test_blocks_beyond_255_chunks_split_into_as_many_chunks_as_needed():
    # v1 refused a 256th chunk; v2's 32-bit chunk_count takes a 256 MiB block in 1 KiB chunks (262,144)
    assert len(split(bytes(255 * 128 + 1), 1)) == 256
    assert chunk_count(256 << 20, 1024) == 262_144


@pytest.mark.parametrize("chunk_len", [127, 100, 16384])
def test_a_chunk_size_the_protocol_does_not_allow_is_refused(chunk_len):
    with pytest.raises(BlockError, match="chunk size"):
        split(b"x", 1, chunk_len)


def test_a_reply_announcing_a_block_beyond_the_readers_limit_is_refused_before_allocating():
    c = split(b"x", 1)[0]
    with pytest.raises(BlockError, match="exceeds"):
        Reassembly(max_len=1 << 20).add(2**32 - 2, 2**32 - 1, c.value_len, c.value, 1, c.csum)


def test_chunks_of_two_sizes_are_not_mixed_in_one_block():
    small, large = split(bytes(3 * 128), 1, 128), split(bytes(3 * 1024), 1, 1024)  # 3 chunks each
    with pytest.raises(BlockError, match="chunk size"):
        reassemble([small[0], large[1]])


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


def test_the_chunk_size_for_a_path_mtu_is_the_largest_whose_datagram_fits():
    from kvpool.blocks import chunk_len_for_mtu

    assert chunk_len_for_mtu(1500) == 1024  # 20 + 8 + 44 + 1024 = 1096 <= 1500 < 2120
    assert chunk_len_for_mtu(9000) == 8192  # 8264 <= 9000
    assert chunk_len_for_mtu(8263) == 4096 and chunk_len_for_mtu(8264) == 8192
    assert chunk_len_for_mtu(576) == 256 and chunk_len_for_mtu(100) == 128  # nothing fits: the smallest


def test_the_default_chunk_keeps_small_blocks_switch_cacheable_and_sizes_large_ones_to_the_path():
    from kvpool.blocks import LARGE_CHUNK_LEN, SMALL_BLOCK_LEN, default_chunk_len

    assert default_chunk_len(SMALL_BLOCK_LEN, 9000) == 128
    assert default_chunk_len(SMALL_BLOCK_LEN + 1, 9000) == 8192
    assert default_chunk_len(SMALL_BLOCK_LEN + 1, 1500) == 1024
    assert default_chunk_len(SMALL_BLOCK_LEN + 1) == LARGE_CHUNK_LEN  # MTU unknown
