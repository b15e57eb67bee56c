"""Forked workers give the same results, in task order, as running in-process; failures surface."""

import os
import signal

import pytest

from evaluation.parallel import WorkerError, run_tasks


def scaled(shared, task, progress):
    progress(task)
    if task < 0:
        raise ValueError("negative task")
    return shared["factor"] * task


def test_workers_return_results_in_task_order_and_report_all_progress():
    seen = []
    tasks = list(range(1, 9))
    assert run_tasks(scaled, {"factor": 3}, tasks, jobs=2, progress=seen.append) == [3 * t for t in tasks]
    assert sum(seen) == sum(tasks)
    assert run_tasks(scaled, {"factor": 3}, tasks, jobs=1) == [3 * t for t in tasks]


def test_costliest_tasks_go_first_and_results_stay_in_task_order():
    from evaluation.parallel import longest_first

    tasks = [1, 5, 2, 5, 3]
    assert longest_first(tasks, None) == [0, 1, 2, 3, 4]
    assert longest_first(tasks, float) == [1, 3, 4, 2, 0]
    assert run_tasks(scaled, {"factor": 2}, tasks, jobs=2, cost=float) == [2 * t for t in tasks]


def test_a_failing_task_raises_with_the_worker_traceback():
    with pytest.raises(WorkerError, match="negative task"):
        run_tasks(scaled, {"factor": 1}, [1, -1, 2], jobs=2)


def dies(shared, task, progress):
    if task == 2:
        os.kill(os.getpid(), signal.SIGABRT)  # a C library's abort() in the worker
    return task


def test_a_worker_that_dies_fails_the_run_instead_of_hanging_it():
    with pytest.raises(WorkerError, match="died \\(signal SIGABRT\\)"):
        run_tasks(dies, None, [1, 2, 3, 4], jobs=2)
