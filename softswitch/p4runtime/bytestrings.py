"""P4Runtime byte strings (spec section "Bytestrings"): canonical out, canonical or zero-padded in.

Values go out in canonical form (shortest big-endian string, at least one byte). On input the server accepts
the canonical form and any zero-padded form, as the spec requires of 1.x servers; a value wider than the
field's bitwidth is refused with OUT_OF_RANGE, as BMv2 (PI) does for padded strings that do not fit.
"""

from __future__ import annotations

import grpc

from softswitch.p4runtime.errors import P4RuntimeError, invalid


def encode(value: int) -> bytes:
    """Canonical byte string of a non-negative int."""
    if value < 0:
        raise ValueError(f"negative value {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_padded(value: int, bitwidth: int) -> bytes:
    """Fixed-width form (ceil(bitwidth/8) bytes): the wire layout of packet metadata and headers."""
    return value.to_bytes((bitwidth + 7) // 8, "big")


def decode(data: bytes, bitwidth: int, what: str) -> int:
    """An int from a byte string meant for a `bitwidth`-bit field named `what` (for the error message)."""
    if not data:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE,
                             f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value
