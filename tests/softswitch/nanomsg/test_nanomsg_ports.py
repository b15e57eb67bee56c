"""BMv2's nanomsg packet interface on the softswitch's side (`NanomsgPorts`), driven as PTF drives it.

In-process: the ports hand each PACKET_IN to a callback standing in for the device, which echoes it back on
another port; no process, no root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time

import pytest

from softswitch.nanomsg import (
    INFO_STATUS_NOT_SUPPORTED,
    Message,
    MsgType,
    NanomsgPorts,
    PacketInjector,
    PortStatus,
    packet_in,
    packet_out,
)
from softswitch.ports import PortError

FRAME = bytes.fromhex("00000000000200000000000108004500") + b"payload" * 5


def test_packet_in_message_is_bmv2s_packed_little_endian_header_then_the_frame():
    msg = packet_in(7, b"\xaa\xbb")
    assert msg == bytes.fromhex("03000000" "07000000" "02000000" "aabb")
    assert packet_out(7, b"\xaa\xbb")[:4] == bytes.fromhex("04000000")
    assert Message.decode(msg) == Message(MsgType.PACKET_IN, 7, 2, b"\xaa\xbb")


def test_message_shorter_than_the_header_is_refused():
    with pytest.raises(ValueError, match="shorter than the 12-byte header"):
        Message.decode(b"\x03\x00\x00")


class Echo:
    """The device: every frame goes back out of port + 100, byte for byte."""

    def __init__(self) -> None:
        self.ports: NanomsgPorts | None = None
        self.seen: list[tuple[int, bytes]] = []
        self.lock = threading.Lock()

    def __call__(self, port: int, frame: bytes) -> None:
        with self.lock:
            self.seen.append((port, frame))
        assert self.ports is not None
        self.ports.send(port + 100, frame)


@pytest.fixture
def switch(tmp_path):
    """The switch's ports at `ipc://TMP/switch.ipc`, echoing; no driver yet (a PAIR socket takes one peer)."""
    echo = Echo()
    ports = echo.ports = NanomsgPorts(f"ipc://{tmp_path}/switch.ipc", echo, pcap_dir=tmp_path / "pcap")
    ports.open()
    ports.start()
    try:
        yield ports, echo
    finally:
        ports.close()


@pytest.fixture
def switch_and_driver(switch):
    ports, echo = switch
    driver = PacketInjector(ports.address)
    try:
        yield ports, driver, echo
    finally:
        driver.close()


def test_frame_sent_on_a_port_enters_there_and_its_output_comes_back_as_packet_out(switch_and_driver):
    ports, driver, echo = switch_and_driver
    driver.send(3, FRAME)
    reply = driver.receive(timeout_ms=5000)
    assert reply == Message(MsgType.PACKET_OUT, 103, len(FRAME), FRAME)
    assert echo.seen == [(3, FRAME)]
    deadline = time.monotonic() + 5  # the switch thread counts a send after the frame left: wait, do not race it
    while ports.sent < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert (ports.received, ports.sent) == (1, 1)


def test_frames_keep_their_order_and_bytes_under_a_burst(switch_and_driver):
    _, driver, _ = switch_and_driver
    frames = [FRAME + i.to_bytes(2, "big") for i in range(500)]
    for f in frames:
        driver.send(1, f)
    got = [driver.receive(timeout_ms=5000) for _ in frames]
    assert [m.payload for m in got if m is not None] == frames


def test_unadded_ports_still_carry_frames_as_on_bmv2_and_port_messages_are_recorded(switch_and_driver):
    ports, driver, _ = switch_and_driver
    driver.add_port(5)
    driver.request(Message(MsgType.PORT_SET_STATUS, 5, PortStatus.DOWN))
    driver.send(9, FRAME)  # never added
    assert driver.receive(timeout_ms=5000) == Message(MsgType.PACKET_OUT, 109, len(FRAME), FRAME)
    assert ports.ports_up == {5: False}


def test_info_request_is_answered_not_supported_with_the_requests_header(switch_and_driver):
    _, driver, _ = switch_and_driver
    driver.request(Message(MsgType.INFO_REQ, 4, 1))
    reply = driver.receive(timeout_ms=5000)
    assert reply is not None
    assert (reply.type, reply.port, reply.more) == (MsgType.INFO_REP, 4, 1)
    assert reply.payload == INFO_STATUS_NOT_SUPPORTED.to_bytes(4, "little")


def test_pcap_files_are_named_after_the_port_number(switch_and_driver, tmp_path):
    from scapy.utils import rdpcap

    ports, driver, _ = switch_and_driver
    driver.send(2, FRAME)
    assert driver.receive(timeout_ms=5000) is not None
    ports.close()
    assert [bytes(p) for p in rdpcap(str(tmp_path / "pcap" / "port2_in.pcap"))] == [FRAME]
    assert [bytes(p) for p in rdpcap(str(tmp_path / "pcap" / "port102_out.pcap"))] == [FRAME]


def test_a_malformed_message_is_skipped_and_the_port_keeps_working(switch_and_driver):
    _, driver, echo = switch_and_driver
    driver._sock.send(b"\x03\x00")  # shorter than a header
    driver.request(Message(99, 0, 0))  # unknown type
    driver.send(1, FRAME)
    assert driver.receive(timeout_ms=5000) is not None
    assert echo.seen == [(1, FRAME)]


def test_an_address_nng_cannot_listen_on_is_a_port_error(tmp_path):
    ports = NanomsgPorts(f"ipc://{tmp_path}/no/such/dir/x.ipc", lambda port, frame: None)
    with pytest.raises(PortError, match="cannot listen for packets on ipc://"):
        ports.open()


@pytest.mark.skipif(ctypes.util.find_library("nanomsg") is None, reason="libnanomsg (Debian libnanomsg5) absent")
def test_nanomsgs_own_c_library_drives_the_ports(switch):
    """BMv2's tools and nnpy use libnanomsg itself, not nng: its PAIR socket must talk to ours too."""
    lib = ctypes.CDLL(ctypes.util.find_library("nanomsg"))
    af_sp, nn_pair, nn_sol_socket, nn_rcvtimeo = 1, 16, 0, 5  # nanomsg/nn.h, nanomsg/pair.h
    sock = lib.nn_socket(af_sp, nn_pair)
    timeout = ctypes.c_int(5000)
    lib.nn_setsockopt(sock, nn_sol_socket, nn_rcvtimeo, ctypes.byref(timeout), ctypes.sizeof(timeout))
    try:
        assert lib.nn_connect(sock, switch[0].address.encode()) >= 0
        msg = packet_in(6, FRAME)
        assert lib.nn_send(sock, msg, len(msg), 0) == len(msg)
        buf = ctypes.create_string_buffer(4096)
        n = lib.nn_recv(sock, buf, len(buf), 0)
        assert buf.raw[:n] == packet_out(106, FRAME)
    finally:
        lib.nn_close(sock)
