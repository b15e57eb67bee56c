"""The switch's ports over one nanomsg PAIR socket (`--packet-in ipc://PATH`), BMv2's packet-in interface.

BMv2 (`bm_sim/dev_mgr_packet_in.cpp`) binds a PAIR socket at the `--packet-in` address; a test driver
(PTF's `nn` platform, BMv2's `bm_apps::PacketInject`) dials it. Every message starts with three packed
native-endian (little-endian on every host BMv2 runs on) 32-bit ints, `type, port, more`:

| type | name            | direction     | `more`                | after the header        |
|------|-----------------|---------------|-----------------------|-------------------------|
| 0    | PORT_ADD        | driver→switch | 0                     |                         |
| 1    | PORT_REMOVE     | driver→switch | 0                     |                         |
| 2    | PORT_SET_STATUS | driver→switch | 0 = down, 1 = up      |                         |
| 3    | PACKET_IN       | driver→switch | frame length in bytes | the frame               |
| 4    | PACKET_OUT      | switch→driver | frame length in bytes | the frame               |
| 5    | INFO_REQ        | driver→switch | info type             |                         |
| 6    | INFO_REP        | switch→driver | the request's         | int32 status (1 = not supported) |

As in BMv2's default (ports not enforced), a PACKET_IN on any port enters the pipeline, whether or not the
driver added the port, and every output frame goes back as PACKET_OUT; port messages are only recorded.
BMv2 answers every INFO_REQ "not supported" and so do we. nng's PAIR v0 (pynng) speaks nanomsg's wire
protocol, so PTF (which uses pynng) and nanomsg's own clients (nnpy, BMv2's tools) both connect.
"""

from __future__ import annotations

import enum
import logging
import pathlib
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pynng

from softswitch.pcap import PortCapture
from softswitch.ports import PortError

log = logging.getLogger(__name__)

HEADER = struct.Struct("<iii")
"""type, port, more: BMv2's `packet_hdr_t` (packed ints)."""
INFO_STATUS = struct.Struct("<i")
INFO_STATUS_NOT_SUPPORTED = 1
SEND_TIMEOUT_MS = 1000
"""How long an output frame waits for a slow or absent driver before it is dropped and counted."""
BUFFERED_MESSAGES = 1024
"""Messages nng queues each way, so a driver's burst does not block it on nng's small default queue."""


class MsgType(enum.IntEnum):
    PORT_ADD = 0
    PORT_REMOVE = 1
    PORT_SET_STATUS = 2
    PACKET_IN = 3
    PACKET_OUT = 4
    INFO_REQ = 5
    INFO_REP = 6


class PortStatus(enum.IntEnum):
    DOWN = 0
    UP = 1


@dataclass(frozen=True)
class Message:
    """One message of the packet-in protocol."""

    type: int
    port: int
    more: int
    """Frame length for PACKET_IN/OUT, the status for PORT_SET_STATUS, the info type for INFO_REQ/REP."""
    payload: bytes = b""

    def encode(self) -> bytes:
        return HEADER.pack(self.type, self.port, self.more) + self.payload

    @classmethod
    def decode(cls, data: bytes) -> Message:
        if len(data) < HEADER.size:
            raise ValueError(f"a {len(data)}-byte message is shorter than the {HEADER.size}-byte header")
        kind, port, more = HEADER.unpack_from(data)
        return cls(kind, port, more, data[HEADER.size:])


def packet_in(port: int, frame: bytes) -> bytes:
    """A driver's message putting `frame` into the switch on `port`."""
    return HEADER.pack(MsgType.PACKET_IN, port, len(frame)) + frame


def packet_out(port: int, frame: bytes) -> bytes:
    """The switch's message for `frame` leaving on `port`."""
    return HEADER.pack(MsgType.PACKET_OUT, port, len(frame)) + frame


