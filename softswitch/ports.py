"""Real switch ports: AF_PACKET raw sockets on named Linux interfaces (`-i 1@veth0`).

One selector thread reads every port and hands each frame to `on_frame(port, bytes)` (the `Device`, whose lock
serialises the single-threaded target). Frames the kernel reports as PACKET_OUTGOING are our own
transmissions echoed back on the socket; they are skipped so the switch never sees its output as input.

Frames of all ports are processed in the order they ARRIVED (the kernel's receive timestamp, SO_TIMESTAMPNS),
as BMv2 queues every port's frames into one input buffer. Draining one port's backlog before the next would
reorder across ports: a storage node's reply would overtake readers' GETs that arrived before it, and state
the program keeps between packets (request coalescing: a GET joins the pending entry only if it is processed
before the reply frees it) would see an order that never happened on the wire.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pathlib
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from softswitch.pcap import PortCapture

log = logging.getLogger(__name__)

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
"""Linux >= 4.20: the kernel stops echoing our own transmissions to the socket (we also check pkttype)."""
MAX_FRAME = 65535
"""Receive buffer per frame: veth may hand us GRO-merged frames larger than the MTU."""
SO_TIMESTAMPNS = 35
"""Linux: every received frame carries its arrival time (SCM_TIMESTAMPNS, a struct timespec) as ancillary data."""
_TIMESPEC = struct.Struct("@qq")
READ_BATCH = 64
"""Frames read from one port at a time into its arrival queue."""
MERGE_BATCH = 256
"""Frames processed before the loop looks at its wake-up pipe again."""


class PortError(Exception):
    """A port cannot be opened (no such interface, no permission) or is given twice."""


class Ports(Protocol):
    """What the switch needs of its ports: AF_PACKET interfaces (`PortSet`) or a nanomsg socket
    (`softswitch.nanomsg.NanomsgPorts`). Received frames go to the `on_frame(port, frame)` given at creation."""

    def open(self) -> None:
        """Acquire the sockets; raises PortError saying which one failed."""

    def start(self) -> None:
        """Start receiving."""

    def send(self, port: int, frame: bytes) -> None:
        """Transmit `frame` out of `port`; a port without a link drops it."""

    def close(self) -> None:
        """Stop receiving and release everything `open` acquired."""


@dataclass(frozen=True)
class PortSpec:
    number: int
    """The P4 port number (`standard_metadata.ingress_port`)."""
    interface: str

    @classmethod
    def parse(cls, text: str) -> PortSpec:
        """`N@IFACE`, simple_switch's `-i` syntax."""
        num, sep, iface = text.partition("@")
        if not sep or not num.isdigit() or not iface:
            raise PortError(f"bad interface spec {text!r}: expected PORT@INTERFACE, e.g. 1@veth0")
        return cls(int(num), iface)


