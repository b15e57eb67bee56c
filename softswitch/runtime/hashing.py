"""v1model hash and checksum algorithms, bit-exact with BMv2 (behavioral-model `src/bm_sim/calculations.cpp`).

BMv2 hashes a byte string built from the field list: the fields' bits concatenated most significant bit first,
the last byte padded with zero bits at its low end (fields of invalid headers are left out by BMv2's
`BufBuilder`; the lowering pass does that filtering). The algorithms, as BMv2 registers them:

| v1model name   | BMv2 functor | catalogue name (reveng)       | check("123456789") |
|----------------|--------------|-------------------------------|--------------------|
| crc16          | crc16        | CRC-16/ARC                    | 0xBB3D             |
| crc16_custom   | crc16_custom | CRC-16/ARC until reconfigured | 0xBB3D             |
| crc32          | crc32        | CRC-32/ISO-HDLC               | 0xCBF43926         |
| crc32_custom   | crc32_custom | CRC-32/ISO-HDLC until reconf. | 0xCBF43926         |
| csum16         | csum16       | RFC 1071 Internet checksum    | -                  |
| identity       | identity     | first 8 bytes, big-endian     | -                  |
| xor16          | xor16        | XOR of big-endian 16-bit words| -                  |

`crc*_custom` can only be reconfigured through BMv2's Thrift CLI, which our programs do not use.
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Callable, Iterable

HashFn = Callable[[bytes], int]


def pack_fields(fields: Iterable[tuple[int, int]]) -> bytes:
    """Concatenate (value, width) pairs MSB-first into bytes, zero-padding the last byte at its low end."""
    acc = 0
    nbits = 0
    for value, width in fields:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def _reflected_table(poly: int, width: int) -> list[int]:
    """Lookup table for a reflected-in/reflected-out CRC, in the LSB-first formulation."""
    rpoly = _reflect(poly, width)
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ rpoly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_ARC_TABLE = _reflected_table(0x8005, 16)


def crc16(data: bytes) -> int:
    """CRC-16/ARC: poly 0x8005, init 0, reflected in and out, no final xor (BMv2 `crc16`)."""
    crc = 0
    table = _CRC16_ARC_TABLE
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC (zlib's CRC-32), which is BMv2's `crc32`."""
    return binascii.crc32(data) & 0xFFFFFFFF


def csum16(data: bytes) -> int:
    """Ones' complement of the ones' complement sum of big-endian 16-bit words, odd tail zero-padded."""
    if len(data) % 2:
        data = data + b"\x00"
    total = sum(struct.unpack(f">{len(data) >> 1}H", data))
    # fold: a sum of N 16-bit words fits easily; fold until no carry remains
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def csum16_int(value: int, nbits: int) -> int:
    """csum16 of the bytes `pack_fields` would build from an `nbits`-bit integer, without building them.

    The ones' complement sum of 16-bit words is the value modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), except
    that a non-zero input whose sum is a multiple of 0xFFFF folds to 0xFFFF rather than 0.
    """
    value <<= -nbits % 16  # zero-pad to a whole number of 16-bit words, as the byte form is padded
    s = value % 0xFFFF
    if s == 0 and value:
        s = 0xFFFF
    return 0xFFFF - s


def identity(data: bytes) -> int:
    """BMv2's identity: the first (up to) 8 bytes read big-endian; longer inputs are cut, not folded."""
    return int.from_bytes(data[:8], "big")


def xor16(data: bytes) -> int:
    """XOR of big-endian 16-bit words, a short tail padded with zeros at its end."""
    if len(data) % 2:
        data = data + b"\x00"
    out = 0
    for i in range(0, len(data), 2):
        out ^= (data[i] << 8) | data[i + 1]
    return out


ALGORITHMS: dict[str, HashFn] = {
    "crc16": crc16,
    "crc16_custom": crc16,
    "crc32": binascii.crc32,  # `crc32` itself, without a Python call around the C one (already unsigned)
    "crc32_custom": binascii.crc32,
    "csum16": csum16,
    "identity": identity,
    "xor16": xor16,
}
"""v1model `HashAlgorithm` member name → BMv2-exact function of the packed bytes."""


def algorithm(name: str) -> HashFn:
    """The function for a v1model `HashAlgorithm` member, or KeyError naming the supported ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise KeyError(f"hash algorithm {name!r} is not supported (supported: {', '.join(sorted(ALGORITHMS))})") from None


def hash_with_offset(hash_value: int, base: int, max_: int) -> int:
    """v1model `hash(out, algo, base, data, max)`: base + (h % max); BMv2 treats max == 0 as 1 (warns)."""
    return base + hash_value % (max_ or 1)
