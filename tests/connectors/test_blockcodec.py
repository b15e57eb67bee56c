"""The pool-block codec: what it encodes comes back; damaged, foreign and short blocks are refused."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from connectors import blockcodec
from connectors.blockcodec import HEADER_LEN, BlockRejected, Rejection, decode, encode
from connectors.identity import ModelIdentity

TINY = ModelIdentity("kvswitch/tiny", "float32", 4, 2, 64, 256)
OTHER = dataclasses.replace(TINY, salt="another tenant")
KEY = 0x9F3C0A12B4E5D6C7
PAYLOAD = bytes(range(256)) * 64


def _flip(offset: int) -> Callable[[bytes], bytes]:
    def damage(blob: bytes) -> bytes:
        changed = bytearray(blob)
        changed[offset] ^= 0x01
        return bytes(changed)
    return damage


BAD_BLOBS: dict[str, tuple[Callable[[bytes], bytes], Rejection]] = {
    "empty": (lambda blob: b"", Rejection.SHORT),
    "half a header": (lambda blob: blob[:HEADER_LEN // 2], Rejection.SHORT),
    "magic": (_flip(0), Rejection.BAD_MAGIC),
    "format version": (_flip(5), Rejection.BAD_FORMAT),
    "reserved field": (_flip(7), Rejection.BAD_FORMAT),
    "identity byte": (_flip(10), Rejection.FOREIGN_IDENTITY),
    "key byte": (_flip(30), Rejection.FOREIGN_KEY),
    "truncated payload": (lambda blob: blob[:-1], Rejection.LENGTH),
    "header only": (lambda blob: blob[:HEADER_LEN], Rejection.LENGTH),
    "extra byte": (lambda blob: blob + b"\0", Rejection.LENGTH),
    "payload bit": (_flip(HEADER_LEN + 1000), Rejection.CHECKSUM),
    "checksum bit": (_flip(HEADER_LEN - 1), Rejection.CHECKSUM),
    "another model's block": (lambda blob: encode(OTHER, PAYLOAD, KEY), Rejection.FOREIGN_IDENTITY),
    "a block of another key": (lambda blob: encode(TINY, PAYLOAD, KEY ^ 1), Rejection.FOREIGN_KEY),
}


def test_round_trip() -> None:
    blob = encode(TINY, PAYLOAD, KEY)
    assert len(blob) == HEADER_LEN + len(PAYLOAD)
    assert decode(TINY, blob, KEY) == PAYLOAD
    assert decode(TINY, memoryview(blob)) == PAYLOAD  # no key named: the key is not checked
    assert decode(TINY, encode(TINY, b"")) == b""


@pytest.mark.parametrize("case", list(BAD_BLOBS), ids=list(BAD_BLOBS))
def test_bad_blob_is_refused_with_its_reason(case: str) -> None:
    damage, reason = BAD_BLOBS[case]
    with pytest.raises(BlockRejected) as refused:
        decode(TINY, damage(encode(TINY, PAYLOAD, KEY)), KEY)
    assert refused.value.reason is reason


def test_key_field_is_covered_by_the_checksum_when_no_key_is_named() -> None:
    with pytest.raises(BlockRejected) as refused:
        decode(TINY, _flip(30)(encode(TINY, PAYLOAD, KEY)))
    assert refused.value.reason is Rejection.CHECKSUM


def test_every_single_bit_flip_in_the_header_is_refused() -> None:
    blob = encode(TINY, PAYLOAD[:100], KEY)
    for offset in range(HEADER_LEN):
        for bit in range(8):
            damaged = bytearray(blob)
            damaged[offset] ^= 1 << bit
            with pytest.raises(BlockRejected):
                decode(TINY, bytes(damaged), KEY)


def test_key_must_be_64_bits() -> None:
    with pytest.raises(ValueError):
        blockcodec.encode(TINY, b"x", 1 << 64)
