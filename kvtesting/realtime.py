"""The switch and the storage node before the readers: real-time scheduling for a bed's device processes.

On the testbed every machine is a process of one small computer (two cores in CI). A switch and a storage node
are machines of their own; their processes, sharing two cores with N reader processes under the fair
scheduler, are preempted whenever a reader wakes and get one share among N + 2: with 32 readers of their own
blocks the scheduler, not the pool, set the aggregate (docs/status.md). Run at SCHED_FIFO, no reader preempts
them and neither preempts the other (one priority: each runs until it waits), while a reader still gets every
moment they are idle. The switch alone at SCHED_FIFO does not do: it then preempts the node on every datagram of
a reply burst and a lone reader slows by a fifth.

Only benchmarks ask for it (`kvtesting.vethnet.VethNetOptions.realtime_devices`). A kernel that refuses
(no CAP_SYS_NICE) leaves the processes as they were, with a warning: the figures are then the shared ones.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

DEVICE_PRIORITY = 10
"""SCHED_FIFO priority of a device process: above every normal process, far below the kernel's own threads."""


def process_threads(pid: int) -> list[int]:
    """Thread ids of `pid` and of every process below it (`ip netns exec` may run the device as its child)."""
    threads: list[int] = []
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except FileNotFoundError:
            continue
        threads += tids
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    pending += [int(c) for c in f.read().split()]
            except FileNotFoundError:
                continue
    return threads


def make_realtime(pid: int, priority: int = DEVICE_PRIORITY) -> bool:
    """Every thread of `pid` (and its children) at SCHED_FIFO `priority`; threads they start later inherit it.
    Call it once the process is up (its start-up, a compile, runs at normal priority). False when the kernel
    refused or the process is gone."""
    threads = process_threads(pid)
    try:
        for tid in threads:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        log.warning("cannot run process %d at SCHED_FIFO (needs CAP_SYS_NICE): it shares the CPUs as before", pid)
        return False
    except ProcessLookupError:
        return False
    return bool(threads)


def fifo_allowed() -> bool:
    """Whether this kernel gives this process SCHED_FIFO (root alone is not enough in a cgroup with no real-time
    budget): tried on the calling thread, which is put back as it was."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, policy, param)
    return True


def is_realtime(pid: int) -> bool:
    """Whether every thread of `pid` (and its children) runs at SCHED_FIFO."""
    threads = process_threads(pid)
    try:
        return bool(threads) and all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in threads)
    except ProcessLookupError:
        return False
