"""Canonical P4Runtime byte strings (spec §8.4): what the controller sends and what the switch accepts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4rt.bytestrings import BytestringError, decode, encode, encode_padded, mask_for_prefix


@pytest.mark.parametrize(("value", "expected"), [
    (0, b"\x00"),  # zero is one byte, never empty
    (1, b"\x01"),
    (0xFF, b"\xff"),
    (0x100, b"\x01\x00"),
    (0x0A000001, b"\x0a\x00\x00\x01"),
    (0x1FF, b"\x01\xff"),  # a bit<9> port: two bytes, no leading zero byte
])
def test_encode_is_the_shortest_big_endian_form(value, expected):
    assert encode(value) == expected
    assert encode(value, 32) == expected


def test_encode_refuses_a_value_wider_than_the_field():
    with pytest.raises(ValueError, match="does not fit in 4 bits"):
        encode(16, 4)
    assert encode(15, 4) == b"\x0f"


def test_encode_refuses_negative_values():
    with pytest.raises(ValueError, match="negative value -1 for an unsigned 8-bit field"):
        encode(-1, 8)
    with pytest.raises(ValueError, match="negative value -1"):
        encode(-1)


def test_encode_without_bitwidth_takes_any_width():
    assert encode(1 << 100) == b"\x10" + bytes(12)


@pytest.mark.parametrize(("value", "bitwidth", "expected"), [
    (0, 9, b"\x00\x00"),
    (3, 16, b"\x00\x03"),
    (1, 1, b"\x01"),
    (0x0A000001, 48, b"\x00\x00\x0a\x00\x00\x01"),
])
def test_encode_padded_fills_the_whole_field(value, bitwidth, expected):
    assert encode_padded(value, bitwidth) == expected


@pytest.mark.parametrize("data", [b"\x02", b"\x00\x02", b"\x00\x00\x00\x00\x02"])
def test_decode_takes_canonical_and_zero_padded_forms(data):
    assert decode(data) == 2
    assert decode(data, 9, "port") == 2


def test_decode_without_bitwidth_reads_empty_as_zero_and_checks_nothing():
    assert decode(b"") == 0
    assert decode(b"\xff\xff") == 0xFFFF


def test_decode_with_bitwidth_refuses_an_empty_string_as_invalid_argument():
    with pytest.raises(BytestringError, match="egress_port: empty byte string") as e:
        decode(b"", 9, "egress_port")
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(("data", "bitwidth"), [(b"\x02\x00", 9), (b"\x10", 4), (b"\x01\x00", 8)])
def test_decode_with_bitwidth_refuses_a_value_too_wide_as_out_of_range(data, bitwidth):
    with pytest.raises(BytestringError, match=f"port: value 0x{data.hex()} does not fit in {bitwidth} bits") as e:
        decode(data, bitwidth, "port")
    assert e.value.code == "OUT_OF_RANGE"
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize(("prefix_len", "bitwidth", "mask"), [
    (0, 32, 0),
    (8, 32, 0xFF000000),
    (24, 32, 0xFFFFFF00),
    (32, 32, 0xFFFFFFFF),
    (1, 9, 0x100),
])
def test_mask_for_prefix_keeps_the_high_bits(prefix_len, bitwidth, mask):
    assert mask_for_prefix(prefix_len, bitwidth) == mask


@given(st.integers(1, 128).flatmap(lambda w: st.tuples(st.just(w), st.integers(0, (1 << w) - 1))))
def test_encode_then_decode_round_trips_in_every_form(width_value):
    width, value = width_value
    canonical = encode(value, width)
    assert decode(canonical, width, "f") == value
    assert decode(encode_padded(value, width), width, "f") == value
    assert canonical == encode_padded(value, width).lstrip(b"\x00") or canonical == b"\x00"
