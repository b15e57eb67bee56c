"""What a test knows a correct switch does, waited for on any `Target`, so that no verdict depends on the load.

An in-process switch has finished with a packet when `process` returns. A switch process (`RemoteTarget`) gives
no "done" signal: its plain `process` stops at a quiet gap a busy machine can miss, and a counter read right
after a dropped packet may come before the switch counted it. A test that knows what to expect says so here,
and the wait on a switch process ends when that came (or at a cap no load eats, reached only when the switch
fails to do it):

    process(target, port, data, frames)   that many output frames (`RemoteTarget.process_expecting`)
    more(target, frames)                  that many more frames of work already under way, no packet sent
    digests(target, count)                that many digests (`RemoteTarget.drain_digests_expecting`)
    settled(target, read, expected)       `read()` again until it returns `expected` (counters)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from softswitch.target import DigestMessage, Target

T = TypeVar("T")

SETTLE_CAP_S = 30.0
"""Longest wait for a counter to reach the value the test expects; reached only when the switch never gets there."""
SETTLE_POLL_S = 0.05
"""Between two reads of a value that has not settled yet."""


def waits(target: Any) -> bool:
    """True for a target whose work goes on after a call returns (a switch process), where waiting is needed."""
    return hasattr(target, "process_expecting")


def process(target: Target, port: int, data: bytes, frames: int | None) -> list[tuple[int, bytes]]:
    """`target.process`; with `frames`, a switch process is waited on until that many frames came."""
    if frames is None or not waits(target):
        return target.process(port, data)
    return target.process_expecting(port, data, frames)  # type: ignore[attr-defined]


def more(target: Target, frames: int, cap_s: float | None = None) -> list[tuple[int, bytes]]:
    """Frames still to come from packets already sent, when the test learned only afterwards (from counters)
    that a correct switch may send `frames` more: [] from an in-process switch, which had sent everything when
    its `process` returned; a switch process is waited on until that many came (`RemoteTarget.receive_expecting`),
    at most `cap_s` (default its expect cap) where the test accepts that none come."""
    if not waits(target):
        return []
    return target.receive_expecting(frames, cap_s)  # type: ignore[attr-defined]


def digests(target: Target, count: int | None) -> list[DigestMessage]:
    """`target.drain_digests`; with `count`, a switch process is waited on until that many digests came."""
    if count is None or not waits(target):
        return list(target.drain_digests())
    return target.drain_digests_expecting(count)  # type: ignore[attr-defined]


def settled(target: Target, read: Callable[[], T], expected: T | None) -> T:
    """`read()`; on a switch process, read again until it returns `expected` (up to `SETTLE_CAP_S`).

    The last value read is returned, so the caller's assertion still decides (and shows what was there)."""
    got = read()
    if expected is None or not waits(target):
        return got
    deadline = time.monotonic() + SETTLE_CAP_S
    while got != expected and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        got = read()
    return got
