"""Run independent replays on several cores: forked workers inherit the (large, read-only) block streams,
so only the small task descriptions and the results cross process boundaries.

Fork is used on purpose: a stream of 300k frozen `BlockInfo`s would take longer to pickle to every worker
than some replays take to run. Workers pull tasks from a queue (the slow policies do not hold up the rest)
and report progress in batches.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import traceback
from collections.abc import Callable, Sequence
from typing import Any

Progress = Callable[[int], None]
PROGRESS_BATCH = 20_000
"""Block references a worker replays between two progress messages."""
WORKER_CHECK_S = 1.0
"""Seconds without a message after which the parent checks that no worker died (killed, aborted): a dead worker
fails the run with WorkerError instead of leaving the parent waiting for results that cannot come."""


def default_jobs() -> int:
    """Worker processes to use: the CPUs this process may run on, at most 2 (the project's CI size)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(2, cpus))


def _worker(fn, shared, tasks, messages) -> None:
    pending = 0

    def progress(n: int) -> None:
        nonlocal pending
        pending += n
        if pending >= PROGRESS_BATCH:
            messages.put(("progress", None, pending))
            pending = 0

    while True:
        item = tasks.get()
        if item is None:
            break
        index, task = item
        try:
            result = fn(shared, task, progress)
        except BaseException:  # reported to the parent, which raises it there
            messages.put(("error", index, traceback.format_exc()))
            continue
        messages.put(("result", index, result))
    if pending:
        messages.put(("progress", None, pending))
    messages.put(("done", None, None))


class WorkerError(RuntimeError):
    """A task failed in a worker process; the message holds the worker's traceback (or how the worker died)."""


def _raise_if_one_died(workers: Sequence[Any]) -> None:
    """WorkerError when a worker ended without finishing (an exit code other than 0: a signal, os._exit)."""
    for worker in workers:
        code = worker.exitcode
        if code not in (None, 0):
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise WorkerError(f"worker process {worker.pid} died ({how}) before finishing its tasks")


def longest_first(tasks: Sequence[Any], cost: Callable[[Any], float] | None) -> list[int]:
    """Indices of `tasks` in the order workers should take them: by decreasing `cost` (ties and no `cost`:
    as listed), so that no long replay starts last while the other worker idles."""
    if cost is None:
        return list(range(len(tasks)))
    costs = [cost(t) for t in tasks]
    return sorted(range(len(tasks)), key=lambda i: -costs[i])


def run_tasks(fn: Callable[[Any, Any, Progress], Any], shared: Any, tasks: Sequence[Any], jobs: int,
              progress: Progress | None = None, cost: Callable[[Any], float] | None = None) -> list[Any]:
    """`[fn(shared, task, progress) for task in tasks]`, on `jobs` forked processes when jobs > 1.

    `cost` (an estimate of a task's CPU time, any unit) makes workers take the costliest tasks first; the
    results are in task order either way."""
    report = progress or (lambda n: None)
    if jobs <= 1 or len(tasks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(shared, task, report) for task in tasks]
    context = multiprocessing.get_context("fork")
    task_queue, messages = context.Queue(), context.Queue()
    for index in longest_first(tasks, cost):
        task_queue.put((index, tasks[index]))
    workers = [context.Process(target=_worker, args=(fn, shared, task_queue, messages), daemon=True)
               for _ in range(min(jobs, len(tasks)))]
    for _ in workers:
        task_queue.put(None)
    for worker in workers:
        worker.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    running = len(workers)
    try:
        while running:
            try:
                kind, index, payload = messages.get(timeout=WORKER_CHECK_S)
            except queue.Empty:
                _raise_if_one_died(workers)
                continue
            if kind == "progress":
                report(payload)
            elif kind == "result":
                results[index] = payload
            elif kind == "error":
                errors.append(payload)
            else:
                running -= 1
    finally:
        for worker in workers:
            worker.join(timeout=5)
            if worker.is_alive():
                worker.terminate()
    if errors:
        raise WorkerError(errors[0])
    return [results[i] for i in range(len(tasks))]
