"""End to end on real interfaces: the kvpool client and storage node in their own network namespaces, the
softswitch running kvswitch.p4 between them, entries written with the unmodified p4runtime-shell.

The bed (namespaces `itgt<M>-*`, veths `itgt<M>*`, `<M>` from the process id) is `kvtesting.vethnet.VethNet`, shared with `bench/dataplane.py`.
Each test uses its own block (prefix hash) and its own slots, so the tests do not depend on their order.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from kvtesting.vethnet import VethNet, VethNetError, VethNetOptions

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and veth pairs need root")]

TENANT = 0
"""The agent's tenant (its default); part of every index entry."""


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with VethNet(VethNetOptions(tag="t"), workdir=tmp_path_factory.mktemp("vethnet")) as bed:
        yield bed


def block_bytes(seed: int, size: int = 300) -> bytes:
    """A recognisable block of `size` bytes (300 = three chunks, the last one partial)."""
    return bytes((seed * 37 + i * 11) & 0xFF for i in range(size))


def chunk_count(data: bytes) -> int:
    return max(1, -(-len(data) // 128))


def get(net: VethNet, prefix_hash: int, chunks: int | None, **fields: object) -> tuple[bytes, int, list[str]]:
    """Read a block; `chunks` is its chunk count as the reader knows it (None: learn it from chunk 0's reply)."""
    reply = net.request("get", ph=prefix_hash, chunks=chunks, **fields)
    return bytes.fromhex(reply["data"]), reply["version"], reply["statuses"]


def stat(net: VethNet, prefix_hash: int, chunks: int) -> list[int]:
    return net.request("stat", ph=prefix_hash, chunks=chunks)["counts"]


def admit(net: VethNet, prefix_hash: int, chunks: int, first_slot: int, min_version: int) -> None:
    """What the controller does when it admits a block: one `kv_index` entry per chunk."""
    assert net.switch is not None
    for idx in range(chunks):
        net.switch.index(TENANT, prefix_hash, idx, first_slot + idx, min_version)


def put_and_cache(net: VethNet, prefix_hash: int, data: bytes, first_slot: int) -> None:
    """PUT v1, admit its chunks, and let one GET's replies fill the slots."""
    net.request("put", ph=prefix_hash, data=data.hex(), version=1)
    admit(net, prefix_hash, chunk_count(data), first_slot, min_version=1)
    _, _, statuses = get(net, prefix_hash, chunk_count(data))
    assert statuses == ["HIT_SERVER"] * chunk_count(data)


def test_block_put_through_the_switch_is_read_back_from_the_storage_node(net):
    data = block_bytes(1)
    net.request("put", ph=0x1001, data=data.hex(), version=1)
    got, version, statuses = get(net, 0x1001, None)
    assert (got, version) == (data, 1)
    assert statuses == ["HIT_SERVER"] * 3
    assert stat(net, 0x1001, 3) == [1, 1, 1]


def test_admitted_block_is_filled_by_a_server_reply_then_served_by_the_switch(net):
    data, ph = block_bytes(2), 0x2002
    net.request("put", ph=ph, data=data.hex(), version=1)
    assert get(net, ph, None) == (data, 1, ["HIT_SERVER"] * 3)  # not admitted yet
    admit(net, ph, 3, first_slot=10, min_version=1)
    fills = net.switch.event("FILL")
    assert get(net, ph, 3) == (data, 1, ["HIT_SERVER"] * 3)  # these replies fill the slots on their way back
    assert net.switch.event("FILL") == fills + 3
    served = stat(net, ph, 3)
    hits = net.switch.event("GET_HIT")
    for _ in range(2):
        assert get(net, ph, 3) == (data, 1, ["HIT_SWITCH"] * 3)
    assert net.switch.event("GET_HIT") == hits + 6
    assert stat(net, ph, 3) == served  # the storage node saw none of the switch-served GETs


def test_put_of_a_new_version_invalidates_the_switch_copy(net):
    old, new, ph = block_bytes(3), block_bytes(4, size=290), 0x3003
    put_and_cache(net, ph, old, first_slot=20)
    assert get(net, ph, 3) == (old, 1, ["HIT_SWITCH"] * 3)
    net.request("put", ph=ph, data=new.hex(), version=2)
    assert get(net, ph, 3) == (new, 2, ["HIT_SERVER"] * 3)  # never the old copy
    assert get(net, ph, 3) == (new, 2, ["HIT_SWITCH"] * 3)  # the new version's replies filled the slots


def test_bypass_get_is_answered_by_the_storage_node_even_when_cached(net):
    data, ph = block_bytes(5, size=128), 0x4004
    put_and_cache(net, ph, data, first_slot=30)
    assert get(net, ph, 1) == (data, 1, ["HIT_SWITCH"])
    before = stat(net, ph, 1)
    assert get(net, ph, 1, bypass=True) == (data, 1, ["HIT_SERVER"])
    assert stat(net, ph, 1) == [before[0] + 1]


def test_evicted_block_is_served_by_the_storage_node_again(net):
    data, ph = block_bytes(6, size=200), 0x5005
    put_and_cache(net, ph, data, first_slot=40)
    assert get(net, ph, 2) == (data, 1, ["HIT_SWITCH"] * 2)
    for idx in range(2):
        net.switch.unindex(TENANT, ph, idx)
    before = stat(net, ph, 2)
    assert get(net, ph, 2) == (data, 1, ["HIT_SERVER"] * 2)
    assert stat(net, ph, 2) == [n + 1 for n in before]


def test_switch_hit_tells_a_reader_the_block_chunk_count(net):
    data, ph = block_bytes(7), 0x6006
    put_and_cache(net, ph, data, first_slot=50)
    assert get(net, ph, 3) == (data, 1, ["HIT_SWITCH"] * 3)
    assert get(net, ph, None) == (data, 1, ["HIT_SWITCH"] * 3)


def test_failed_start_leaves_no_namespace_or_veth_behind(tmp_path):
    """The bed's own clean-up: links are built before the switch starts, so a bad program exercises it."""
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\nheader h_t { bit<8> x }\n")
    options = VethNetOptions(tag="tf", program=bad)
    bed = VethNet(options, workdir=tmp_path)
    with pytest.raises(VethNetError, match=r"bad\.p4:2:"), bed:
        pass
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert f"{bed.prefix}-" not in namespaces  # this bed's: another checkout's run of this test may be live
    assert bed.prefix not in links
