"""`kvpool.transport.UdpTransport` on loopback: what a receive returns, with and without waiting."""

from __future__ import annotations

import contextlib
import socket
import threading

from kvpool.transport import UdpTransport

ARRIVES_S = 30.0
"""A wait for a datagram that is on its way: ends when it comes, so only a machine stalled this long fails."""


def _peer() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def test_a_zero_timeout_receive_returns_what_is_queued_in_order_then_none():
    with contextlib.closing(_peer()) as peer, contextlib.closing(UdpTransport(peer.getsockname(), "127.0.0.1")) as t:
        t.send(b"ping")
        _, address = peer.recvfrom(100)
        for data in (b"one", b"two", b"three"):
            peer.sendto(data, address)
        assert t.recv(ARRIVES_S) == b"one", "the first arrives (loopback delivers at once)"
        assert [t.recv(0.0), t.recv(0.0)] == [b"two", b"three"]
        assert t.recv(0.0) is None
        assert t.recv(-1.0) is None, "a deadline already past is a zero timeout"


def test_a_receive_waits_for_a_datagram_sent_after_it_started():
    with contextlib.closing(_peer()) as peer, contextlib.closing(UdpTransport(peer.getsockname(), "127.0.0.1")) as t:
        t.send(b"ping")
        _, address = peer.recvfrom(100)
        started = threading.Event()

        def answer() -> None:
            started.wait(ARRIVES_S)
            peer.sendto(b"late", address)

        thread = threading.Thread(target=answer)
        thread.start()
        started.set()
        try:
            assert t.recv(ARRIVES_S) == b"late"
        finally:
            thread.join()


def test_a_receive_with_nothing_sent_ends_empty_and_close_may_come_twice():
    with contextlib.closing(_peer()) as peer:
        t = UdpTransport(peer.getsockname(), "127.0.0.1")
        assert t.recv(0.01) is None
        t.close()
        t.close()
