"""Chained BLAKE2b-64 prefix hashes, against vectors computed independently with OpenSSL.

Each vector was checked with OpenSSL 3's BLAKE2BMAC, e.g. for trace id 0:
    printf '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00' \\
      | openssl mac -macopt key:kvswitch-prefix-v1 -macopt size:8 BLAKE2BMAC      # A8B427C8B6605AF2
(parent 0 as 8 bytes big-endian, then the id as 8 bytes little-endian).
"""

from __future__ import annotations

import pytest

from kvpool.prefix_hash import BlockIdHasher, block_id_prefix_hashes, chain, token_prefix_hashes

VECTORS = [
    # (what, input bytes after the parent, parent, expected)
    ("trace id 0 as first block", bytes(8), 0, 0xA8B427C8B6605AF2),
    ("tokens 1,2,3 as first block", bytes.fromhex("010000000200000003000000"), 0, 0xC753F998038712C9),
    ("trace id 14 after id 0", bytes.fromhex("0e00000000000000"), 0xA8B427C8B6605AF2, 0x7622567C13842C1F),
]


@pytest.mark.parametrize(("what", "data", "parent", "expected"), VECTORS, ids=[v[0] for v in VECTORS])
def test_one_link_matches_openssl(what, data, parent, expected):
    assert chain(parent, data) == expected


def test_trace_ids_chain_through_their_prefix():
    assert block_id_prefix_hashes([0, 14]) == [0xA8B427C8B6605AF2, 0x7622567C13842C1F]


def test_token_prompt_is_cut_into_512_token_blocks_with_a_partial_last_one():
    tokens = list(range(1030))
    hashes = token_prefix_hashes(tokens)
    assert len(hashes) == 3
    assert hashes[0] == token_prefix_hashes(tokens[:512])[0]
    assert hashes[2] == chain(hashes[1], b"".join(t.to_bytes(4, "little") for t in tokens[1024:]))


def test_same_block_after_different_prefixes_hashes_differently():
    assert block_id_prefix_hashes([0, 7])[1] != block_id_prefix_hashes([1, 7])[1]
    assert token_prefix_hashes([1] * 512 + [2])[1] != token_prefix_hashes([3] * 512 + [2])[1]


def test_a_shared_prefix_gives_shared_hashes():
    a, b = block_id_prefix_hashes([0, 1, 2, 3]), block_id_prefix_hashes([0, 1, 9])
    assert a[:2] == b[:2] and a[2] != b[2]


def test_memoised_hasher_equals_the_plain_function():
    hasher = BlockIdHasher()
    for ids in ([0, 1, 2], [0, 14, 15], [0, 1, 2, 3]):
        assert hasher.hashes(ids) == block_id_prefix_hashes(ids)


@pytest.mark.parametrize(("call", "arg"), [(token_prefix_hashes, [2**32]), (token_prefix_hashes, [-1]),
                                           (block_id_prefix_hashes, [2**64]), (block_id_prefix_hashes, [-5])])
def test_out_of_range_inputs_are_refused(call, arg):
    with pytest.raises(ValueError):
        call(arg)
