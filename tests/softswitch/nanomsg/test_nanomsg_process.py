"""kvswitch.p4 driven through `--packet-in ipc://...` on the softswitch process and on BMv2, as PTF's `nn`
platform drives BMv2: each target's output bytes must equal the in-process switch's for the same scenario,
so the two targets give identical bytes through the nanomsg interface.
"""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import Opcode
from kvpool.protocol import KVP
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CPU_PORT,
    P4_MAIN,
    STORAGE_IP,
    SWITCH_MAC,
    KvNet,
    chunk_key,
    kvp_frame,
    value_chunk,
)
from kvtesting.switch_process import BMV2, SOFTSWITCH, SwitchKind, compile_program
from tests.softswitch.nanomsg.nn_switch import NanomsgSwitchProcess

HIT, MISS = chunk_key(tenant=1, prefix_hash=0x1111), chunk_key(tenant=1, prefix_hash=0x2222)


def scenario(target) -> list[list[tuple[int, bytes]]]:
    """Routes and an index entry installed; a storage node's reply fills the slot; then a GET hit, a GET
    miss and a routed plain UDP frame. Each step's outputs, sorted (ports may interleave differently)."""
    net = KvNet(target, {})
    net.install_routes()
    net.set_port_roles()
    net.index(HIT, 1)
    steps = [net.server_reply(HIT, value_chunk(1), version=1), net.get(HIT), net.get(HIT, req_id=2)]
    steps.append(net.send(CLIENT_PORT, kvp_frame(KVP(opcode=Opcode.GET, tenant=MISS.tenant,
                                                     prefix_hash=MISS.prefix_hash, chunk_count=4, req_id=3))))
    l3 = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP) / UDP(dport=53) / bytes(64)
    steps.append(net.send(CLIENT_PORT, l3))
    return [sorted(step) for step in steps]


@pytest.fixture(scope="module")
def expected() -> list[list[tuple[int, bytes]]]:
    from softswitch.frontend import load_program
    from softswitch.runtime import SoftSwitch

    return scenario(SoftSwitch.load(load_program(str(P4_MAIN)), cpu_port=CPU_PORT))


def run_over_nanomsg(kind: SwitchKind, tmp_path) -> list[list[tuple[int, bytes]]]:
    compiled = compile_program(kind, P4_MAIN, tmp_path / "build")
    proc = NanomsgSwitchProcess(kind, compiled, tmp_path, cpu_port=CPU_PORT)
    try:
        got = scenario(proc.start())
    finally:
        proc.close()
    return got


@pytest.mark.slow
def test_softswitch_process_over_nanomsg_gives_the_in_process_bytes(expected, tmp_path):
    got = run_over_nanomsg(SOFTSWITCH, tmp_path)
    assert got[1] and got[1][0][0] == CLIENT_PORT, "the GET after the fill is answered by the switch"
    assert got == expected


@pytest.mark.slow
@pytest.mark.bmv2
@pytest.mark.skipif(not BMV2.available(), reason=f"not on PATH: {BMV2.missing_tools()}")
def test_bmv2_over_nanomsg_gives_the_same_bytes(expected, tmp_path):
    assert run_over_nanomsg(BMV2, tmp_path) == expected
