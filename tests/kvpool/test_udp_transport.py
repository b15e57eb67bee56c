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
        assert [bytes(t.recv(0.0) or b""), bytes(t.recv(0.0) or b"")] == [b"two", b"three"]
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


def test_a_receive_hands_out_a_view_of_one_buffer_that_the_next_receive_reuses():
    """Datagrams are read into one buffer (no allocation per datagram): each `recv` is a view of exactly the
    datagram's bytes, and the next `recv` overwrites it, so a caller that keeps a datagram must copy it."""
    with contextlib.closing(_peer()) as peer, contextlib.closing(UdpTransport(peer.getsockname(), "127.0.0.1")) as t:
        t.send(b"ping")
        _, address = peer.recvfrom(100)
        big, small = bytes(range(256)) * 32, b"xy"
        peer.sendto(big, address)
        peer.sendto(small, address)
        first = t.recv(ARRIVES_S)
        assert isinstance(first, memoryview) and len(first) == len(big) and first == big
        kept = bytes(first)
        second = t.recv(ARRIVES_S)
        assert second == small and len(second) == 2, "a view of the datagram only, not of the whole buffer"
        assert first[:2] == small, "the buffer was reused: the first view now shows the second datagram"
        assert kept == big, "a copy taken in time keeps the datagram"


def test_a_wait_shorter_than_a_millisecond_is_asked_for_as_it_is(monkeypatch):
    """poll() would round 0.2 ms up to 1 ms; select() gets the wait in microseconds."""
    import select

    asked: list[float] = []
    real = select.select

    def recording(r, w, x, timeout):
        asked.append(timeout)
        return real(r, w, x, timeout)

    with contextlib.closing(_peer()) as peer:
        t = UdpTransport(peer.getsockname(), "127.0.0.1")
        monkeypatch.setattr(select, "select", recording)
        assert t.recv(0.0002) is None
        t.close()
    assert asked == [0.0002]


def test_a_socket_numbered_beyond_select_waits_with_poll(monkeypatch):
    import select

    from kvpool import transport

    monkeypatch.setattr(transport, "FD_SETSIZE", 0)  # every descriptor is then beyond what select() takes
    monkeypatch.setattr(select, "select", lambda *a: (_ for _ in ()).throw(AssertionError("select() called")))
    with contextlib.closing(_peer()) as peer:
        t = UdpTransport(peer.getsockname(), "127.0.0.1")
        assert t.recv(0.0002) is None, "nothing sent: the poll times out"
        peer.sendto(b"late", t.address)
        got = t.recv(ARRIVES_S)
        assert got is not None and bytes(got) == b"late"
        t.close()
