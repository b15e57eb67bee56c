"""Real ports on veth pairs: frames in and out, own transmissions ignored, pcap files, bad interfaces."""

from __future__ import annotations

import os
import queue

import pytest
from p4rt_net import Tap, VethPairs
from scapy.utils import rdpcap

from softswitch.ports import PortError, PortSet, PortSpec

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and raw sockets need root")]

FRAME = bytes.fromhex("ffffffffffff" "020000000001" "88b5") + b"port test payload"
ARRIVES_S = 30.0
"""Seconds a frame that must arrive may take: a margin no loaded machine eats (the wait ends when it comes)."""


@pytest.fixture
def veths():
    v = VethPairs("pt", 2)
    yield v
    v.close()


def test_port_spec_parses_simple_switch_syntax():
    assert PortSpec.parse("3@eth7") == PortSpec(3, "eth7")
    with pytest.raises(PortError, match="PORT@INTERFACE"):
        PortSpec.parse("eth7")


def test_frames_cross_in_both_directions_and_own_output_is_not_input(veths, tmp_path):
    got: queue.Queue = queue.Queue()
    (a0, b0), (a1, b1) = veths.pairs
    ports = PortSet([PortSpec(1, a0), PortSpec(2, a1)], lambda port, frame: got.put((port, frame)), tmp_path)
    ports.open()
    ports.start()
    tap0, tap1 = Tap(b0), Tap(b1)
    try:
        tap0.send(FRAME)
        port, frame = got.get(timeout=ARRIVES_S)
        assert (port, frame) == (1, FRAME)
        ports.send(2, FRAME[::-1])
        assert tap1.receive(timeout=ARRIVES_S, want=lambda f: f == FRAME[::-1]) == FRAME[::-1]
        with pytest.raises(queue.Empty):
            got.get(timeout=0.3)  # port 2's own transmission did not come back in
    finally:
        tap0.close()
        tap1.close()
        ports.close()
    assert bytes(rdpcap(str(tmp_path / f"{a0}_in.pcap"))[0]) == FRAME
    assert bytes(rdpcap(str(tmp_path / f"{a1}_out.pcap"))[0]) == FRAME[::-1]


def test_missing_interface_is_a_clear_error():
    ports = PortSet([PortSpec(1, "sswpnothere")], lambda port, frame: None)
    with pytest.raises(PortError, match="sswpnothere: no such interface"):
        ports.open()


def test_same_port_number_twice_is_refused():
    with pytest.raises(PortError, match="twice"):
        PortSet([PortSpec(1, "sswpx"), PortSpec(1, "sswpy")], lambda port, frame: None)
