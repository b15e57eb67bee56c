"""Switch memory in bytes: what a switch data plane can really hold, and how many KV blocks that is.

A KV block of a 512-token prompt segment is tens of MiB (`evaluation.model`), while a switch data plane
holds MiB of SRAM. So the pool's capacity is given in bytes with named presets whose figures carry their
source, the block's bytes come from the model and a compression factor, and the pool caches whole blocks
when at least one fits, else the *leading chunks* of the hottest blocks (the data plane stores a block as
128-byte value chunks, `kvpool.constants.KVP_VALUE_LEN`, each indexed by its own `kv_index` entry).
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.model import ModelConfig
from kvpool.constants import KVP_VALUE_LEN

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class SwitchMemory:
    """One switch's pool memory and the rates that bound its use."""

    name: str
    bytes: int
    """Memory for cached value chunks."""
    serve_bytes_per_s: float
    """Value bytes the switch can send out of that memory per second (to all ports together)."""
    source: str


@dataclass(frozen=True)
class Compression:
    """A KV-cache size reduction applied to every block."""

    name: str
    factor: float
    """Stored bytes / BF16 bytes."""
    source: str


SOFTSWITCH_GET_HITS_PER_S = 89_000
"""GET hits answered per second by the embedded softswitch on kvswitch.p4, in process (docs/status.md)."""
LINE_RATE_VALUE_SHARE = KVP_VALUE_LEN / (KVP_VALUE_LEN + 36 + 8 + 20 + 14 + 24)
"""Share of a reply's wire bytes that is value: 128 B chunk after KVP (36), UDP (8), IPv4 (20), Ethernet (14)
headers and Ethernet's preamble, FCS and gap (24)."""

MEMORIES: dict[str, SwitchMemory] = {m.name: m for m in (
    SwitchMemory("softswitch", 1024 * KVP_VALUE_LEN, SOFTSWITCH_GET_HITS_PER_S * KVP_VALUE_LEN,
                 "this project's data plane as built: 1 << SLOT_INDEX_WIDTH (10) slots × 128-byte chunks "
                 "(p4src/include/constants.p4); BMv2 or the softswitch serve ~89k GET hits/s (docs/status.md)"),
    SwitchMemory("netcache", 65_536 * KVP_VALUE_LEN, 100e9 / 8 * LINE_RATE_VALUE_SHARE,
                 "NetCache (SOSP'17): 64K items × 128-byte values in a Tofino's register arrays, at line rate"),
    SwitchMemory("tofino", 15 * MIB, 100e9 / 8 * LINE_RATE_VALUE_SHARE,
                 "Tofino-class SRAM per pipeline: 12 stages × 80 blocks × 16 KiB (1,024 × 128-bit words) ≈ 15 MiB, "
                 "all of it given to the pool (an upper bound; NetCache used 8 MiB); line rate per port"),
    SwitchMemory("switch+dram", 64 * GIB, 100e9 / 8,
                 "a switch with an attached DRAM server (TEA, SIGCOMM'20; switch-memory-extension designs): 64 GiB "
                 "of one server reached over RDMA from the data plane, served at its 100 Gb/s link"),
)}

COMPRESSIONS: dict[str, Compression] = {c.name: c for c in (
    Compression("bf16", 1.0, "uncompressed BF16 keys and values (the model presets)"),
    Compression("fp8", 0.5, "8-bit KV cache (FP8 E4M3, as vLLM and TensorRT-LLM offer): half of BF16"),
    Compression("cachegen", 1 / 3.5, "CacheGen (SIGCOMM'24): KV cache 3.5–4.3× smaller; the conservative end"),
    Compression("cachegen-4.3x", 1 / 4.3, "CacheGen (SIGCOMM'24): the optimistic end of its 3.5–4.3×"),
)}


def memory_preset(name: str) -> SwitchMemory:
    try:
        return MEMORIES[name]
    except KeyError:
        raise ValueError(f"unknown switch memory {name!r}; known: {', '.join(MEMORIES)}") from None


def compression_preset(name: str) -> Compression:
    try:
        return COMPRESSIONS[name]
    except KeyError:
        raise ValueError(f"unknown compression {name!r}; known: {', '.join(COMPRESSIONS)}") from None


def block_bytes(model: ModelConfig, compression: Compression, block_tokens: int = 512) -> int:
    """Stored bytes of one block, rounded up to whole 128-byte chunks."""
    raw = model.block_bytes(block_tokens) * compression.factor
    return chunks(int(raw + 0.5)) * KVP_VALUE_LEN


def chunks(nbytes: int) -> int:
    """128-byte value chunks needed for `nbytes`."""
    return -(-nbytes // KVP_VALUE_LEN)


@dataclass(frozen=True)
class PoolPlan:
    """How a given memory holds blocks of a given size."""

    memory_bytes: int
    block_bytes: int
    blocks: int
    """Blocks the pool holds (whole, or their leading chunks)."""
    chunks_per_block: int
    """Leading chunks cached of each held block (all of a block's chunks in whole-block mode)."""

    @property
    def whole(self) -> bool:
        return self.chunks_per_block >= chunks(self.block_bytes)

    @property
    def share(self) -> float:
        """Fraction of each held block's bytes the pool holds."""
        return min(1.0, self.chunks_per_block * KVP_VALUE_LEN / self.block_bytes)

    @property
    def mode(self) -> str:
        return "whole blocks" if self.whole else f"leading {self.share:.2%} of each block"


LEADING_BLOCKS = 64
"""When not one whole block fits, the pool spreads its chunks over the leading parts of this many blocks (the
hot first blocks of shared prompts), so that it still serves every reader of them something."""


def plan(memory_bytes: int, block_size: int, leading_blocks: int = LEADING_BLOCKS) -> PoolPlan:
    """Whole blocks when at least one fits; else the leading chunks of `leading_blocks` blocks."""
    if memory_bytes < KVP_VALUE_LEN or block_size < 1:
        raise ValueError("memory must hold at least one 128-byte chunk and blocks must have bytes")
    if memory_bytes >= block_size:
        return PoolPlan(memory_bytes, block_size, memory_bytes // block_size, chunks(block_size))
    total = memory_bytes // KVP_VALUE_LEN
    blocks = max(1, min(leading_blocks, total))
    return PoolPlan(memory_bytes, block_size, blocks, total // blocks)
