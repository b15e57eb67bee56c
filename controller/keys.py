"""Block-chunk keys as the controller names them: `(tenant, prefix_hash, chunk)`, written `tenant:prefixhash_hex:chunk`."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX_HASH_BITS = 64
TENANT_BITS = 16
CHUNK_BITS = 8


@dataclass(frozen=True, slots=True, order=True)
class ChunkKey:
    """The identity of one chunk of one block in the switch pool (docs/protocol.md: a block key)."""

    tenant: int
    """Tenant id (16 bits); tenants never share blocks."""
    prefix_hash: int
    """Chained 64-bit prefix hash naming the block and its whole prefix."""
    chunk: int = 0
    """Chunk index within the block (8 bits)."""

    def __post_init__(self) -> None:
        for name, bits in (("tenant", TENANT_BITS), ("prefix_hash", PREFIX_HASH_BITS), ("chunk", CHUNK_BITS)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0 or value >> bits:
                raise ValueError(f"{name} must be an unsigned {bits}-bit integer, got {value!r}")

    def __str__(self) -> str:
        return f"{self.tenant}:{self.prefix_hash:016x}:{self.chunk}"

    @classmethod
    def parse(cls, text: str) -> ChunkKey:
        """Read `tenant:prefixhash_hex[:chunk]` (chunk defaults to 0; the hash may carry a 0x prefix)."""
        parts = text.strip().split(":")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f"bad key {text!r}: expected TENANT:PREFIXHASH_HEX[:CHUNK], e.g. 1:9f3c0a12b4e5d6c7:0")
        try:
            tenant = int(parts[0], 10)
            prefix_hash = int(parts[1], 16)
            chunk = int(parts[2], 10) if len(parts) == 3 else 0
        except ValueError:
            raise ValueError(
                f"bad key {text!r}: tenant and chunk are decimal, the prefix hash hexadecimal"
            ) from None
        return cls(tenant, prefix_hash, chunk)
