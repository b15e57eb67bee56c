"""`kvtesting.realtime`: a bed's device processes run at SCHED_FIFO, with every thread, those they start later and
their children's (`ip netns exec` may run the device below it); a kernel that refuses leaves them as they were."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from kvtesting import realtime
from kvtesting.realtime import fifo_allowed, is_realtime, make_realtime, process_threads

_LATER_THREAD = """
import os, sys, threading
sys.stdin.readline()
got = []
t = threading.Thread(target=lambda: got.append(os.sched_getscheduler(0)))
t.start(); t.join()
print(got[0], flush=True)
"""
"""Once told, starts a thread and prints that thread's scheduling policy."""


def _child(code: str, shell: bool = False) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", code]
    if shell:  # a parent that stays, with the device as its child, as `ip netns exec` may leave it
        args = ["sh", "-c", '"$0" -c "$1"; true', sys.executable, code]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


@pytest.fixture
def may_set_fifo() -> None:
    if not fifo_allowed():
        pytest.skip("this kernel gives no SCHED_FIFO here (not root, or no real-time budget in this cgroup)")


def test_a_device_and_the_threads_it_starts_later_run_at_fifo(may_set_fifo: None) -> None:
    child = _child(_LATER_THREAD)
    try:
        assert not is_realtime(child.pid)
        assert make_realtime(child.pid)
        assert is_realtime(child.pid)
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
    assert int(out) == os.SCHED_FIFO


def test_a_device_below_a_launcher_is_found_and_made_realtime(may_set_fifo: None) -> None:
    child = _child("import sys; sys.stdin.readline()", shell=True)
    try:
        for _ in range(500):  # until the shell has started its child
            threads = process_threads(child.pid)
            if len(threads) >= 2:
                break
            os.sched_yield()
        assert len(threads) >= 2, "the shell and the python below it"
        assert make_realtime(child.pid)
        assert all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in process_threads(child.pid))
    finally:
        child.communicate("go\n", timeout=60)


def test_a_refusing_kernel_leaves_the_process_as_it_was(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    def refuse(tid: int, policy: int, param: os.sched_param) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(realtime.os, "sched_setscheduler", refuse)
    child = _child("import sys; sys.stdin.readline()")
    try:
        with caplog.at_level(logging.WARNING, logger="kvtesting.realtime"):
            assert not make_realtime(child.pid)
        assert "CAP_SYS_NICE" in caplog.text
        assert not is_realtime(child.pid)
    finally:
        child.communicate("go\n", timeout=60)


def test_asking_whether_fifo_is_allowed_leaves_the_caller_as_it_was() -> None:
    before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    allowed = fifo_allowed()
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before
    if os.geteuid() != 0:
        assert not allowed, "without CAP_SYS_NICE no kernel gives SCHED_FIFO"


def test_a_gone_process_is_not_made_realtime() -> None:
    child = _child("pass")
    child.communicate(timeout=60)
    assert not make_realtime(child.pid)
    assert not is_realtime(child.pid)
