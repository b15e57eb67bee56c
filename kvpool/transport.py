"""How a client's datagrams reach the pool: a small interface, so tests can put loss (or a whole node) in between.

`UdpTransport` is the real one (one socket, one peer). Anything with `send`/`recv`/`close` and a `peer` text works:
tests wrap a transport to drop datagrams, or answer from an in-process `StorageNode`.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Protocol

MAX_REPLY = 2048
"""Largest datagram read; a KVP message is at most 164 bytes."""


class Transport(Protocol):
    """Datagrams to one peer and back."""

    peer: str
    """The peer, for messages ("10.0.0.100:7420")."""

    def send(self, data: bytes) -> None:
        """Send one datagram to the peer (best effort: UDP may lose it)."""

    def recv(self, timeout: float) -> bytes | None:
        """The next datagram received, or None when none came within `timeout` seconds."""

    def close(self) -> None: ...


class UdpTransport:
    """One UDP socket talking to one server address."""

    def __init__(self, server: tuple[str, int], bind: str = "0.0.0.0") -> None:
        self.server = server
        self.peer = f"{server[0]}:{server[1]}"
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):  # a window of replies arrives in a burst
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self._sock.bind((bind, 0))

    @property
    def address(self) -> tuple[str, int]:
        """The local (address, port): what the storage node sees as the writer."""
        host, port = self._sock.getsockname()
        return host, port

    def send(self, data: bytes) -> None:
        self._sock.sendto(data, self.server)

    def recv(self, timeout: float) -> bytes | None:
        self._sock.settimeout(max(timeout, 1e-4))
        try:
            return self._sock.recv(MAX_REPLY)
        except TimeoutError:
            return None

    def close(self) -> None:
        self._sock.close()