class PortSet:
    """The switch's ports; `send` transmits, a background thread receives."""

    def __init__(self, specs: Sequence[PortSpec], on_frame: Callable[[int, bytes], None],
                 pcap_dir: pathlib.Path | None = None,
                 on_burst: Callable[[Sequence[tuple[int, bytes]]], None] | None = None,
                 profile_to: pathlib.Path | None = None) -> None:
        """`on_burst`, if given, gets the frames read together (in arrival order) in one call instead, so the
        switch can queue them towards their egress ports as a burst (`SoftSwitch.process_burst`).
        `profile_to`, if given, gets the cProfile statistics of the receiving thread (where every frame is
        processed) when the ports close."""
        numbers = [s.number for s in specs]
        ifaces = [s.interface for s in specs]
        if len(set(numbers)) != len(numbers):
            raise PortError(f"a port number is given twice: {numbers}")
        if len(set(ifaces)) != len(ifaces):
            raise PortError(f"an interface is given twice: {ifaces}")
        self._specs = list(specs)
        self._on_frame = on_frame
        self._on_burst = on_burst
        self._pcap_dir = pcap_dir
        self._profile_to = profile_to
        self._socks: dict[int, socket.socket] = {}
        self._captures: dict[int, PortCapture] = {}
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self.received = 0
        self.sent = 0
        self.send_errors = 0

    def open(self) -> None:
        """Bind one raw socket per interface; raises PortError naming the interface that failed."""
        try:
            for spec in self._specs:
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                try:
                    sock.bind((spec.interface, 0))
                except OSError as e:
                    sock.close()
                    reason = "no such interface" if e.errno in (errno.ENODEV, errno.ENXIO) else e.strerror
                    raise PortError(f"cannot open port {spec.number} on interface {spec.interface}: {reason}") \
                        from None
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                with contextlib.suppress(OSError):
                    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                sock.setblocking(False)
                self._socks[spec.number] = sock
                if self._pcap_dir is not None:
                    self._captures[spec.number] = PortCapture(self._pcap_dir, spec.interface)
        except PermissionError:
            self.close()
            raise PortError("raw sockets need root (or CAP_NET_RAW)") from None
        except PortError:
            self.close()
            raise

    def start(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="ports", daemon=True)
        self._thread.start()

    def send(self, port: int, frame: bytes) -> None:
        sock = self._socks.get(port)
        if sock is None:
            return  # no interface on that port: the frame leaves nowhere, as on BMv2
        try:
            sock.send(frame)
            self.sent += 1
        except OSError as e:
            self.send_errors += 1
            log.debug("send on port %d failed: %s", port, e)
            return
        cap = self._captures.get(port)
        if cap is not None:
            cap.sent(frame)

    def _loop(self) -> None:
        if self._profile_to is None:
            self._serve()
            return
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            self._serve()
        finally:
            profiler.disable()
            profiler.dump_stats(self._profile_to)

    def _serve(self) -> None:
        queues: dict[int, deque[tuple[int, bytes]]] = {number: deque() for number in self._socks}
        readable = select.poll()
        for sock in self._socks.values():
            readable.register(sock, select.POLLIN)
        port_of = {sock.fileno(): number for number, sock in self._socks.items()}
        # One blocking poll of every port and the wake-up pipe per wake-up, whose answer is also the first look
        # at which ports have frames: a lone reader's frames come in small bursts, so what a wake-up costs
        # besides its frames (a selector's epoll, then a poll of the ports) is paid often.
        waiting = select.poll()
        for sock in self._socks.values():
            waiting.register(sock, select.POLLIN)
        waiting.register(self._wake_r, select.POLLIN)
        wake = self._wake_r
        while True:
            ready = waiting.poll()
            if any(fd == wake for fd, _event in ready):
                return
            self._merge(queues, readable, port_of, ready)

    def _merge(self, queues: dict[int, deque[tuple[int, bytes]]], readable: select.poll,
               port_of: dict[int, int], ready: list[tuple[int, int]] | None = None) -> None:
        """Process what the ports received, oldest arrival first across ports.

        Every port with nothing queued is read (without blocking) before each pick, so no frame still waiting
        in a socket can be older than the one processed. Which of them have anything is asked in one poll
        of every port (`readable`, a socket's descriptor → its port in `port_of`) rather than by a read of
        each: a failed read costs more than the poll, and a switch with many ports has most of them idle;
        `ready` is such a poll's answer taken just before (the one that woke the loop), used for the first pick.
        When that leaves one port with frames queued, its whole queue is taken at once: those frames were
        received before the poll found every other port empty, so anything another port receives now
        arrived after all of them. When several ports have frames, the oldest head's port gives every frame
        older than the next port's head and than the poll (a run, not one frame per pick): a switch with
        many ports (a reader on each) would otherwise poll all of them once per frame."""
        on_frame = self._on_frame
        burst: list[tuple[int, bytes]] | None = [] if self._on_burst is not None else None
        taken = 0
        while taken < MERGE_BATCH:
            # the time before which every port with nothing queued is known to have received nothing: before a
            # poll of the ports (frame times are the kernel's CLOCK_REALTIME); unknown (0) for the wake-up's
            # poll, which may have found a port empty long before it returned
            quiet_since = 1 << 63
            if not all(queues.values()):
                if ready is None:
                    quiet_since = time.time_ns()
                    polled = readable.poll(0)
                else:
                    polled, ready, quiet_since = ready, None, 0
                for fd, _event in polled:
                    port = port_of.get(fd)
                    if port is None:  # (the wake-up pipe, in `ready`)
                        continue
                    queue = queues[port]
                    if not queue:
                        self._read(port, queue)
            heads = [(queue[0][0], port) for port, queue in queues.items() if queue]
            if not heads:
                break
            room = MERGE_BATCH - taken
            if len(heads) == 1:
                port = heads[0][1]
                queue = queues[port]
                frames = [queue.popleft()[1] for _ in range(min(len(queue), room))]
            else:
                heads.sort()
                port = heads[0][1]
                queue = queues[port]
                # what the oldest port received before every other port's head and before the poll that found
                # the other ports empty is older than anything the switch has not taken yet
                until = min(heads[1][0], quiet_since)
                frames = [queue.popleft()[1]]
                while queue and queue[0][0] < until and len(frames) < room:
                    frames.append(queue.popleft()[1])
            taken += len(frames)
            if burst is not None:
                burst.extend((port, frame) for frame in frames)
                continue
            for frame in frames:
                try:
                    on_frame(port, frame)
                except Exception:  # one bad frame must not stop the port thread
                    log.exception("frame from port %d failed", port)
        if burst and self._on_burst is not None:
            try:
                self._on_burst(burst)
            except Exception:  # one bad burst must not stop the port thread
                log.exception("a burst of %d frames failed", len(burst))

    def _read(self, port: int, queue: deque[tuple[int, bytes]]) -> None:
        """Move up to READ_BATCH frames from the port's socket into its queue, with their arrival times (ns)."""
        recvmsg = self._socks[port].recvmsg
        cap = self._captures.get(port)
        received = 0
        try:
            for _ in range(READ_BATCH):
                try:
                    frame, ancillary, _flags, addr = recvmsg(MAX_FRAME, 64)
                except BlockingIOError:
                    return
                except OSError as e:
                    log.debug("receive on port %d failed: %s", port, e)
                    return
                if addr[2] == PACKET_OUTGOING:
                    continue
                arrived = 0
                for level, kind, data in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
                        sec, nsec = _TIMESPEC.unpack_from(data)
                        arrived = sec * 1_000_000_000 + nsec
                received += 1
                if cap is not None:
                    cap.received(frame)
                queue.append((arrived, frame))
        finally:
            self.received += received

    def close(self) -> None:
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=2)
            self._thread = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        for sock in self._socks.values():
            sock.close()
        self._socks.clear()
        for cap in self._captures.values():
            cap.close()
        self._captures.clear()
