"""Question 1: which prefixes deserve the small switch pool — every policy replayed on the whole block stream.

The pool sees every block reference (as a pool in front of all storage reads would), so its block-level hit
ratio is directly comparable with libCacheSim's MIN and with the infinite-cache ideal. The prefix-level ratio
counts only hits inside their request's leading run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evaluation.prefix import HitCounter
from evaluation.stream import BlockStream
from policies.spec import PolicySpec


@dataclass(frozen=True)
class PoolRun:
    """One policy at one pool size on one stream."""

    policy: str
    capacity_blocks: int
    fraction: float
    counter: HitCounter
    pool_stats: dict[str, int]

    def as_dict(self) -> dict:
        return {"policy": self.policy, "capacity_blocks": self.capacity_blocks, "fraction": self.fraction,
                **self.counter.as_dict(), "pool_stats": dict(self.pool_stats)}


def replay_pool(stream: BlockStream, spec: PolicySpec, capacity: int,
                progress: Callable[[int], None] | None = None) -> tuple[HitCounter, dict[str, int]]:
    """Drive one fresh pool with every reference of `stream`, one `Pool.access` each, in trace order."""
    pool = spec.build(capacity)
    access_many = pool.access_many
    counter = HitCounter()
    blocks = stream.blocks
    for now, start, end in stream.request_slices():
        counter.add(access_many(blocks[start:end], now))
        if progress:
            progress(end - start)
    return counter, dict(pool.stats)


def sweep(stream: BlockStream, specs: Sequence[PolicySpec], fractions: Sequence[float],
          progress: Callable[[int], None] | None = None) -> list[PoolRun]:
    """Every policy at every pool size (fractions of the stream's unique blocks)."""
    runs = []
    for spec in specs:
        for fraction in fractions:
            capacity = stream.capacity(fraction)
            counter, stats = replay_pool(stream, spec, capacity, progress)
            runs.append(PoolRun(spec.name, capacity, fraction, counter, stats))
    return runs
