"""Controller-only opcodes are honoured only from the controller's networks (`--control-from`; docs/protocol.md, *Trust*)."""

from __future__ import annotations

import pytest

from kvpool.client import ClientOptions, KVPClient
from kvpool.constants import CONTROL_OPCODES, Opcode, Status, Tier
from kvpool.keys import ChunkKey
from kvpool.server import StorageNode, StorageOptions, parse_args
from kvpool.trust import ControlSources
from kvpool.wire import Header, encode

HOST = ("10.0.0.5", 40000)
CONTROLLER = ("172.31.74.1", 50000)


def stored_node(**options) -> StorageNode:
    n = StorageNode(StorageOptions(**options))
    n.handle(encode(Header(Opcode.PUT, prefix_hash=9, version=1), b"keep me"))
    return n


def tier_move(n: StorageNode, peer, tier: Tier) -> Header:
    request = Header(Opcode.TIER_MOVE, req_id=3, prefix_hash=9, aux=int(tier))
    return Header.unpack(n.receive(request.pack(), peer)[0].data)


def test_a_forged_tier_move_to_absent_from_a_host_is_denied_and_deletes_nothing():
    n = stored_node()
    reply = tier_move(n, HOST, Tier.ABSENT)
    assert (reply.opcode, reply.status) == (Opcode.TIER_MOVE_ACK, Status.ERR_DENIED)
    assert n.backend.chunks[ChunkKey(0, 9, 0)].value[:7] == b"keep me"
    assert n.counters["denied.control_source"] == 1


def test_the_controller_on_the_management_link_is_honoured():
    n = stored_node()
    assert tier_move(n, CONTROLLER, Tier.ABSENT).status == Status.OK
    assert ChunkKey(0, 9, 0) not in n.backend.chunks


def test_the_default_trusts_the_testbeds_management_address():
    topologies = pytest.importorskip("topo.topologies")
    sources = ControlSources.parse()
    assert sources.allows(topologies.MGMT_ROOT_IP) and sources.allows("127.0.0.1")
    assert not sources.allows(topologies.STORAGE_IP) and not sources.allows(topologies.host_ip(1))


@pytest.mark.parametrize("opcode", sorted(CONTROL_OPCODES))
def test_every_control_opcode_from_a_host_is_denied(opcode):
    n = stored_node()
    request = encode(Header(opcode, req_id=1, prefix_hash=9, aux=0), b"v" if opcode == Opcode.SLOT_WRITE else None)
    reply = Header.unpack(n.receive(request, HOST)[0].data)
    assert reply.status == Status.ERR_DENIED


def test_data_opcodes_from_a_host_are_served():
    n = stored_node()
    reply = Header.unpack(n.receive(Header(Opcode.GET, prefix_hash=9).pack(), HOST)[0].data)
    assert reply.status == Status.HIT_SERVER


def test_control_from_flag_parses_networks_and_refuses_nonsense():
    options = parse_args(["--control-from", "10.1.0.0/16, 192.0.2.7"])
    assert options.control_from.allows("10.1.2.3") and options.control_from.allows("192.0.2.7")
    assert not options.control_from.allows("127.0.0.1")
    with pytest.raises(SystemExit):
        parse_args(["--control-from", "10.1.0.0/33"])


def test_over_udp_a_tier_move_from_an_untrusted_loopback_client_is_denied(serve):
    node = serve(control_from="192.0.2.0/24")
    with KVPClient(ClientOptions(server=node.address, timeout=0.3)) as client:
        client.put_block(9, b"still here", version=1)
        assert client.tier_move(9, 0, Tier.ABSENT) == (Status.ERR_DENIED, Tier.ABSENT)
        assert client.get_block(9).data == b"still here"
