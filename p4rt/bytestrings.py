"""P4Runtime byte strings (P4Runtime 1.4 §8.4 "Bytestrings"): canonical out, canonical or zero-padded in.

Values go out in canonical form (shortest big-endian string, at least one byte). A server checking what a client
sent accepts the canonical form and any zero-padded form, as the spec requires of 1.x servers, and refuses an
empty string (INVALID_ARGUMENT) and a value wider than the field's bitwidth (OUT_OF_RANGE, as BMv2/PI does for
padded strings that do not fit). A client reading what a target sent takes either form without checks.
"""

from __future__ import annotations


class BytestringError(ValueError):
    """A byte string the spec says to refuse; `code` is the canonical gRPC code name the server answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def encode(value: int, bitwidth: int = 0) -> bytes:
    """Canonical byte string of a non-negative int; with `bitwidth` > 0, a ValueError when it does not fit."""
    if value < 0:
        raise ValueError(f"negative value {value} for an unsigned {bitwidth}-bit field" if bitwidth
                         else f"negative value {value}")
    if bitwidth > 0 and value >> bitwidth:
        raise ValueError(f"value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_padded(value: int, bitwidth: int) -> bytes:
    """Fixed-width form (ceil(bitwidth/8) bytes): the wire layout of packet metadata and headers."""
    return value.to_bytes((bitwidth + 7) // 8, "big")


def decode(data: bytes, bitwidth: int | None = None, what: str = "value") -> int:
    """The unsigned int of a byte string.

    Without `bitwidth` any string is taken, canonical or zero-padded (a client reading a target: targets may send
    either; empty is 0). With it, the spec's checks for a `bitwidth`-bit field named `what` (for the message):
    BytestringError INVALID_ARGUMENT when empty, OUT_OF_RANGE when the value does not fit.
    """
    if bitwidth is None:
        return int.from_bytes(data, "big")
    if not data:
        raise BytestringError("INVALID_ARGUMENT", f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise BytestringError("OUT_OF_RANGE", f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def mask_for_prefix(prefix_len: int, bitwidth: int) -> int:
    """The mask of an LPM prefix, for canonicalising LPM values (low bits must be zero)."""
    return ((1 << prefix_len) - 1) << (bitwidth - prefix_len)
