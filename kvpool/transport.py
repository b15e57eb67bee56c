"""How a client's datagrams reach the pool: a small interface, so tests can put loss (or a whole node) in between.

`UdpTransport` is the real one (one socket, one peer). `LocalTransport` hands datagrams to an in-process storage
node (deterministic, no sockets); `LossyTransport` wraps either and drops datagrams both ways, seeded.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

IP_MTU = getattr(socket, "IP_MTU", 14)
"""getsockopt(IPPROTO_IP, IP_MTU): the path MTU of a connected socket (Linux; 14 in <linux/in.h>)."""
MAX_REPLY = 65535
"""Largest datagram read (any UDP payload); a KVP message is at most KVP_MAX_MESSAGE (8,236) bytes."""
SEND_WAIT = 1.0
"""Seconds a send waits for room in a full socket buffer before it raises (UDP: the datagram is lost)."""
FD_SETSIZE = 1024
"""select() takes descriptors below this (glibc); a socket numbered higher waits with poll()."""


class Transport(Protocol):
    """Datagrams to one peer and back."""

    peer: str
    """The peer, for messages ("10.0.0.100:7420")."""

    def send(self, data: bytes) -> None:
        """Send one datagram to the peer (best effort: UDP may lose it)."""

    def recv(self, timeout: float) -> bytes | memoryview | None:
        """The next datagram received, or None when none came within `timeout` seconds. A transport may hand
        out a view into a buffer it reuses (`UdpTransport`): valid until the next `recv`; copy what is kept."""

    def close(self) -> None: ...


class UdpTransport:
    """One UDP socket talking to one server address.

    The socket is non-blocking and a receive tries the socket before it waits: replies come in bursts (a
    window of them), and a socket with a timeout would poll() before every read, two system calls per reply
    where one does. Each datagram is read into one buffer allocated once (`recv_into`), and `recv` hands out a
    view of it, valid until the next `recv`: a reader copies each chunk once, into its block (`recv(65535)`
    allocated 64 KiB per datagram and shrank it, a reader's cost per chunk)."""

    def __init__(self, server: tuple[str, int], bind: str = "0.0.0.0") -> None:
        self.server = server
        self.peer = f"{server[0]}:{server[1]}"
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):  # a window of replies arrives in a burst (capped by rmem_max)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self._sock.bind((bind, 0))
        self._sock.setblocking(False)
        self._readable = select.poll()
        self._readable.register(self._sock, select.POLLIN)
        self._fine_wait = self._sock.fileno() < FD_SETSIZE
        """Wait with select(), whose timeout has microseconds: poll() rounds its timeout up to a whole
        millisecond, and a reader's waits (pacing, room for a span) are tenths of one: each rounded wait that no
        reply cut short left the path idle for the rest of the millisecond."""
        self._buffer = bytearray(MAX_REPLY)
        self._view = memoryview(self._buffer)

    @property
    def address(self) -> tuple[str, int]:
        """The local (address, port): what the storage node sees as the writer."""
        host, port = self._sock.getsockname()
        return host, port

    def path_mtu(self) -> int | None:
        """The MTU of the route towards the server (Linux IP_MTU of a socket connected to it), None if unknown.

        Asked on a second socket: connecting this one would make it drop datagrams from any other address."""
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect(self.server)
                return int(probe.getsockopt(socket.IPPROTO_IP, IP_MTU))
        except OSError:
            return None

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendto(data, self.server)
        except BlockingIOError:  # the send buffer is full: wait for room once, as a blocking send would
            select.select([], [self._sock], [], SEND_WAIT)
            self._sock.sendto(data, self.server)

    def recv(self, timeout: float) -> memoryview | None:
        """The next datagram, a view valid until the next `recv`; None when none came within `timeout` seconds
        (at once when `timeout` <= 0)."""
        try:
            return self._view[:self._sock.recv_into(self._buffer)]
        except BlockingIOError:
            if timeout <= 0 or not self._wait(timeout):
                return None
        try:
            return self._view[:self._sock.recv_into(self._buffer)]
        except BlockingIOError:  # readable, then gone (cannot happen to a socket only we read)
            return None

    def _wait(self, timeout: float) -> bool:
        """Whether a datagram came within `timeout` seconds (> 0)."""
        if self._fine_wait:
            return bool(select.select((self._sock,), (), (), timeout)[0])
        return bool(self._readable.poll(timeout * 1000))

    def close(self) -> None:
        with contextlib.suppress(KeyError, ValueError):  # closed before
            self._readable.unregister(self._sock)
        self._sock.close()


class Receiver(Protocol):
    """Anything that answers datagrams like `kvpool.server.StorageNode.receive`."""

    def receive(self, data: bytes, peer: tuple[str, int]) -> Sequence[Outgoing]: ...


class Outgoing(Protocol):
    parts: tuple[bytes, ...]
    to: tuple[str, int]


class LocalTransport:
    """A storage node in this process: `send` hands the datagram to the node, its replies queue up for `recv`.

    No sockets and no threads, so tests are deterministic; `address` is the writer the node sees. Datagrams the
    node addresses to another peer (acks settling another writer's staged write) go to `others`.
    """

    def __init__(self, node: Receiver, address: tuple[str, int] = ("127.0.0.1", 40000)) -> None:
        self.node = node
        self.address = address
        self.peer = "in-process node"
        self.inbox: deque[bytes] = deque()
        self.others: list[tuple[tuple[str, int], bytes]] = []

    def send(self, data: bytes) -> None:
        for out in self.node.receive(data, self.address):
            payload = b"".join(out.parts)
            if out.to == self.address:
                self.inbox.append(payload)
            else:
                self.others.append((out.to, payload))

    def recv(self, timeout: float) -> bytes | None:
        if self.inbox:
            return self.inbox.popleft()
        time.sleep(max(timeout, 0.0))  # nothing can arrive later: the node answers inside `send`
        return None

    def close(self) -> None:
        self.inbox.clear()


class LossyTransport:
    """Wraps a transport and drops each datagram, either way, with probability `loss` (seeded: reproducible).

    For tests and loss experiments; `dropped` counts what it threw away."""

    def __init__(self, inner: Transport, loss: float, rng: random.Random,
                 drop: Callable[[bytes, str], bool] | None = None) -> None:
        self.inner = inner
        self.peer = inner.peer
        self.loss = loss
        self.rng = rng
        self.drop = drop
        """Extra rule: drop(datagram, "out" | "in") -> True to drop it (on top of the random loss); it is given
        bytes (a copy of a datagram the inner transport handed out as a view)."""
        self.dropped = 0

    def _lost(self, data: bytes | memoryview, direction: str) -> bool:
        lost = self.rng.random() < self.loss or (self.drop is not None and self.drop(bytes(data), direction))
        self.dropped += lost
        return lost

    def path_mtu(self) -> int | None:
        mtu: Callable[[], int | None] | None = getattr(self.inner, "path_mtu", None)
        return mtu() if mtu is not None else None

    def send(self, data: bytes) -> None:
        if not self._lost(data, "out"):
            self.inner.send(data)

    def recv(self, timeout: float) -> bytes | memoryview | None:
        deadline = time.monotonic() + timeout
        while True:
            data = self.inner.recv(max(0.0, deadline - time.monotonic()))
            if data is None or not self._lost(data, "in"):
                return data
            if time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        self.inner.close()
