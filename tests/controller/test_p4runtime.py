"""Our P4Runtime client and the pool's P4Runtime data plane against an in-process fake P4Runtime server."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.hosts import Host, load_hosts
from controller.p4dataplane import P4RuntimeDataPlane
from kvpool import wire
from kvpool.constants import KVP_HEADER_LEN, Opcode, Status
from kvpool.keys import ChunkKey
from p4rt.bytestrings import encode
from p4rt.connection import SwitchConnection, SwitchOptions
from p4rt.errors import P4RuntimeError
from p4rt.p4info import P4Info
from softswitch.target import Exact, TableEntry
from tests.controller.fake_p4rt import FakeServer

P4INFO_PATH = Path(__file__).parent / "data" / "kvswitch_min.p4info.txtpb"


EXPECT_S = 30.0
"""Longest wait for something a correct controller or switch does (`wait_for`, a queue's next item): reached only
when it never happens, so a loaded machine cannot make a passing test fail."""


def wait_for(predicate, timeout=EXPECT_S):
    """True once `predicate()` is; False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


@pytest.fixture
def fake():
    server = FakeServer()
    address = server.start()
    yield server, address
    server.stop()


@pytest.fixture
def p4info():
    return P4Info.load(P4INFO_PATH)


def connect(address, p4info, **callbacks) -> SwitchConnection:
    switch = SwitchConnection(SwitchOptions(address, backoff_initial=0.01, backoff_max=0.05), p4info, **callbacks)
    switch.open(timeout=5)
    return switch


def test_connection_becomes_primary_and_installs_the_pipeline(fake, p4info):
    server, address = fake
    switch = connect(address, p4info)
    try:
        assert switch.is_primary and switch.connections == 1
        assert switch.pipeline_cookie() is None
        switch.set_pipeline(b"device-config", cookie=1234)
        assert switch.pipeline_cookie() == 1234
        assert server.servicer.config.p4_device_config == b"device-config"
        assert server.servicer.config.p4info.tables[0].preamble.name == "MyIngress.kv_index"
    finally:
        switch.close()


def test_index_entries_round_trip_and_write_errors_name_each_update(fake, p4info):
    _, address = fake
    switch = connect(address, p4info)
    try:
        switch.set_pipeline(b"x", 1)
        dp = P4RuntimeDataPlane(switch)
        assert dp.capacity == 16
        a, b = ChunkKey(1, 0xFFFF_FFFF_FFFF_FFFF, 0), ChunkKey(2, 5, 7)
        dp.install(a, 3)
        dp.install(b, 4)
        dp.install(b, 5)  # ALREADY_EXISTS becomes a modify
        assert dp.installed() == {a: 3, b: 5}
        dp.remove(a)
        dp.remove(a)  # NOT_FOUND is not an error when removing
        assert dp.installed() == {b: 5}
        entry = TableEntry("MyIngress.kv_index", {"hdr.kvp.tenant": Exact(9), "hdr.kvp.prefix_hash": Exact(9),
                                                  "hdr.kvp.chunk_idx": Exact(9)}, "MyIngress.set_slot",
                           {"slot": 1, "min_version": 0})
        with pytest.raises(P4RuntimeError) as exc:
            switch.delete(entry)
        assert exc.value.only("NOT_FOUND") and exc.value.updates[0].index == 0
        with pytest.raises(ValueError, match="does not fit in 4 bits"):
            dp.install(ChunkKey(1, 1, 1), 16)
        with pytest.raises(KeyError, match="no table named"):
            switch.read_table("MyIngress.nope")
    finally:
        switch.close()


def test_counters_give_slot_hits_and_get_outcomes(fake, p4info):
    server, address = fake
    switch = connect(address, p4info)
    try:
        switch.set_pipeline(b"x", 1)
        dp = P4RuntimeDataPlane(switch)
        slot_hits, events = p4info.counter_id("slot_hits"), p4info.counter_id("kvp_events")
        server.servicer.counters[(slot_hits, 3)] = (7, 700)
        server.servicer.counters[(events, dp.events["GET_HIT"])] = (10, 0)
        server.servicer.counters[(events, dp.events["GET_MISS"])] = (4, 0)
        assert dp.slot_hits([3, 4]) == {3: 7, 4: 0}
        assert dp.slot_hits()[3] == 7 and len(dp.slot_hits()) == 16
        counts = dp.hit_counts()
        assert (counts.switch, counts.server) == (10, 4)
    finally:
        switch.close()


def hot_digest_list(p4info, list_id: int, tenant: int, prefix_hash: int, chunk_idx: int,
                    estimate: int) -> p4runtime_pb2.StreamMessageResponse:
    """A one-member hot_key_digest_t list as the switch streams it."""
    response = p4runtime_pb2.StreamMessageResponse()
    response.digest.digest_id = p4info.digest_id("hot_key_digest_t")
    response.digest.list_id = list_id
    member = response.digest.data.add().struct
    for value, width in ((tenant, 16), (prefix_hash, 64), (chunk_idx, 8), (estimate, 32)):
        member.members.add().bitstring = encode(value, width)
    return response


def test_digest_lists_are_acked_and_decoded(fake, p4info):
    server, address = fake
    got = []
    switch = connect(address, p4info, on_digest=got.append)
    try:
        switch.configure_digest("hot_key_digest_t")
        switch.configure_digest("hot_key_digest_t")  # idempotent
        response = hot_digest_list(p4info, 42, tenant=3, prefix_hash=0xABCDEF, chunk_idx=1, estimate=9)
        server.servicer.push(response)
        assert wait_for(lambda: got)
        assert got[0].members[0] == {"tenant": 3, "prefix_hash": 0xABCDEF, "chunk_idx": 1, "estimate": 9}
        ack = server.servicer.acks.get(timeout=2)
        assert (ack.digest_id, ack.list_id) == (response.digest.digest_id, 42)
    finally:
        switch.close()


def slot_read_responder(p4info, contents):
    """The switch side of SLOT_READ: answer with SLOT_READ_REPLY carrying `contents` (key, version, value)."""
    def respond(packet_out):
        frame = Ether(packet_out.payload)
        header = wire.Header.unpack(bytes(frame[UDP].payload))
        key, version, value = contents
        reply = header.replace(opcode=Opcode.SLOT_READ_REPLY, status=Status.OK, tenant=key.tenant,
                               prefix_hash=key.prefix_hash, chunk_idx=key.chunk, version=version)
        payload = bytes(Ether() / IP() / UDP(sport=7420, dport=7420) / wire.encode(reply, value))
        packet_in = p4runtime_pb2.PacketIn(payload=payload)
        packet_in.metadata.add(metadata_id=1, value=encode(255, 16))
        packet_in.metadata.add(metadata_id=2, value=encode(2, 8))
        return [packet_in]
    return respond


def test_read_slot_sends_slot_read_and_returns_the_reply(fake, p4info):
    server, address = fake
    key = ChunkKey(4, 0x77, 2)
    server.servicer.on_packet_out = slot_read_responder(p4info, (key, 9, b"value!"))
    holder = {}

    def on_packet_in(packet):
        holder["dp"].on_slot_reply(bytes(Ether(packet.payload)[UDP].payload))

    switch = connect(address, p4info, on_packet_in=on_packet_in)
    try:
        dp = holder["dp"] = P4RuntimeDataPlane(switch)
        contents = dp.read_slot(5)
        assert (contents.key, contents.version, contents.value, contents.valid) == (key, 9, b"value!", True)
        sent = server.servicer.packet_outs.get(timeout=EXPECT_S)
        header = wire.Header.unpack(bytes(Ether(sent.payload)[UDP].payload))
        assert (header.opcode, header.aux) == (Opcode.SLOT_READ, 5)
        with pytest.raises(ValueError, match="outside the pool"):
            dp.read_slot(16)
    finally:
        switch.close()


def test_slot_write_packet_out_carries_a_valid_checksummed_value(fake, p4info):
    server, address = fake
    switch = connect(address, p4info)
    try:
        P4RuntimeDataPlane(switch).write_slot(2, ChunkKey(1, 0x10, 0), 5, b"abc", chunk_count=3)
        sent = server.servicer.packet_outs.get(timeout=EXPECT_S)
        payload = bytes(Ether(sent.payload)[UDP].payload)
        assert wire.check(payload) is None
        header = wire.Header.unpack(payload)
        assert (header.opcode, header.aux, header.version, header.value_len) == (Opcode.SLOT_WRITE, 2, 5, 3)
        assert header.chunk_count == 3  # the block's real count, not chunk + 1 (a truncated block must not look whole)
        assert header.value_csum == wire.value_checksum(b"abc")
        assert len(payload) == KVP_HEADER_LEN + 128
    finally:
        switch.close()


def test_lost_switch_is_reconnected_and_on_connect_runs_again(fake, p4info):
    server, address = fake
    calls = []
    switch = connect(address, p4info, on_connect=lambda s: calls.append(s.connections))
    try:
        assert calls == [1]
        server.stop()
        assert wait_for(lambda: not switch.is_primary)
        server.start()
        assert switch.wait_ready(5)
        assert wait_for(lambda: calls == [1, 2])
    finally:
        switch.close()


def test_open_fails_clearly_when_nobody_listens(p4info):
    switch = SwitchConnection(SwitchOptions("127.0.0.1:1", backoff_initial=0.01), p4info)
    with pytest.raises(P4RuntimeError, match=r"no P4Runtime primary session with 127\.0\.0\.1:1"):
        switch.open(timeout=0.3)


def test_routes_are_installed_from_the_host_plan(fake, p4info, tmp_path):
    _server, address = fake
    plan = tmp_path / "hosts.json"
    plan.write_text(json.dumps([{"name": "h1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1},
                                {"name": "s1", "ip": "10.0.0.100", "mac": "02:00:00:00:00:64", "port": 9}]))
    switch = connect(address, p4info)
    try:
        dp = P4RuntimeDataPlane(switch)
        assert dp.install_routes(load_hosts(plan)) == 2
        assert dp.install_routes(load_hosts(plan)) == 2  # idempotent
        routes = switch.read_table("ipv4_lpm")
        assert sorted((r.match["hdr.ipv4.dst_addr"].value, r.params["port"]) for r in routes) == [
            (0x0A000001, 1), (0x0A000064, 9)]
    finally:
        switch.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "cannot read"), ('[{"ip": "10.0.0.1", "mac": "02:00:00:00:00:01"}]', "needs ip"),
     ('[{"ip": "10.0.0.999", "mac": "02:00:00:00:00:01", "port": 1}]', "needs ip"),
     ('[{"ip": "10.0.0.1", "mac": "zz", "port": 1}]', "bad MAC"), ('"x"', "expected a list")],
)
def test_bad_host_plan_is_reported_with_the_file_name(tmp_path, content, message):
    plan = tmp_path / "hosts.json"
    plan.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_hosts(plan)


