"""Prefix semantics: a request can reuse only the longest run of leading blocks it finds.

A KV block is useless without the blocks before it (attention needs every earlier key and value), so a hit
after the first miss of a request saves nothing. Both ratios are reported: block-level (what a plain cache
sees, comparable with libCacheSim) and prefix-level (what actually saves prefill).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def leading_run(hits: Sequence[bool]) -> int:
    """Number of leading True values: how many blocks of the prompt can actually be reused."""
    try:
        return list(hits).index(False)
    except ValueError:
        return len(hits)


@dataclass
class HitCounter:
    """Accumulates block-level and prefix-level hits over requests."""

    requests: int = 0
    block_refs: int = 0
    block_hits: int = 0
    prefix_hits: int = 0
    """Blocks inside the leading run of their request (useful hits)."""
    per_request_prefix: list[int] = field(default_factory=list, repr=False)

    def add(self, hits: Sequence[bool]) -> int:
        """Account one request's per-block outcomes; returns its leading run."""
        hits = hits if isinstance(hits, list) else list(hits)
        try:
            run = hits.index(False)
        except ValueError:
            run = len(hits)
        self.requests += 1
        self.block_refs += len(hits)
        self.block_hits += hits.count(True)
        self.prefix_hits += run
        self.per_request_prefix.append(run)
        return run

    @property
    def block_hit_ratio(self) -> float:
        return self.block_hits / self.block_refs if self.block_refs else 0.0

    @property
    def prefix_hit_ratio(self) -> float:
        return self.prefix_hits / self.block_refs if self.block_refs else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "requests": self.requests,
            "block_refs": self.block_refs,
            "block_hits": self.block_hits,
            "prefix_hits": self.prefix_hits,
            "block_hit_ratio": self.block_hit_ratio,
            "prefix_hit_ratio": self.prefix_hit_ratio,
        }
