"""Storage-node calls made off the pool lock and off the P4Runtime stream thread: one worker, a bounded queue.

A call to the storage node (a recycling TIER_MOVE, the GET of a slot fill; `controller.storage`) may wait up to
its timeout (0.5 s by default). Made under the pool lock, or on the thread that serves digests and INSERTs, it
stalls every admission behind it; under incast that amplifies the load instead of absorbing it. The pool hands
such calls to a `StorageWork` once it has released its lock: `StorageWorker` runs them on a thread of its own
and drops (and counts) what does not fit its queue, `InlineStorageWork` runs them at once on the caller's
thread (unit tests, dry runs).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from controller.metrics import Metrics

log = logging.getLogger(__name__)

StorageJob = Callable[[], object]
"""One storage-node call and what follows it (it takes the pool lock itself to record the outcome); its result
is ignored."""


class StorageWork(Protocol):
    """Where the pool sends its storage-node calls."""

    def submit(self, job: StorageJob, what: str) -> bool:
        """Run `job` (described by `what`, for logs) some time soon; False when it was dropped."""
        ...


class InlineStorageWork:
    """Runs each job at once on the submitting thread (the pool submits only without its lock held)."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics()

    def submit(self, job: StorageJob, what: str) -> bool:
        _run(job, what, self.metrics)
        return True


class StorageWorker:
    """One daemon thread draining a bounded queue of storage jobs; a full queue drops the newest job."""

    def __init__(self, metrics: Metrics | None = None, max_queued: int = 1024, name: str = "storage-worker") -> None:
        if max_queued < 1:
            raise ValueError("max_queued must be ≥ 1")
        self.metrics = metrics or Metrics()
        self._queue: queue.Queue[tuple[StorageJob, str] | None] = queue.Queue(maxsize=max_queued)
        self._thread = threading.Thread(target=self._drain, name=name, daemon=True)
        self._started = False
        self._dropped_logged = 0

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> StorageWorker:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def submit(self, job: StorageJob, what: str) -> bool:
        try:
            self._queue.put_nowait((job, what))
        except queue.Full:
            self.metrics.count("storage_jobs", "dropped")
            dropped = self.metrics.storage_jobs["dropped"]
            if dropped >= 2 * self._dropped_logged:  # 1, 2, 4, 8, …: a storm is visible without flooding the log
                self._dropped_logged = dropped
                log.warning("storage worker queue full (%d jobs): dropped %s (%d dropped so far)",
                            self._queue.maxsize, what, dropped)
            return False
        self.metrics.count("storage_jobs", "queued")
        return True

    def join(self) -> None:
        """Wait until every job queued so far has run (tests, shutdown)."""
        self._queue.join()

    def close(self, timeout: float = 2.0) -> None:
        """Stop after the jobs already queued (waits at most `timeout` seconds for the thread)."""
        if not self._started:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            log.warning("storage worker did not drain within %.1f s; abandoning its queue", timeout)
            return
        self._thread.join(timeout)

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                _run(*item, self.metrics)
            finally:
                self._queue.task_done()


def _run(job: StorageJob, what: str, metrics: Metrics) -> None:
    try:
        job()
    except Exception:  # one failed call must not stop the others
        metrics.count("storage_jobs", "failed")
        log.exception("storage job failed: %s", what)
        return
    metrics.count("storage_jobs", "done")


__all__ = ["InlineStorageWork", "StorageJob", "StorageWork", "StorageWorker"]
