"""The bounds printed beside every policy: Belady's MIN (libCacheSim) and the infinite-cache ideal.

MIN here is libCacheSim's `Belady`: it always admits the missed block and evicts the resident block whose next
use is furthest away, the same definition as the shared traces' `stats.json`. Its per-reference outcomes are
kept so the prefix-level ratio of MIN can be computed too (an upper reference, not a strict optimum for the
prefix objective).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import libcachesim

from evaluation.prefix import HitCounter
from evaluation.stream import BlockStream

NEVER = 1 << 62
"""libCacheSim's 'no next access' time for Belady: larger than any reference index."""


def next_use(keys: Sequence[Hashable]) -> list[int]:
    """For each reference, the index of the next reference to the same key (NEVER if none)."""
    following = [NEVER] * len(keys)
    seen: dict[Hashable, int] = {}
    for i in range(len(keys) - 1, -1, -1):
        following[i] = seen.get(keys[i], NEVER)
        seen[keys[i]] = i
    return following


def libcachesim_hits(keys: Sequence[Hashable], cache: libcachesim.CacheBase,
                     following: Sequence[int] | None = None) -> list[bool]:
    """Replay `keys` (unit-size objects) through a libCacheSim cache one request at a time; per-reference hits."""
    request = libcachesim.Request()
    request.obj_size = 1
    get = cache.get
    hits: list[bool] = []
    append = hits.append
    for i, key in enumerate(keys):
        request.obj_id = key
        request.clock_time = i
        if following is not None:
            request.next_access_vtime = following[i]
        append(get(request))
    return hits


def belady_hits(keys: Sequence[Hashable], capacity: int, following: Sequence[int] | None = None) -> list[bool]:
    """Per-reference hits of Belady's MIN with `capacity` unit-size slots."""
    following = next_use(keys) if following is None else following
    return libcachesim_hits(keys, libcachesim.Belady(capacity), following)


def ideal_hits(keys: Sequence[Hashable]) -> list[bool]:
    """Infinite cache: every reference after the first to a key hits."""
    seen: set[Hashable] = set()
    hits = []
    for key in keys:
        hits.append(key in seen)
        seen.add(key)
    return hits


def count(stream: BlockStream, hits: Sequence[bool]) -> HitCounter:
    """Group per-reference outcomes by request into block- and prefix-level counts."""
    counter = HitCounter()
    for _, start, end in stream.request_slices():
        counter.add(hits[start:end])
    return counter


def bound_counters(stream: BlockStream, capacities: Sequence[int],
                   progress: Callable[[int], None] | None = None) -> tuple[dict[int, HitCounter], HitCounter]:
    """MIN at each capacity and the ideal, as HitCounters (the report's reference rows)."""
    keys = [b.key for b in stream.blocks]
    following = next_use(keys)
    minimum = {}
    for capacity in capacities:
        minimum[capacity] = count(stream, belady_hits(keys, capacity, following))
        if progress:
            progress(len(keys))
    return minimum, count(stream, ideal_hits(keys))
