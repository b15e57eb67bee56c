"""Whose KV a pool block is: a model's identity, and the chained prefix hashes that name its blocks in the pool.

A KV block is only meaningful to the model (and cache layout) that computed it: the same tokens through another
model, dtype, head layout or block size give other bytes. So a block's key covers the model's identity as well as
its tokens: the prefix-hash chain (`kvpool.prefix_hash`, docs/protocol.md "Prefix hash") starts from a link made
of the identity's digest instead of the plain root, and the KVP tenant of every request is derived from the same
digest. Two models, or one model under two cache salts (two tenants that must not read each other's prompts),
never share a key, and a block stored under one identity is refused by the other's codec too
(`connectors.blockcodec`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from kvpool.keys import TENANT_BITS
from kvpool.prefix_hash import ROOT, chain, token_block_bytes

DIGEST_BYTES = 16
"""Length of `ModelIdentity.digest()`."""
_DIGEST_PERSON = b"kvswitch-model"
"""BLAKE2b personalisation of identity digests: separates them from every other BLAKE2b use of the project."""


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """Everything that decides the bytes of a pool block besides its tokens."""

    name: str
    """Model name or path as the engine knows it (e.g. "kvswitch/tiny")."""
    dtype: str
    """KV-cache dtype, torch's spelling without the prefix ("float32", "bfloat16")."""
    num_layers: int
    """Attention layers whose K and V a block holds."""
    num_kv_heads: int
    """KV heads per layer (after tensor-parallel sharding, if any)."""
    head_size: int
    """Elements per head."""
    block_tokens: int
    """Tokens per pool block."""
    salt: str = ""
    """Tenant / cache salt: identities that differ only here never share blocks (vLLM's `cache_salt`)."""
    layout: str = ""
    """How the engine lays KV out in a block's payload when that is more than the fields above say (an engine
    that stores its paged blocks as they are names its kernel layout here: "vllm-cpu/vec/block128")."""

    def __post_init__(self) -> None:
        for field_name in ("num_layers", "num_kv_heads", "head_size", "block_tokens"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
        if not self.name or not self.dtype:
            raise ValueError("a model identity needs a name and a dtype")

    def digest(self) -> bytes:
        """16 bytes naming this identity, the same in every process and on every machine (canonical JSON of the
        fields under BLAKE2b, never Python's randomised `hash`)."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.blake2b(canonical.encode(), digest_size=DIGEST_BYTES, person=_DIGEST_PERSON).digest()

    def tenant(self) -> int:
        """The KVP tenant of this identity's requests: 1 .. 2^TENANT_BITS - 1, from the digest.

        Never 0, the default tenant of `kvpool.client.ClientOptions` that trace replays and tools use, so an
        engine's blocks stay apart from theirs. Tenants are only 16 bits, so two identities may share one; their
        keys still differ (the chain covers the whole digest)."""
        return int.from_bytes(self.digest()[:8], "big") % ((1 << TENANT_BITS) - 1) + 1

    def salted(self, salt: str) -> ModelIdentity:
        """This identity under a request's own cache salt as well (no salt: itself)."""
        return replace(self, salt=f"{self.salt}\x00{salt}") if salt else self

    def root(self) -> int:
        """The first link of this identity's chains: h(-1) of `kvpool.prefix_hash` chained with the digest."""
        return chain(ROOT, self.digest())

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V of one token over all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_size * dtype_size(self.dtype)

    @property
    def block_bytes(self) -> int:
        """Bytes of KV in one full pool block (the codec's payload)."""
        return self.kv_bytes_per_token * self.block_tokens


_DTYPE_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint8": 1}


def dtype_size(dtype: str) -> int:
    """Bytes per element of a KV dtype named as torch names it ("bfloat16"; a "torch." prefix is ignored)."""
    name = dtype.removeprefix("torch.")
    if name not in _DTYPE_SIZES:
        raise ValueError(f"unknown KV dtype {dtype!r}; known: {', '.join(sorted(_DTYPE_SIZES))}")
    return _DTYPE_SIZES[name]


def block_hashes(token_ids: Sequence[int], identity: ModelIdentity, block_tokens: int | None = None) -> list[int]:
    """One 64-bit prefix hash per FULL block of `block_tokens` tokens (default: the identity's), in order.

    h(-1) = identity.root(); h(i) = chain(h(i-1), block i's tokens as uint32 LE): hash i names block i and its
    whole prefix under this identity, so a prompt's hashes are a prefix of any longer prompt's that starts with
    it, and no hash is shared between identities. The trailing partial block has no hash (it is never stored).
    """
    size = identity.block_tokens if block_tokens is None else block_tokens
    if size <= 0:
        raise ValueError("block_tokens must be positive")
    hashes: list[int] = []
    parent = identity.root()
    for start in range(0, len(token_ids) - size + 1, size):
        parent = chain(parent, token_block_bytes(token_ids[start:start + size]))
        hashes.append(parent)
    return hashes
