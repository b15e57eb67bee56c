"""Reading a request's pool blocks at once: a few pool clients in threads, blocks handed back in prompt order.

A block read is a window of chunk GETs; its time is mostly waiting for replies, and on a busy host each round
of replies waits for the node's and the engine's turns on the CPU. Reading a request's blocks one after the
other adds those waits up; reading them side by side overlaps them. The clients share one circuit breaker, so
a down pool is one outage (and one log line), skipped by all of them.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from connectors.store import PoolStats, PoolStore


class ParallelReader:
    """`workers` PoolStores, each used by one read at a time."""

    def __init__(self, make_store: Callable[[], PoolStore], workers: int = 4) -> None:
        if workers < 1:
            raise ValueError("a reader needs at least one worker")
        self.stores = [make_store() for _ in range(workers)]
        self._free: queue.Queue[PoolStore] = queue.Queue()
        for store in self.stores:
            self._free.put(store)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="kvswitch-reader")

    def _get(self, key: int) -> bytes | None:
        store = self._free.get()
        try:
            return store.get(key)
        finally:
            self._free.put(store)

    def get_many(self, keys: Sequence[int]) -> Iterator[bytes | None]:
        """Each key's block (None: not stored or the pool failed), in order; all reads start at once. Reads
        still running when the caller stops iterating finish in the background."""
        futures: list[Future[bytes | None]] = [self._pool.submit(self._get, key) for key in keys]
        for future in futures:
            yield future.result()

    def stats(self) -> PoolStats:
        """The counters of all its stores, added up."""
        total = PoolStats()
        for store in self.stores:
            for name, value in store.stats.as_dict().items():
                setattr(total, name, getattr(total, name) + value)
        return total

    def note_rejected(self) -> None:
        """Count a block the caller refused (its checks failed)."""
        self.stores[0].stats.rejected += 1

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for store in self.stores:
            store.close()