def test_host_plan_accepts_a_mapping_form(tmp_path):
    plan = tmp_path / "hosts.json"
    plan.write_text(json.dumps({"hosts": {"h1": {"ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1}}}))
    assert load_hosts(plan) == [Host("h1", "10.0.0.1", "02:00:00:00:00:01", 1)]


def test_several_switches_in_one_process_do_not_share_state(p4info):
    servers = [FakeServer(), FakeServer()]
    addresses = [s.start() for s in servers]
    switches = [connect(a, p4info) for a in addresses]
    try:
        for index, switch in enumerate(switches):
            switch.set_pipeline(b"x", 1)
            P4RuntimeDataPlane(switch).install(ChunkKey(index, 1, 0), index)
        assert [P4RuntimeDataPlane(s).installed() for s in switches] == [{ChunkKey(0, 1, 0): 0}, {ChunkKey(1, 1, 0): 1}]
    finally:
        for switch in switches:
            switch.close()
        for server in servers:
            server.stop()
        assert threading.active_count() < 50


def test_multicast_group_is_created_then_replaced(fake, p4info):
    from softswitch.target import Replica

    server, address = fake
    switch = connect(address, p4info)
    try:
        switch.set_multicast_group(7, [Replica(1), Replica(2, rid=5)])
        switch.set_multicast_group(7, [Replica(3)])
        group = server.servicer.groups[7]
        assert [(r.egress_port, r.instance) for r in group.replicas] == [(3, 0)]
    finally:
        switch.close()


def test_packet_out_carries_every_header_field_and_rejects_unknown_ones(fake, p4info):
    server, address = fake
    switch = connect(address, p4info)
    try:
        switch.packet_out(b"frame", {"egress_port": 3})
        sent = server.servicer.packet_outs.get(timeout=EXPECT_S)
        assert {m.metadata_id: m.value for m in sent.metadata} == {1: b"\x03", 2: b"\x00"}
        with pytest.raises(KeyError, match="no field colour"):
            switch.packet_out(b"frame", {"colour": 1})
    finally:
        switch.close()


def test_a_failing_packet_in_handler_does_not_drop_the_stream(fake, p4info):
    server, address = fake
    seen = []

    def handler(packet):
        seen.append(packet.payload)
        if packet.payload == b"bad":
            raise RuntimeError("handler bug")

    switch = connect(address, p4info, on_packet_in=handler)
    try:
        for payload in (b"bad", b"good"):
            response = p4runtime_pb2.StreamMessageResponse()
            response.packet.payload = payload
            server.servicer.push(response)
        assert wait_for(lambda: seen == [b"bad", b"good"])
        assert switch.connections == 1 and switch.is_primary
    finally:
        switch.close()


@pytest.mark.parametrize("handler_fails", [False, True])
def test_a_digest_list_is_acked_after_its_handler_ran_even_when_it_failed(fake, p4info, handler_fails):
    server, address = fake
    acked_before_handler = []

    def handler(digests):
        try:  # an ack sent before the handler ran would reach the switch meanwhile
            acked_before_handler.append(server.servicer.acks.get(timeout=0.5))
        except queue.Empty:
            acked_before_handler.append(None)
        if handler_fails:
            raise RuntimeError("handler bug")

    switch = connect(address, p4info, on_digest=handler)
    try:
        switch.configure_digest("hot_key_digest_t")
        response = hot_digest_list(p4info, 7, tenant=3, prefix_hash=0xABC, chunk_idx=0, estimate=4)
        server.servicer.push(response)
        ack = server.servicer.acks.get(timeout=2)
        assert (ack.digest_id, ack.list_id) == (response.digest.digest_id, 7)
        assert acked_before_handler == [None]  # the handler ran first, and the ack came after it
    finally:
        switch.close()
