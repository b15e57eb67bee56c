"""The controller against the real embedded switch: p4src/kvswitch.p4 behind softswitch's P4Runtime server.

The switch runs in this process on loopback gRPC with packets injected through its device (no veth needed);
port 2 is a real storage node object (kvpool.server.StorageNode). Slow: compiles and runs the P4 program.
"""

from __future__ import annotations

import json

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.service import Controller, ServeOptions
from controller.storage import StorageClientOptions, UdpStorageNode
from kvpool import wire
from kvpool.constants import Opcode, Status, Tier, tiers_of
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP
from kvtesting.inprocess import CLIENT, STORAGE, InProcessSwitch, compile_program
from tests.controller.test_p4runtime import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return compile_program(tmp_path_factory.mktemp("build"))


@pytest.fixture
def testbed(program, tmp_path):
    p4info, config = program
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([CLIENT, STORAGE]))
    switch = InProcessSwitch()
    address = switch.start()
    options = ServeOptions(switch=address, p4info=p4info, device_config=config, state=tmp_path / "state.sqlite",
                           api="127.0.0.1:0", hosts_file=hosts, tick_seconds=0.1)
    controllers = []

    def start_controller() -> Controller:
        controller = Controller(options)
        controller.start(timeout=60)
        controllers.append(controller)
        return controller

    yield switch, start_controller
    for controller in controllers:
        controller.stop()
    switch.stop()


def test_hot_key_is_admitted_filled_and_then_served_by_the_switch(testbed):
    switch, start_controller = testbed
    controller = start_controller()
    key = ChunkKey(1, 0xA1, 0)
    switch.put(1, key.prefix_hash, b"the block's first chunk", version=3)
    statuses = [switch.get(1, key.prefix_hash, req_id) for req_id in range(1, 4)]  # threshold 3: hot
    assert statuses == [Status.HIT_SERVER] * 3
    assert wait_for(lambda: key in controller.dataplane.installed())  # the index entry is on the switch
    assert switch.get(1, key.prefix_hash, 10) == Status.HIT_SERVER  # this reply fills the slot
    assert switch.get(1, key.prefix_hash, 11) == Status.HIT_SWITCH
    slot = controller.pool.slots.slot_of(key)
    read = controller.read_slot(slot)
    assert read["key"] == str(key) and read["valid"] and bytes.fromhex(read["value_hex"]) == b"the block's first chunk"
    assert wait_for(lambda: controller.pool.describe(key)["hits"] >= 1)
    assert controller.metrics.snapshot()["hot_to_first_hit"]["count"] == 1


def test_punted_insert_is_answered_with_insert_ack_on_the_clients_port(testbed):
    switch, start_controller = testbed
    start_controller()
    frame = bytes(Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
                  / UDP(sport=40001, dport=7420) / KVP(opcode="INSERT", tenant=2, req_id=9, prefix_hash=0x77,
                                                       flags=0x04))
    switch.to_client.clear()
    switch.device.receive(CLIENT["port"], frame)
    assert wait_for(lambda: switch.to_client)
    reply = Ether(switch.to_client[0])
    assert reply[IP].src == STORAGE["ip"] and reply[IP].dst == CLIENT["ip"]
    assert (reply[KVP].opcode, reply[KVP].status, reply[KVP].req_id) == (Opcode.INSERT_ACK, Status.OK, 9)
    assert Tier.SWITCH in tiers_of(reply[KVP].aux)  # F_PIN: pinned, so admitted at once


class InProcessStorage(UdpStorageNode):
    """The controller's storage client talking to the testbed's in-process storage node (no socket)."""

    def __init__(self, node) -> None:
        super().__init__(StorageClientOptions("127.0.0.1"))
        self.node = node

    def _exchange(self, header: wire.Header, reply_opcode: int):
        data = self.node.handle(header.replace(req_id=1).pack())
        return None if data is None else (wire.Header.unpack(data), data)


def test_insert_with_value_is_filled_with_the_storage_nodes_bytes_and_served(testbed):
    """Coherence: an INSERT's value is never written; the controller SLOT_WRITEs what the storage node holds."""
    switch, start_controller = testbed
    controller = start_controller()
    controller.pool.mover.storage = InProcessStorage(switch.storage)
    key = ChunkKey(3, 0x5EED, 0)
    switch.put(3, key.prefix_hash, b"stored value", version=1)
    header = wire.Header(Opcode.INSERT, tenant=3, req_id=1, prefix_hash=key.prefix_hash, version=1, flags=0x04)
    frame = bytes(Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
                  / UDP(sport=40002, dport=7420) / wire.encode(header, b"forged bytes"))
    switch.device.receive(CLIENT["port"], frame)
    assert wait_for(lambda: controller.dataplane.slot_write_acks.get("OK") == 1)
    assert switch.get(3, key.prefix_hash, 2) == Status.HIT_SWITCH  # never asked the storage node
    slot = controller.pool.slots.slot_of(key)
    assert controller.read_slot(slot)["value_hex"] == b"stored value".hex()


def test_controller_restart_reconciles_with_what_the_switch_holds(testbed):
    _, start_controller = testbed
    first = start_controller()
    keys = [ChunkKey(1, 0xD0 + i, 0) for i in range(3)]
    for key in keys:
        first.pool.on_hot_key(key)
    first.pool.pin(keys[0])
    first.stop()
    second = start_controller()
    assert second.last_reconcile == {"kept": 3, "adopted": 0, "reinstalled": 0, "pins": 1, "dropped": 0, "deferred": 0}
    assert second.dataplane.installed() == {k: i for i, k in enumerate(keys)}


def test_a_second_controller_with_a_lower_election_id_stays_backup(testbed, program):
    from p4rt.connection import SwitchConnection, SwitchOptions
    from p4rt.errors import P4RuntimeError
    from p4rt.p4info import P4Info

    switch, start_controller = testbed
    controller = start_controller()
    rival = SwitchConnection(SwitchOptions(switch.address, election_id=0), P4Info.load(program[0]))
    with pytest.raises(P4RuntimeError, match="not primary"):
        rival.open(timeout=2)
    assert controller.switch.is_primary
