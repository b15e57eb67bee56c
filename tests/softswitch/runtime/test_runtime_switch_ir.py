"""The executor on hand-built IR: the reference L3 program end to end, byte for byte."""

from softswitch.runtime.hashing import csum16
from softswitch.runtime.switch import SoftSwitch
from softswitch.target import Lpm, TableEntry
from tests.softswitch.runtime.runtime_irkit import l3_program


def ipv4_packet(dst: bytes, ttl: int = 64, payload: bytes = b"hello") -> bytes:
    ip = bytearray(bytes.fromhex("45000000000040000011") + bytes([ttl]) + b"\x11" + b"\x00\x00" + bytes([10, 0, 0, 1]) + dst)
    ip = bytearray(bytes.fromhex("4500") + (20 + len(payload)).to_bytes(2, "big") + bytes.fromhex("00004000")
                   + bytes([ttl, 17]) + b"\x00\x00" + bytes([10, 0, 0, 1]) + dst)
    ip[10:12] = csum16(bytes(ip)).to_bytes(2, "big")
    eth = bytes.fromhex("aabbccddeeff" "112233445566" "0800")
    return eth + bytes(ip) + payload


def make_switch() -> SoftSwitch:
    sw = SoftSwitch.load(l3_program())
    sw.table_insert(TableEntry("I.routes", {"hdr.ipv4.dst_addr": Lpm(0x0A000000, 8)}, "I.fwd",
                               {"port": 2, "dmac": 0x020000000002}))
    sw.table_insert(TableEntry("I.routes", {"hdr.ipv4.dst_addr": Lpm(0x0A010000, 16)}, "I.fwd",
                               {"port": 3, "dmac": 0x020000000003}))
    return sw


def test_routed_packet_has_new_macs_decremented_ttl_and_valid_checksum():
    sw = make_switch()
    out = sw.process(1, ipv4_packet(bytes([10, 1, 2, 3]), ttl=64))
    assert len(out) == 1
    port, data = out[0]
    assert port == 3
    assert data[0:6] == bytes.fromhex("020000000003")
    assert data[6:12] == bytes.fromhex("aabbccddeeff")
    assert data[14 + 8] == 63
    assert csum16(data[14:34]) == 0
    assert data[34:] == b"hello"


def test_longest_prefix_decides_the_port():
    sw = make_switch()
    assert sw.process(1, ipv4_packet(bytes([10, 9, 9, 9])))[0][0] == 2


def test_unrouted_and_non_ip_packets_are_dropped():
    sw = make_switch()
    assert sw.process(1, ipv4_packet(bytes([11, 0, 0, 1]))) == []
    assert sw.process(1, bytes.fromhex("aabbccddeeff1122334455660806") + b"\x00" * 28) == []


def test_truncated_ipv4_header_is_a_parser_error_not_a_crash():
    sw = make_switch()
    assert sw.process(1, ipv4_packet(bytes([10, 1, 2, 3]))[:20]) == []
