"""Controller-only opcodes are honoured only from the controller's networks (`--control-from`; docs/protocol.md, *Trust*),
and a GET from anyone, whatever span (`aux`) it asks, makes the node send at most KVP_MAX_GET_SPAN replies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpool.client import ClientOptions, KVPClient
from kvpool.constants import CONTROL_OPCODES, KVP_HEADER_LEN, KVP_MAX_GET_SPAN, Opcode, Status, Tier
from kvpool.keys import ChunkKey
from kvpool.server import StorageNode, StorageOptions, parse_args, span_of
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


# ---- hostile spans: one GET, at most KVP_MAX_GET_SPAN replies, whoever sends it ----------------------------

STORED_CHUNKS = 20
"""Chunks of the block the hostile GETs aim at (more than a span, so a span is never clipped short by the block)."""


def spanned_node(queue_limit: int = 1024) -> StorageNode:
    n = StorageNode(StorageOptions(queue_limit=queue_limit))
    for i in range(STORED_CHUNKS):
        n.receive(encode(Header(Opcode.PUT, prefix_hash=9, chunk_idx=i, chunk_count=STORED_CHUNKS, version=1,
                                chunk_shift=13), b"v"), CONTROLLER)
    return n


hostile_gets = st.builds(
    lambda req_id, idx, count, aux, version, shift, flags: Header(
        Opcode.GET, req_id=req_id, prefix_hash=9, chunk_idx=idx, chunk_count=count, aux=aux, version=version,
        chunk_shift=shift, flags=flags).pack(),
    req_id=st.integers(0, 0xFFFFFFFF),
    idx=st.one_of(st.integers(0, STORED_CHUNKS + 2), st.integers(0, 0xFFFFFFFF)),
    count=st.one_of(st.integers(0, STORED_CHUNKS + 2), st.integers(0, 0xFFFFFFFF)),
    aux=st.one_of(st.integers(0, KVP_MAX_GET_SPAN + 2), st.integers(0, 0xFFFFFFFF)),
    version=st.sampled_from([0, 1, 2, 0xFFFFFFFF]),
    shift=st.sampled_from([7, 13]),
    flags=st.sampled_from([0, 0x10]),  # F_STREAM changes nothing at a node
)
peers = st.tuples(st.sampled_from(["10.0.0.5", "10.0.0.6", "172.31.74.1", "127.0.0.1"]), st.integers(1, 65535))


@settings(deadline=None, max_examples=300)  # a loaded machine must not turn a slow example into a failure
@given(data=hostile_gets, peer=peers)
def test_a_get_with_any_span_from_anyone_is_answered_by_at_most_max_span_replies_to_its_sender(data, peer):
    n = spanned_node()
    request = Header.unpack(data)
    out = n.receive(data, peer)
    assert 1 <= len(out) <= KVP_MAX_GET_SPAN and all(d.to == peer for d in out)
    assert len(out) <= max(1, min(request.aux, STORED_CHUNKS - request.chunk_idx))
    for i, d in enumerate(out):  # each reply names its offset
        reply = Header.unpack(d.data)
        assert (reply.opcode, reply.aux, reply.req_id) == (Opcode.GET_REPLY, i, (request.req_id + i) % (1 << 32))
        assert reply.chunk_idx == request.chunk_idx + i
        assert len(d.data) in (KVP_HEADER_LEN, KVP_HEADER_LEN + (1 << 13))
    assert sum(n.gets.values()) == sum(Header.unpack(d.data).status in (Status.HIT_SERVER, Status.MISS) for d in out)


@settings(deadline=None, max_examples=100)
@given(batch=st.lists(st.tuples(st.one_of(hostile_gets, st.binary(max_size=60)), peers), min_size=1, max_size=40))
def test_an_overloaded_batch_of_hostile_spans_is_answered_by_at_most_what_it_weighs(batch):
    n = spanned_node(queue_limit=8)
    out = [Header.unpack(d.data) for d in n.receive_batch(batch)]
    assert len(out) <= sum(span_of(data) for data, _ in batch) <= KVP_MAX_GET_SPAN * len(batch)
    assert all(h.opcode == Opcode.GET_REPLY for h in out if h.status == Status.BUSY)
