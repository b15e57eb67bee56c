"""kvtesting.packets: send/expect over the three kinds of target, on a tiny forwarding program (fwd.p4, the
one docs/packet-tests.md writes)."""

from __future__ import annotations

import os
import pathlib

import pytest
from scapy.layers.l2 import Ether

from kvtesting.packets import PacketMismatch, available_kinds, open_switch
from kvtesting.switch_process import BMV2
from softswitch.target import Exact, TableEntry

PROGRAM = pathlib.Path(__file__).with_name("fwd.p4")
FRAME = Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B5) / b"hello"
_root = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs need root")


def to_port(ingress: int, egress: int) -> TableEntry:
    return TableEntry("MyIngress.fwd", {"std.ingress_port": Exact(ingress)}, "MyIngress.to_port", {"port": egress})


@pytest.fixture(scope="module", params=[
    "inproc",
    pytest.param("softswitch", marks=[pytest.mark.slow, pytest.mark.root, _root]),
    pytest.param("bmv2", marks=[pytest.mark.slow, pytest.mark.root, pytest.mark.bmv2, _root,
                                pytest.mark.skipif(not BMV2.available(), reason="p4c/simple_switch_grpc not on PATH")]),
])
def switch(request, tmp_path_factory):
    with open_switch(request.param, PROGRAM, ports=(1, 2, 3), work_dir=tmp_path_factory.mktemp("sw")) as sw:
        sw.target.table_insert(to_port(1, 2))
        yield sw


@pytest.fixture
def sw(switch):
    switch.pending.clear()
    yield switch
    switch.pending.clear()


def test_a_frame_sent_on_a_mapped_port_comes_out_on_its_egress_port(sw):
    sw.send(1, FRAME, frames=1)
    assert sw.expect(2, FRAME) == bytes(FRAME)
    sw.expect_nothing()


def test_a_frame_on_an_unmapped_port_is_dropped(sw):
    sw.expect_drop(3, FRAME)


def test_expect_names_the_port_it_got_and_the_first_differing_byte(sw):
    sw.send(1, FRAME, frames=1)
    with pytest.raises(PacketMismatch, match="expected a packet on port 3, got one on port 2"):
        sw.expect(3, FRAME)
    sw.send(1, FRAME, frames=1)
    with pytest.raises(PacketMismatch, match="differs from byte 14 on"):
        sw.expect(2, Ether(bytes(FRAME)[:14]) / b"HELLO")


def test_expect_takes_a_predicate_and_reports_leftovers(sw):
    sw.send(1, FRAME, frames=1)
    sw.send(1, FRAME, frames=1)
    sw.expect(2, lambda data: data.endswith(b"hello"))
    with pytest.raises(PacketMismatch, match="1 unexpected output"):
        sw.expect_nothing()


def test_nothing_out_when_something_was_expected_is_a_mismatch(sw):
    with pytest.raises(PacketMismatch, match="nothing came out"):
        sw.expect(2, FRAME)


def test_available_kinds_always_has_the_in_process_switch():
    kinds = available_kinds()
    assert kinds[0] == "inproc" and set(kinds) <= {"inproc", "softswitch", "bmv2"}
    assert ("bmv2" in kinds) == (os.geteuid() == 0 and BMV2.available())


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown target kind 'tofino'"), open_switch("tofino", PROGRAM):
        pass
