"""Reference hit counts from libCacheSim (PyPI `libcachesim`), the yardstick for our policies.

The block stream is written as a libCacheSim `oracleGeneral` binary trace (packed little-endian records:
u32 clock time, u64 object id, u32 size, i64 index of the next request for the same id, or -1), so
every policy, Belady's MIN included, replays in libCacheSim's own C loop (`process_trace`). MIN needs
the next-access field, which is why the trace is built here rather than fed request by request: the
Python binding's `Belady` reads `next_access_vtime` from each request, and the oracleGeneral reader is
the documented way to carry it. Every object has size 1, so capacities are in blocks.
"""

from __future__ import annotations

import os
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcachesim as lcs

_RECORD = struct.Struct("<IQIq")  # clock_time, obj_id, obj_size, next_access_vtime

POLICIES: dict[str, Callable[..., lcs.CacheBase]] = {
    "lru": lcs.LRU,
    "lfu": lcs.LFU,
    "fifo": lcs.FIFO,
    "s3fifo": lcs.S3FIFO,
    "arc": lcs.ARC,
    "sieve": lcs.Sieve,
    "wtinylfu": lcs.WTinyLFU,
    "belady": lcs.Belady,
}
"""libCacheSim policies by our name; "belady" is MIN (offline: it reads each request's next access)."""


@dataclass(frozen=True)
class ReferenceRun:
    """One libCacheSim replay."""

    policy: str
    capacity: int
    requests: int
    hits: int
    seconds: float
    """Wall time of `process_trace` alone (trace writing excluded)."""

    @property
    def hit_ratio(self) -> float:
        return self.hits / self.requests if self.requests else 0.0


def write_oracle_trace(keys: Sequence[int], path: Path, times: Sequence[float] | None = None) -> None:
    """Write `keys` (non-negative ints) as an oracleGeneral trace, one size-1 object per reference."""
    if times is not None and len(times) != len(keys):
        raise ValueError("times and keys differ in length")
    n = len(keys)
    next_use = [-1] * n
    seen: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        key = keys[i]
        if not isinstance(key, int) or key < 0:
            raise ValueError(f"libCacheSim object ids are non-negative ints; reference {i} is {key!r}")
        next_use[i] = seen.get(key, -1)
        seen[key] = i
    pack = _RECORD.pack
    with open(path, "wb") as out:
        for i, key in enumerate(keys):
            clock = int(times[i]) if times is not None else i
            out.write(pack(clock, key, 1, next_use[i]))


class ReferenceTrace:
    """A block stream written once as an oracleGeneral file and replayed by any libCacheSim policy."""

    def __init__(self, keys: Sequence[int], times: Sequence[float] | None = None) -> None:
        fd, name = tempfile.mkstemp(prefix="kvswitch-ref-", suffix=".oracleGeneral.bin")
        os.close(fd)
        self.path = Path(name)
        self.requests = len(keys)
        self.hashpower = max(12, min(24, (len(set(keys)) or 1).bit_length() + 1))
        write_oracle_trace(keys, self.path, times)

    def run(self, policy_name: str, capacity: int) -> ReferenceRun:
        if policy_name not in POLICIES:
            raise ValueError(
                f"unknown libCacheSim policy {policy_name!r}; known: {', '.join(sorted(POLICIES))}"
            )
        if capacity < 1:
            raise ValueError(f"capacity must be ≥ 1 block, got {capacity}")
        if self.requests == 0:
            return ReferenceRun(policy_name, capacity, 0, 0, 0.0)
        reader = lcs.TraceReader(str(self.path), lcs.TraceType.ORACLE_GENERAL_TRACE)
        # The hash table is sized to the stream (libCacheSim's default, 2^24 buckets, costs ~0.2 s a cache).
        cache = POLICIES[policy_name](capacity, hashpower=self.hashpower)
        start = time.perf_counter()
        miss_ratio, _ = cache.process_trace(reader)
        seconds = time.perf_counter() - start
        hits = round((1.0 - miss_ratio) * self.requests)
        return ReferenceRun(policy_name, capacity, self.requests, hits, seconds)

    def close(self) -> None:
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> ReferenceTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def libcachesim_hit_count(policy_name: str, keys: Sequence[int], capacity: int) -> int:
    """Hits of libCacheSim's `policy_name` (see POLICIES) over `keys`, each a size-1 object, `capacity` blocks."""
    with ReferenceTrace(keys) as trace:
        return trace.run(policy_name, capacity).hits
