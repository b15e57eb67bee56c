"""P4Runtime bytestrings: unsigned ints ↔ the canonical (shortest, big-endian) byte form of P4Runtime 1.4 §8.4."""

from __future__ import annotations


def encode(value: int, bitwidth: int) -> bytes:
    """Canonical bytestring of `value`; raises ValueError when it does not fit in `bitwidth` bits."""
    if value < 0:
        raise ValueError(f"negative value {value} for an unsigned {bitwidth}-bit field")
    if bitwidth > 0 and value >> bitwidth:
        raise ValueError(f"value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    """Unsigned int of a bytestring, canonical or zero-padded (targets may send either)."""
    return int.from_bytes(data, "big")


def mask_for_prefix(prefix_len: int, bitwidth: int) -> int:
    """The mask of an LPM prefix, for canonicalising LPM values (low bits must be zero)."""
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)
