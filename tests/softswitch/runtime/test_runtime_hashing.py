"""Hash algorithms must be bit-exact with BMv2: catalogue check values and hand-computed cases."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softswitch.runtime import hashing

CHECK = b"123456789"


def test_crc16_is_crc16_arc_catalogue_check_value():
    assert hashing.crc16(CHECK) == 0xBB3D


def test_crc32_is_crc32_iso_hdlc_catalogue_check_value():
    assert hashing.crc32(CHECK) == 0xCBF43926


def test_custom_crcs_default_to_bmv2_initial_configuration():
    assert hashing.algorithm("crc16_custom")(CHECK) == 0xBB3D
    assert hashing.algorithm("crc32_custom")(CHECK) == 0xCBF43926


def test_csum16_of_textbook_ipv4_header_gives_its_checksum():
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert hashing.csum16(header) == 0xB861
    with_sum = header[:10] + (0xB861).to_bytes(2, "big") + header[12:]
    assert hashing.csum16(with_sum) == 0  # a correct header sums to 0xFFFF, complement 0


def test_csum16_pads_odd_length_with_a_zero_byte():
    assert hashing.csum16(b"\x12") == hashing.csum16(b"\x12\x00") == 0xEDFF


def test_identity_reads_first_eight_bytes_big_endian():
    assert hashing.identity(b"\x01\x02") == 0x0102
    assert hashing.identity(bytes(range(1, 11))) == 0x0102030405060708


def test_xor16_folds_big_endian_words():
    assert hashing.xor16(b"\x12\x34\x56\x78\x9a") == 0x1234 ^ 0x5678 ^ 0x9A00


@pytest.mark.parametrize(("fields", "expected"), [
    ([(0xAB, 8), (0xCD, 8)], b"\xab\xcd"),
    ([(0x5, 4), (0xA, 4)], b"\x5a"),
    ([(1, 1), (0, 1), (1, 1)], b"\xa0"),          # 3 bits, padded at the low end
    ([(0x1FF, 9)], b"\xff\x80"),
    ([(0x1FFFF, 8)], b"\xff"),                   # values are masked to their width
])
def test_pack_fields_concatenates_msb_first_and_pads_low_bits(fields, expected):
    assert hashing.pack_fields(fields) == expected


def test_hash_with_offset_is_base_plus_modulo_and_max_zero_acts_as_one():
    assert hashing.hash_with_offset(1000, 5, 7) == 5 + 1000 % 7
    assert hashing.hash_with_offset(1000, 5, 0) == 5


def test_unknown_algorithm_names_the_supported_ones():
    with pytest.raises(KeyError, match="crc16"):
        hashing.algorithm("xxhash64")


@given(st.lists(st.tuples(st.integers(0, 2**20), st.integers(1, 20)), max_size=12))
def test_csum16_from_integer_equals_csum16_of_packed_bytes(fields):
    fields = [(v & ((1 << w) - 1), w) for v, w in fields]
    acc, nbits = 0, 0
    for v, w in fields:
        acc, nbits = (acc << w) | v, nbits + w
    assert hashing.csum16_int(acc, nbits) == hashing.csum16(hashing.pack_fields(fields))


def test_csum16_from_integer_keeps_the_all_ones_corner():
    assert hashing.csum16_int(0xFFFF, 16) == hashing.csum16(b"\xff\xff") == 0
    assert hashing.csum16_int(0, 32) == hashing.csum16(b"\x00" * 4) == 0xFFFF
