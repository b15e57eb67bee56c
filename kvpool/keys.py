"""The names of cached things, one type each: a block `(tenant, prefix_hash)` and one of its chunks.

Every part of kvswitch (host side, storage node, controller, policies, tests) names a block and a chunk with
these types; their widths are those of the `kvp_h` fields that carry them (docs/protocol.md) and are defined
here only: the wire codec (`kvpool.wire`) builds its struct from them. Text forms: a block is `TENANT:PREFIXHASH_HEX`, a chunk `TENANT:PREFIXHASH_HEX:CHUNK`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kvpool.constants import KVP_VALUE_LEN

TENANT_BITS = 16
"""Width of `kvp_h.tenant`."""
PREFIX_HASH_BITS = 64
"""Width of `kvp_h.prefix_hash`."""
CHUNK_BITS = 32
"""Width of `kvp_h.chunk_idx` and of `chunk_count` (protocol v2; `chunk_index_t` in P4)."""
MAX_CHUNKS = (1 << CHUNK_BITS) - 1
"""Most chunks a block can have (`chunk_count` is CHUNK_BITS wide)."""
SLOT_BYTES = KVP_VALUE_LEN
"""What one chunk occupies in the switch pool whatever its value_len: one slot of `KVP_VALUE_WORDS` words."""

_EXAMPLE = "1:9f3c0a12b4e5d6c7"

_new = object.__new__
_set = object.__setattr__
"""What a frozen dataclass's own __init__ uses to fill its fields; the `from_wire` fast paths use them directly."""


def _check(name: str, value: object, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> bits:
        raise ValueError(f"{name} must be an unsigned {bits}-bit integer, got {value!r}")


def _split(text: str, parts: tuple[int, ...]) -> list[str]:
    fields = text.strip().split(":")
    if len(fields) not in parts or not all(fields):
        raise ValueError(f"bad key {text!r}: expected TENANT:PREFIXHASH_HEX (a block) or TENANT:PREFIXHASH_HEX:CHUNK "
                         f"(one chunk), e.g. {_EXAMPLE} or {_EXAMPLE}:0")
    return fields


def _numbers(text: str, fields: list[str]) -> tuple[int, int, int | None]:
    try:
        return int(fields[0], 10), int(fields[1], 16), int(fields[2], 10) if len(fields) == 3 else None
    except ValueError:
        raise ValueError(f"bad key {text!r}: tenant and chunk are decimal, the prefix hash hexadecimal") from None


@dataclass(frozen=True, slots=True, order=True)
class BlockKey:
    """One KV-cache block: a tenant's chained prefix hash (the hash names the block and its whole prefix)."""

    tenant: int
    """Tenant id (16 bits); tenants never share blocks."""
    prefix_hash: int
    """Chained 64-bit prefix hash (kvpool.prefix_hash)."""

    def __post_init__(self) -> None:
        _check("tenant", self.tenant, TENANT_BITS)
        _check("prefix_hash", self.prefix_hash, PREFIX_HASH_BITS)

    def __str__(self) -> str:
        return f"{self.tenant}:{self.prefix_hash:016x}"

    @classmethod
    def from_wire(cls, tenant: int, prefix_hash: int) -> BlockKey:
        """The block of fields that are in range by construction: unpacked by `kvpool.wire.HEADER` (whose struct
        codes are exactly TENANT_BITS and PREFIX_HASH_BITS wide), or taken from a key that was checked already.

        Skips `__post_init__`'s checks, which would cost more than the lookup the key is made for on the storage
        node's hot path (a GET names its chunk once per request). Any other integers go through the constructor.
        """
        key = _new(cls)
        _set(key, "tenant", tenant)
        _set(key, "prefix_hash", prefix_hash)
        return key

    def chunk(self, index: int) -> ChunkKey:
        return ChunkKey(self.tenant, self.prefix_hash, index)

    def chunks(self, count: int) -> Iterator[ChunkKey]:
        """Its chunks 0 .. count-1."""
        return (self.chunk(index) for index in range(count))

    @classmethod
    def parse(cls, text: str) -> BlockKey:
        """Read `TENANT:PREFIXHASH_HEX` (the hash may carry a 0x prefix)."""
        tenant, prefix_hash, _ = _numbers(text, _split(text, (2,)))
        return cls(tenant, prefix_hash)


@dataclass(frozen=True, slots=True, order=True)
class ChunkKey:
    """One chunk of one block: what a switch slot, an index entry and a storage-node record hold."""

    tenant: int
    """Tenant id (16 bits)."""
    prefix_hash: int
    """Chained 64-bit prefix hash of the block."""
    chunk: int = 0
    """Chunk index within the block (CHUNK_BITS, 32 bits)."""

    def __post_init__(self) -> None:
        _check("tenant", self.tenant, TENANT_BITS)
        _check("prefix_hash", self.prefix_hash, PREFIX_HASH_BITS)
        _check("chunk", self.chunk, CHUNK_BITS)

    def __str__(self) -> str:
        return f"{self.tenant}:{self.prefix_hash:016x}:{self.chunk}"

    @classmethod
    def from_wire(cls, tenant: int, prefix_hash: int, chunk: int) -> ChunkKey:
        """The chunk of fields that are in range by construction: unpacked by `kvpool.wire.HEADER` (whose struct
        codes are exactly TENANT_BITS, PREFIX_HASH_BITS and CHUNK_BITS wide), or taken from a checked key.

        Skips `__post_init__`'s checks, which cost about as much again as the dict lookups the key is made for
        on the storage node's GET path (bench/kvpool_server.py). Any other integers go through the constructor.
        """
        key = _new(cls)
        _set(key, "tenant", tenant)
        _set(key, "prefix_hash", prefix_hash)
        _set(key, "chunk", chunk)
        return key

    @property
    def block(self) -> BlockKey:
        return BlockKey.from_wire(self.tenant, self.prefix_hash)  # this key's fields were checked when it was made

    @property
    def chunk_idx(self) -> int:
        """`chunk` under its wire name (`kvp_h.chunk_idx`), for code that speaks in header fields."""
        return self.chunk

    @classmethod
    def parse(cls, text: str) -> ChunkKey:
        """Read `TENANT:PREFIXHASH_HEX[:CHUNK]` (chunk defaults to 0; the hash may carry a 0x prefix)."""
        tenant, prefix_hash, chunk = _numbers(text, _split(text, (2, 3)))
        return cls(tenant, prefix_hash, chunk or 0)


def parse_key(text: str) -> BlockKey | ChunkKey:
    """A block (`TENANT:PREFIX`) or one chunk (`TENANT:PREFIX:CHUNK`), as the operator wrote it."""
    tenant, prefix_hash, chunk = _numbers(text, _split(text, (2, 3)))
    return BlockKey(tenant, prefix_hash) if chunk is None else ChunkKey(tenant, prefix_hash, chunk)
