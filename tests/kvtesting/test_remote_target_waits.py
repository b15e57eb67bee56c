"""`RemoteTarget.process_expecting` and `drain_digests_expecting`: a caller that knows what a correct switch sends
gets all of it, however long the switch takes between copies (a busy machine), with no real switch: a fake
switch answers each frame by writing its outputs into the port's socket from a timer, the second one later than
the quiescence windows allow.

Only what the expecting calls promise is asserted (they wait for what is due); what plain `process` would have
returned depends on the machine's load, so it is never asserted here."""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
from dataclasses import dataclass, field

import pytest
from p4.v1 import p4runtime_pb2

from kvtesting.remote_target import Quiescence, RemoteTarget

PORT = 1
LATE_S = 0.3
"""When the fake switch sends its second frame: far beyond the windows below."""
WINDOWS = Quiescence(first_frame_s=0.01, quiet_s=0.01, digest_quiet_s=0.01, expect_cap_s=20.0)


@dataclass
class FakePorts:
    """One port: what the harness sends goes to `sent` and makes the fake switch answer with `answers`
    (delay in seconds, frame), read by the harness from `peer`."""

    answers: list[tuple[float, bytes]] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    timers: list[threading.Timer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.peer, self.switch_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socks = {PORT: self.peer}

    def send(self, port: int, frame: bytes) -> None:
        self.sent.append(frame)
        for delay, answer in self.answers:
            if delay == 0:
                self.switch_end.send(answer)
            else:
                t = threading.Timer(delay, self.switch_end.send, (answer,))
                self.timers.append(t)
                t.start()

    def receive_ready(self, port: int) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.peer.recv(65536, socket.MSG_DONTWAIT))
            except BlockingIOError:
                return out

    def close(self) -> None:
        for t in self.timers:
            t.join()
        self.peer.close()
        self.switch_end.close()


class FakeSession:
    """The P4Runtime session's queues and wake pipe, with nothing behind them."""

    def __init__(self) -> None:
        self.packet_ins: queue.Queue = queue.Queue()
        self.digest_lists: queue.Queue = queue.Queue()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)

    @property
    def wake_fd(self) -> int:
        return self._r

    def wake(self) -> None:
        os.write(self._w, b"x")

    def clear_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._r, 4096)

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)


@dataclass(frozen=True)
class _Named:
    name: str


@dataclass(frozen=True)
class _Digest:
    preamble: _Named


class FakeNames:
    """P4Info names: no controller headers; digest id 7 is `hot_t` with one field `v`."""

    def __init__(self) -> None:
        self.controller_headers: dict = {}
        self.digest_by_id = {7: _Digest(_Named("hot_t"))}

    def digest_fields(self, digest: _Digest) -> list[_Named]:
        return [_Named("v")]


@pytest.fixture
def bed():
    ports, session = FakePorts(), FakeSession()
    target = RemoteTarget(session, FakeNames(), ports, cpu_port=510, quiescence=WINDOWS)  # type: ignore[arg-type]
    timers: list[threading.Timer] = []

    def later(delay: float, fn) -> None:
        t = threading.Timer(delay, fn)
        timers.append(t)
        t.start()

    yield target, ports, session, later
    for t in timers:
        t.join()
    ports.close()
    session.close()


def test_every_frame_a_packet_is_due_comes_back_however_late(bed) -> None:
    target, ports, _, _ = bed
    ports.answers = [(0, b"first"), (LATE_S, b"second")]
    out = target.process_expecting(PORT, b"request", 2)
    assert sorted(out) == [(PORT, b"first"), (PORT, b"second")]
    assert ports.sent == [b"request"] and target.late_frames == []


def test_an_extra_frame_right_after_the_due_ones_is_still_seen(bed) -> None:
    """Waiting for what is due does not hide a frame too many that comes with them."""
    target, ports, _, _ = bed
    ports.answers = [(0, b"a"), (0, b"b"), (0, b"extra")]
    assert [f for _, f in target.process_expecting(PORT, b"request", 2)] == [b"a", b"b", b"extra"]


def test_every_digest_that_is_due_is_drained_however_late(bed) -> None:
    target, _, session, later = bed

    def digest(value: int) -> None:
        dl = p4runtime_pb2.DigestList(digest_id=7)
        dl.data.add().struct.members.add().bitstring = bytes([value])
        session.digest_lists.put(dl)
        session.wake()

    digest(1)
    later(LATE_S, lambda: digest(2))
    got = target.drain_digests_expecting(2)
    assert [m.fields for m in got] == [(("v", 1),), (("v", 2),)]