class NanomsgPorts:
    """All ports of the switch on one PAIR socket; `send` transmits, a background thread receives."""

    def __init__(self, address: str, on_frame: Callable[[int, bytes], None],
                 pcap_dir: pathlib.Path | None = None) -> None:
        self.address = address
        self._on_frame = on_frame
        self._pcap_dir = pcap_dir
        self._sock: pynng.Pair0 | None = None
        self._thread: threading.Thread | None = None
        self._captures: dict[int, PortCapture] = {}
        self._capture_lock = threading.Lock()
        self.ports_up: dict[int, bool] = {}
        """Ports the driver added, and whether it last set them up (recorded, not enforced, as in BMv2)."""
        self.received = 0
        self.sent = 0
        self.send_errors = 0

    def open(self) -> None:
        """Listen at the address (the driver dials); raises PortError with nng's reason."""
        sock = pynng.Pair0(send_timeout=SEND_TIMEOUT_MS)
        try:
            sock.recv_buffer_size = BUFFERED_MESSAGES
            sock.send_buffer_size = BUFFERED_MESSAGES
            sock.listen(self.address)
        except pynng.NNGException as e:
            sock.close()
            raise PortError(f"cannot listen for packets on {self.address}: {e}") from None
        self._sock = sock

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="nanomsg-ports", daemon=True)
        self._thread.start()

    def send(self, port: int, frame: bytes) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            sock.send(packet_out(port, frame))
            self.sent += 1
        except pynng.NNGException as e:  # Timeout (no driver reading) or Closed (shutting down)
            self.send_errors += 1
            log.debug("send on port %d failed: %s", port, e)
            return
        cap = self._capture(port)
        if cap is not None:
            cap.sent(frame)

    def _loop(self) -> None:
        sock = self._sock
        assert sock is not None, "open() before start()"
        recv, on_frame, size = sock.recv, self._on_frame, HEADER.size
        while True:
            try:
                data = recv()
            except pynng.Closed:
                return
            except pynng.NNGException as e:
                log.debug("receive failed: %s", e)
                continue
            if len(data) >= size and data[0] == MsgType.PACKET_IN and not any(data[1:4]):
                # the per-frame path: PACKET_IN, the only message type whose first byte is 3 and rest zero
                _, port, length = HEADER.unpack_from(data)
                frame = data[size:size + length]
                self.received += 1
                cap = self._capture(port)
                if cap is not None:
                    cap.received(frame)
                try:
                    on_frame(port, frame)
                except Exception:  # one bad frame must not stop the port thread
                    log.exception("frame from port %d failed", port)
                continue
            try:
                self._control(Message.decode(data))
            except ValueError as e:
                log.error("bad packet-in message: %s", e)

    def _control(self, msg: Message) -> None:
        if msg.type == MsgType.PORT_ADD:
            self.ports_up.setdefault(msg.port, True)
        elif msg.type == MsgType.PORT_REMOVE:
            self.ports_up.pop(msg.port, None)
        elif msg.type == MsgType.PORT_SET_STATUS:
            if msg.more not in (PortStatus.DOWN, PortStatus.UP):
                log.error("unknown port status %d for port %d", msg.more, msg.port)
            elif msg.port in self.ports_up:
                self.ports_up[msg.port] = msg.more == PortStatus.UP
        elif msg.type == MsgType.INFO_REQ:
            reply = Message(MsgType.INFO_REP, msg.port, msg.more, INFO_STATUS.pack(INFO_STATUS_NOT_SUPPORTED))
            try:
                assert self._sock is not None
                self._sock.send(reply.encode())
            except pynng.NNGException as e:
                log.debug("info reply for port %d failed: %s", msg.port, e)
        elif msg.type in (MsgType.PACKET_OUT, MsgType.INFO_REP):
            log.error("invalid %s message received (only the switch sends it)", MsgType(msg.type).name)
        else:
            log.error("unknown packet-in message type %d", msg.type)

    def _capture(self, port: int) -> PortCapture | None:
        """`--pcap`: files named `port<N>_in/out.pcap` (these ports have no interface name)."""
        if self._pcap_dir is None:
            return None
        with self._capture_lock:
            cap = self._captures.get(port)
            if cap is None:
                cap = self._captures[port] = PortCapture(self._pcap_dir, f"port{port}")
            return cap

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the receive thread's recv() raises Closed
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        self._sock = None
        with self._capture_lock:
            for cap in self._captures.values():
                cap.close()
            self._captures.clear()


class PacketInjector:
    """The driver's end (what PTF's `nn` platform and BMv2's `PacketInject` are): dials a switch's
    `--packet-in` address, puts frames in on ports and takes the frames the switch sends out."""

    def __init__(self, address: str, *, send_timeout_ms: int = SEND_TIMEOUT_MS) -> None:
        self.address = address
        self._sock = pynng.Pair0(send_timeout=send_timeout_ms)
        self._sock.recv_buffer_size = BUFFERED_MESSAGES
        self._sock.send_buffer_size = BUFFERED_MESSAGES
        try:
            self._sock.dial(address, block=True)
        except pynng.NNGException as e:
            self._sock.close()
            raise PortError(f"cannot reach the switch's packet socket {address}: {e}") from None

    def fileno(self) -> int:
        """Readable while a message waits (for select/poll)."""
        return self._sock.recv_fd

    def add_port(self, port: int) -> None:
        self._sock.send(HEADER.pack(MsgType.PORT_ADD, port, 0))

    def send(self, port: int, frame: bytes) -> None:
        self._sock.send(packet_in(port, frame))

    def request(self, msg: Message) -> None:
        """Any message, e.g. INFO_REQ or PORT_SET_STATUS."""
        self._sock.send(msg.encode())

    def receive(self, timeout_ms: int | None = None) -> Message | None:
        """The next message from the switch, or None after `timeout_ms` (None: wait as long as it takes)."""
        self._sock.recv_timeout = -1 if timeout_ms is None else timeout_ms
        try:
            return Message.decode(self._sock.recv())
        except pynng.Timeout:
            return None

    def receive_ready(self) -> list[Message]:
        """Every message already waiting, without blocking."""
        out = []
        while True:
            try:
                out.append(Message.decode(self._sock.recv(block=False)))
            except pynng.TryAgain:
                return out

    def close(self) -> None:
        self._sock.close()
