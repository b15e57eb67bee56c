"""The controller bench's hand-built frames (bench.controller._udp_frame) are the bytes scapy builds."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.controller import _udp_fields, _udp_frame
from kvtesting.inprocess import CLIENT, STORAGE


def test_hand_built_frame_is_scapys_and_parses_back():
    payload = bytes(range(50))
    by_scapy = bytes(Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
                     / UDP(sport=40000, dport=7420, chksum=0) / payload)
    frame = _udp_frame(CLIENT, STORAGE, 40000, 7420, payload)
    assert frame == by_scapy
    dst_mac, src_mac, ips, sport, dport, body = _udp_fields(frame)
    assert (dst_mac.hex(":"), src_mac.hex(":")) == (STORAGE["mac"], CLIENT["mac"])
    assert (sport, dport, body) == (40000, 7420, payload)
    assert ips == bytes([10, 0, 0, 1, 10, 0, 0, 100])
    assert _udp_fields(frame[:30]) is None
