"""A pool block as an engine stores it: a small header, then the KV bytes; `decode` refuses anything else.

    offset  size  field
    0       4     magic b"KVSB"
    4       2     format version (1), big-endian
    6       2     reserved, 0
    8       16    identity digest (`ModelIdentity.digest()`) of the model that computed the KV
    24      8     prefix hash the block was stored under (0: not recorded), big-endian
    32      8     payload length in bytes, big-endian
    40      16    BLAKE2b-128 of bytes 0..39 and the payload
    56      ...   payload (the KV; its layout is the connector's)

The pool is shared and reachable from any host, so an engine trusts nothing it reads back: a block is used only
when it is whole (length), undamaged (checksum over header and payload), of this model (identity) and, when the
reader names it, stored under the key it was read from (a block copied to another key is refused). The KVP
client's per-chunk CRC-32 catches damage on the way, not a wrong or forged block; this header does.
"""

from __future__ import annotations

import hashlib
import struct
from enum import StrEnum

from connectors.identity import DIGEST_BYTES, ModelIdentity

MAGIC = b"KVSB"
FORMAT_VERSION = 1
CHECKSUM_BYTES = 16
_FIELDS = struct.Struct(f">4sHH{DIGEST_BYTES}sQQ")
HEADER_LEN = _FIELDS.size + CHECKSUM_BYTES
"""Bytes before the payload (56)."""
_CHECKSUM_PERSON = b"kvswitch-block"


class Rejection(StrEnum):
    """Why `decode` refused a blob."""

    SHORT = "short"
    """Fewer bytes than a header."""
    BAD_MAGIC = "bad magic"
    """Not a block of this codec."""
    BAD_FORMAT = "bad format"
    """A format version (or reserved field) this reader does not know."""
    FOREIGN_IDENTITY = "foreign identity"
    """Computed by another model, layout or tenant salt."""
    FOREIGN_KEY = "foreign key"
    """Stored under another prefix hash than the one it was read from."""
    LENGTH = "length mismatch"
    """The payload is shorter or longer than the header says."""
    CHECKSUM = "checksum"
    """Header or payload damaged."""


class BlockRejected(ValueError):
    """A blob that must not be loaded; `reason` says which check failed."""

    def __init__(self, reason: Rejection, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason


def _checksum(fields: bytes, payload: bytes | bytearray | memoryview) -> bytes:
    digest = hashlib.blake2b(fields, digest_size=CHECKSUM_BYTES, person=_CHECKSUM_PERSON)
    digest.update(payload)
    return digest.digest()


def encode(identity: ModelIdentity, payload: bytes | bytearray | memoryview, key: int = 0) -> bytes:
    """The blob to store for `payload` computed by `identity`'s model, under prefix hash `key` (0: unrecorded)."""
    if not 0 <= key < 1 << 64:
        raise ValueError(f"key must be a 64-bit prefix hash, got {key}")
    fields = _FIELDS.pack(MAGIC, FORMAT_VERSION, 0, identity.digest(), key, len(payload))
    return b"".join((fields, _checksum(fields, payload), payload))


def decode(identity: ModelIdentity, blob: bytes | memoryview, key: int | None = None) -> bytes:
    """The payload of `blob`, checked against `identity` (and, when given, `key`: then the blob must have been
    encoded with that key); raises BlockRejected."""
    view = memoryview(blob)
    if len(view) < HEADER_LEN:
        raise BlockRejected(Rejection.SHORT, f"{len(view)} bytes, a header is {HEADER_LEN}")
    fields = bytes(view[:_FIELDS.size])
    magic, version, reserved, digest, stored_key, length = _FIELDS.unpack(fields)
    if magic != MAGIC:
        raise BlockRejected(Rejection.BAD_MAGIC, f"{magic!r}")
    if version != FORMAT_VERSION or reserved != 0:
        raise BlockRejected(Rejection.BAD_FORMAT, f"format {version}, reserved {reserved}")
    if digest != identity.digest():
        raise BlockRejected(Rejection.FOREIGN_IDENTITY, f"digest {digest.hex()} is not {identity.name}'s")
    if key is not None and stored_key != key:
        raise BlockRejected(Rejection.FOREIGN_KEY, f"stored as {stored_key:#018x}, read as {key:#018x}")
    payload = view[HEADER_LEN:]
    if len(payload) != length:
        raise BlockRejected(Rejection.LENGTH, f"{len(payload)} payload bytes, header says {length}")
    if _checksum(fields, payload) != bytes(view[_FIELDS.size:HEADER_LEN]):
        raise BlockRejected(Rejection.CHECKSUM)
    return bytes(payload)
