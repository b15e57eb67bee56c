"""PTF tests of kvswitch.p4's KV pipeline, the same on the softswitch and on BMv2.

Run by tests/integration/test_ptf.py, which starts a switch (veth pairs, P4Runtime), installs the two host
routes and INDEXED's index entry at SLOT with kvtesting.kvnet (`KvNet.install_routes`, `KvNet.index`), and then
runs p4lang's `ptf` on this folder with the host ends of the pairs as PTF ports 1 (the client) and 2 (the
storage node):

    ptf --test-dir tests/integration/ptf --interface 0-1@HOST1 --interface 0-2@HOST2

Each test sends frames with `send_packet` and checks what comes out with `verify_packet` /
`verify_no_other_packets`, byte for byte.
"""

from __future__ import annotations

from ptf import testutils
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CLIENT_UDP_PORT,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    chunk_key,
    crc,
    kvp_frame,
    value_chunk,
)

INDEXED = chunk_key(tenant=7, prefix_hash=0x0123456789ABCDEF, chunk_idx=0)
"""The key the set-up indexes at SLOT (its slot starts empty)."""
UNINDEXED = chunk_key(tenant=7, prefix_hash=0xFEEDFACECAFEBEEF, chunk_idx=1)
SLOT = 5


def forwarded(frame: Ether, dst_mac: str) -> Ether:
    """The frame as ipv4_forward sends it on: MACs rewritten, TTL − 1, IPv4 checksum recomputed."""
    out = frame.copy()
    out[Ether].src, out[Ether].dst = out[Ether].dst, dst_mac
    out[IP].ttl -= 1
    del out[IP].chksum
    return Ether(bytes(out))


def get(key: ChunkKey) -> Ether:
    return kvp_frame(KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash,
                         chunk_idx=key.chunk_idx, chunk_count=4, req_id=1))


def storage_reply(key: ChunkKey, value: bytes, version: int) -> Ether:
    return kvp_frame(KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=key.tenant,
                         prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx, chunk_count=4, req_id=1,
                         version=version) / KVPValue.from_bytes(value), to_storage=False)


def switch_reply(key: ChunkKey, value: bytes, version: int) -> Ether:
    """The GET_REPLY the switch builds from a filled slot, for `get(key)`."""
    request = get(key)
    return Ether(bytes(
        Ether(dst=CLIENT_MAC, src=SWITCH_MAC)
        / IP(src=STORAGE_IP, dst=CLIENT_IP, ttl=64, id=request[IP].id)
        / UDP(sport=KVP_UDP_PORT, dport=CLIENT_UDP_PORT, chksum=0)
        / KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SWITCH, flags=Flag.VALUE, tenant=key.tenant, req_id=1,
              prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx, chunk_count=4, value_len=len(value),
              version=version, value_csum=crc(value), aux=0)
        / KVPValue.from_bytes(value)))


class KvTest(BaseTest):
    def setUp(self) -> None:
        super().setUp()
        self.dataplane = testutils.ptf.dataplane_instance
        self.dataplane.flush()


class GetOfAnUnindexedKeyGoesToTheStorageNode(KvTest):
    def runTest(self) -> None:
        frame = get(UNINDEXED)
        testutils.send_packet(self, CLIENT_PORT, frame)
        testutils.verify_packet(self, forwarded(frame, STORAGE_MAC), STORAGE_PORT)
        testutils.verify_no_other_packets(self)


class PlainUdpIsRoutedUntouchedButForTtlAndMacs(KvTest):
    def runTest(self) -> None:
        frame = (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
                 / UDP(sport=1234, dport=5678) / b"not kvp")
        testutils.send_packet(self, CLIENT_PORT, frame)
        testutils.verify_packet(self, forwarded(frame, STORAGE_MAC), STORAGE_PORT)
        testutils.verify_no_other_packets(self)


class SlotReadFromAHostPortIsDropped(KvTest):
    def runTest(self) -> None:
        testutils.send_packet(self, CLIENT_PORT, kvp_frame(KVP(opcode=Opcode.SLOT_READ, aux=SLOT, req_id=9)))
        testutils.verify_no_other_packets(self)


class StorageReplyFillsTheIndexedSlotAndTheNextGetIsAnsweredByTheSwitch(KvTest):
    def runTest(self) -> None:
        value = value_chunk(3)
        first = get(INDEXED)
        testutils.send_packet(self, CLIENT_PORT, first)  # the slot is empty: a miss, on to the storage node
        testutils.verify_packet(self, forwarded(first, STORAGE_MAC), STORAGE_PORT)
        reply = storage_reply(INDEXED, value, version=2)
        testutils.send_packet(self, STORAGE_PORT, reply)
        testutils.verify_packet(self, forwarded(reply, CLIENT_MAC), CLIENT_PORT)
        testutils.verify_no_other_packets(self)
        testutils.send_packet(self, CLIENT_PORT, get(INDEXED))  # now a hit: the switch answers, st1 sees nothing
        testutils.verify_packet(self, switch_reply(INDEXED, value, version=2), CLIENT_PORT)
        testutils.verify_no_other_packets(self)
