"""The whole controller process object against a fake P4Runtime switch: start-up, digests, punts, restarts."""

from __future__ import annotations

import json
import time

import pytest
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.api import handle
from controller.service import Controller, ServeOptions
from kvpool.constants import Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP
from p4rt.bytestrings import decode, encode
from p4rt.p4info import P4Info
from tests.controller.fake_p4rt import FakeP4Runtime, FakeServer
from tests.controller.test_p4runtime import P4INFO_PATH, slot_read_responder, wait_for

P4INFO = P4Info.load(P4INFO_PATH)


@pytest.fixture
def setup(tmp_path):
    server = FakeServer()
    address = server.start()
    device_config = tmp_path / "kvswitch.json"
    device_config.write_bytes(b'{"fake": "device config"}')
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([{"name": "h1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1}]))
    options = ServeOptions(switch=address, p4info=P4INFO_PATH, device_config=device_config,
                           state=tmp_path / "state.sqlite", api="127.0.0.1:0", hosts_file=hosts,
                           tick_seconds=0.05, check_seconds=0.1)
    started = []

    def start() -> Controller:
        controller = Controller(options)
        controller.start(timeout=5)
        started.append(controller)
        return controller

    yield server, start
    for controller in started:
        controller.stop()
    server.stop()


def index_of(servicer: FakeP4Runtime) -> dict[ChunkKey, int]:
    table = P4INFO.table_id("kv_index")
    found = {}
    for entry in servicer.tables.values():
        if entry.table_id == table:
            fields = [decode(m.exact.value) for m in sorted(entry.match, key=lambda m: m.field_id)]
            found[ChunkKey(*fields)] = decode(entry.action.action.params[0].value)
    return found


def digest(key: ChunkKey, estimate: int = 5) -> p4runtime_pb2.StreamMessageResponse:
    response = p4runtime_pb2.StreamMessageResponse()
    response.digest.digest_id = P4INFO.digest_id("hot_key_digest_t")
    response.digest.list_id = 1
    member = response.digest.data.add().struct
    for value, width in ((key.tenant, 16), (key.prefix_hash, 64), (key.chunk, 8), (estimate, 32)):
        member.members.add().bitstring = encode(value, width)
    return response


def test_startup_installs_pipeline_detector_digest_and_routes(setup):
    server, start = setup
    controller = start()
    servicer = server.servicer
    assert servicer.pipeline_sets == 1 and servicer.config.cookie.cookie == controller.cookie
    assert P4INFO.digest_id("hot_key_digest_t") in servicer.digests
    sketch = servicer.defaults[P4INFO.table_id("sketch_config")]
    assert [decode(p.value) for p in sketch.action.action.params] == [3, controller.epoch]
    assert any(e.table_id == P4INFO.table_id("ipv4_lpm") for e in servicer.tables.values())
    assert handle(controller, "GET", "/status")[1]["primary"] is True


def test_hot_digest_becomes_an_index_entry(setup):
    server, start = setup
    controller = start()
    key = ChunkKey(7, 0x1234, 0)
    server.servicer.push(digest(key))
    assert wait_for(lambda: index_of(server.servicer) == {key: 0})
    assert wait_for(lambda: controller.metrics.snapshot()["admissions"] == {"hot digest": 1})


def test_punted_insert_is_answered_out_of_its_ingress_port(setup):
    server, start = setup
    start()
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:64") / IP(src="10.0.0.1", dst="10.0.0.100")
                  / UDP(sport=40000, dport=7420) / KVP(opcode="INSERT", tenant=1, req_id=5, prefix_hash=0x42))
    packet_in = p4runtime_pb2.StreamMessageResponse()
    packet_in.packet.payload = frame
    packet_in.packet.metadata.add(metadata_id=1, value=encode(3, 16))
    packet_in.packet.metadata.add(metadata_id=2, value=encode(1, 8))
    server.servicer.push(packet_in)
    out = server.servicer.packet_outs.get(timeout=2)
    assert {m.metadata_id: decode(m.value) for m in out.metadata}[1] == 3
    reply = Ether(out.payload)
    assert reply[IP].dst == "10.0.0.1" and reply[KVP].opcode == Opcode.INSERT_ACK and reply[KVP].req_id == 5
    assert reply[KVP].status == Status.OK


def test_read_slot_through_the_api(setup):
    server, start = setup
    key = ChunkKey(2, 0x99, 1)
    server.servicer.on_packet_out = slot_read_responder(P4INFO, (key, 4, b"kv"))
    controller = start()
    status, body = handle(controller, "GET", "/slots/3")
    assert status == 200 and body["key"] == str(key) and body["value_hex"] == b"kv".hex() and body["valid"]


def test_controller_restart_keeps_the_switch_as_it_is(setup):
    server, start = setup
    first = start()
    key = ChunkKey(1, 0xAA, 0)
    first.pool.pin(key)
    first.stop()
    second = start()
    assert second.last_reconcile["kept"] == 1 and second.last_reconcile["pins"] == 1
    assert server.servicer.pipeline_sets == 1  # same cookie: the pipeline was left alone
    assert second.pool.describe(key)["pin"] == "hard"


def test_restarted_switch_gets_pipeline_and_pool_back(setup):
    server, start = setup
    controller = start()
    keys = [ChunkKey(1, 0x10 + i, 0) for i in range(3)]
    for key in keys:
        controller.pool.on_hot_key(key)
    assert len(index_of(server.servicer)) == 3
    server.stop()
    server.servicer = FakeP4Runtime()  # a fresh switch process: no pipeline, no entries
    time.sleep(0.05)
    server.start()
    assert wait_for(lambda: index_of(server.servicer) == {k: i for i, k in enumerate(keys)}, timeout=10)
    assert server.servicer.pipeline_sets == 1
    assert controller.switch.connections == 2


def test_index_entries_deleted_behind_our_back_are_restored(setup):
    server, start = setup
    controller = start()
    key = ChunkKey(5, 0x55, 0)
    controller.pool.on_hot_key(key)
    table = P4INFO.table_id("kv_index")
    for match in [k for k, e in server.servicer.tables.items() if e.table_id == table]:
        del server.servicer.tables[match]
    assert wait_for(lambda: index_of(server.servicer) == {key: 0})
