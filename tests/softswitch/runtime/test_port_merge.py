"""`PortSet._merge` takes frames of all ports oldest first, and in runs: one poll of the ports per run of a port's
frames that no other port's frame interrupts, not one per frame (a switch with a reader on each of 32 ports
polled all of them for every frame). Queues are filled by hand with arrival times; no socket is opened."""

from __future__ import annotations

import time
from collections import deque

from softswitch.ports import PortSet, PortSpec


class _Poll:
    """A poll of the ports that finds nothing new in any socket, and counts how often it is asked."""

    def __init__(self) -> None:
        self.calls = 0

    def poll(self, timeout: int = 0) -> list[tuple[int, int]]:
        self.calls += 1
        return []


def _merge(arrivals: dict[int, list[int]]) -> tuple[list[tuple[int, int]], int]:
    got: list[tuple[int, int]] = []
    ports = PortSet([PortSpec(number, f"if{number}") for number in arrivals],
                    lambda port, frame: got.append((port, int.from_bytes(frame, "big"))))
    queues = {port: deque((t, t.to_bytes(8, "big")) for t in times) for port, times in arrivals.items()}
    readable = _Poll()
    ports._merge(queues, readable, {})  # type: ignore[arg-type]
    return got, readable.calls


def test_frames_of_several_ports_are_taken_oldest_first() -> None:
    got, _ = _merge({1: [1, 2, 3, 10, 11], 2: [5, 12], 3: [4, 20]})
    assert [t for _, t in got] == [1, 2, 3, 4, 5, 10, 11, 12, 20]
    assert got[3] == (3, 4) and got[4] == (2, 5) and got[-1] == (3, 20)


def test_a_run_of_one_port_costs_one_poll_not_one_per_frame() -> None:
    # a storage node's 40 replies, one reader's request among them, 30 idle reader ports
    arrivals = {1: list(range(1, 21)) + list(range(22, 42)), 2: [21]} | {p: [] for p in range(3, 33)}
    got, polls = _merge(arrivals)
    assert [t for _, t in got] == list(range(1, 42))
    assert polls <= 4, polls


def test_frames_newer_than_the_poll_wait_for_the_next_poll() -> None:
    """A frame that arrived after the poll that found another port empty may be younger than what that port
    receives next: it is not taken in the run, the ports are polled again first."""
    later = time.time_ns() + 60 * 10**9  # after the first poll
    got: list[tuple[int, int]] = []
    ports = PortSet([PortSpec(n, f"if{n}") for n in (1, 2, 3)],
                    lambda port, frame: got.append((port, int.from_bytes(frame, "big"))))
    queues = {1: deque([(1, (1).to_bytes(8, "big")), (later, later.to_bytes(8, "big"))]),
              2: deque([(later + 5, (later + 5).to_bytes(8, "big"))]), 3: deque()}

    class _SecondPollFindsPort3(_Poll):
        def poll(self, timeout: int = 0) -> list[tuple[int, int]]:
            super().poll(timeout)
            return [(3, 1)] if self.calls == 2 else []

    def read(port: int, queue: deque) -> None:  # port 3's socket: one frame, received between the polls
        queue.append((later - 1, (later - 1).to_bytes(8, "big")))

    ports._read = read  # type: ignore[method-assign]
    ports._merge(queues, _SecondPollFindsPort3(), {3: 3})  # type: ignore[arg-type]
    assert got == [(1, 1), (3, later - 1), (1, later), (2, later + 5)]
