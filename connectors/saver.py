"""Writing pool blocks off the engine's back: a separate process with its own pool client.

An engine step must not wait for the pool, and must not share its interpreter with the writes either: a saver
thread would hold the GIL between datagrams and delay every torch call of the next prefill (measured: +77 % TTFT
on a loaded 2-core machine). So the engine only copies a block out of its cache and queues it (`submit`, never
blocking: a full queue drops the block and counts it); a spawned process takes blocks from the queue, asks the
pool in one round trip which of a batch it holds already, and writes the others (`PoolStore.put`), each block
under `connectors.blockcodec`'s header. Counters live in shared memory, readable by the engine at any time.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import time
from typing import Any

from connectors import blockcodec
from connectors.identity import ModelIdentity
from connectors.store import PoolStore

BATCH = 16
"""Blocks probed together before writing those the pool lacks."""
COUNTERS = ("saved_blocks", "saved_bytes", "save_skipped_present", "save_failed", "save_dropped_full",
            "save_pool_failures", "saver_busy_us")
"""What the saver process counts (shared memory, in this order)."""

Item = tuple[int, ModelIdentity, bytes | bytearray]


class SaverProcess:
    """The engine's side of the saver: a bounded queue into a spawned process."""

    def __init__(self, pool: str, store_options: dict[str, Any], queue_size: int) -> None:
        context = multiprocessing.get_context("spawn")  # never fork an engine: its threads and locks stay behind
        self._queue: Any = context.Queue(queue_size)
        self._counters: Any = context.Array("q", len(COUNTERS), lock=False)
        self._process = context.Process(target=_serve, args=(pool, store_options, self._queue, self._counters),
                                        name="kvswitch-saver", daemon=True)
        # `vllm serve` runs its workers as daemonic processes, and multiprocessing refuses children of a daemon; the
        # saver is a daemon itself and ends with its engine, so the flag is lifted for this start only.
        current = multiprocessing.current_process()
        daemonic = current.daemon
        current.daemon = False
        try:
            self._process.start()
        finally:
            current.daemon = daemonic
        self.dropped_queue_full = 0
        """Blocks not queued: the saver was behind by `queue_size` blocks."""
        self._closed = False

    def submit(self, key: int, identity: ModelIdentity, payload: bytes | bytearray) -> bool:
        """Queue one block to write; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((key, identity, payload))
        except queue.Full:
            self.dropped_queue_full += 1
            return False
        return True

    def counters(self) -> dict[str, int]:
        """The saver process's counters, and the drops at the queue."""
        return {**dict(zip(COUNTERS, self._counters[:], strict=True)),
                "save_dropped_queue_full": self.dropped_queue_full}

    def close(self, timeout: float) -> None:
        """Write what is queued (up to `timeout` seconds), then stop the process."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(queue.Full):  # a saver that stopped taking blocks is terminated below
            self._queue.put(None, timeout=timeout)
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(1.0)
        self._queue.close()


def _serve(pool: str, store_options: dict[str, Any], blocks: Any, counters: Any) -> None:
    """The saver process: write queued blocks until told to stop (a None)."""
    index = {name: i for i, name in enumerate(COUNTERS)}
    with PoolStore(pool, **store_options) as store:
        done = False
        while not done:
            batch: list[Item] = []
            item = blocks.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= BATCH:
                    break
                try:
                    item = blocks.get_nowait()
                except queue.Empty:
                    break
            done = item is None
            if batch:
                begin = time.perf_counter()
                _write(store, batch, counters, index)
                counters[index["saver_busy_us"]] += int((time.perf_counter() - begin) * 1e6)
            counters[index["save_dropped_full"]] = store.stats.dropped_full
            counters[index["save_pool_failures"]] = store.stats.failures + store.stats.skipped


def _write(store: PoolStore, batch: list[Item], counters: Any, index: dict[str, int]) -> None:
    stored = store.present([key for key, _, _ in batch])
    for (key, identity, payload), there in zip(batch, stored, strict=True):
        if there:
            counters[index["save_skipped_present"]] += 1
        elif store.put(key, blockcodec.encode(identity, payload, key)):
            counters[index["saved_blocks"]] += 1
            counters[index["saved_bytes"]] += len(payload)
        else:
            counters[index["save_failed"]] += 1
