"""The switch pool across a leaf-spine fabric: readers on two leaves, one controller per P4 switch.

One soft-target leaf-spine testbed for the module (h1, h2 on l1; h3, h4 and st1 on l2; spines sp1, sp2).
A GET from h1 crosses l1 → sp1 → l2 → st1 and its reply comes back the same way, so every switch on the
path counts the miss in its own sketch, and each controller admits the key in its own switch. The tests
check what a reader sees: the hot block ends up served by a switch for readers on both leaves, with the
written bytes, and the storage node's own GET count (STAT over the management link) stops growing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from kvpool.blocks import chunk_count
from kvpool.client import ClientOptions, KVPClient
from topo.switches import REPO
from topo.testbed import Testbed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

READERS = ("h1", "h3")
"""One inference host on each leaf: h1 on l1 (its GETs cross the spine), h3 on l2, the storage node's leaf."""
CLIENT = [sys.executable, "-m", "kvpool.client", "--server", "10.0.0.100", "--timeout", "1"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WAIT = 30.0
"""Seconds the block may take to become hot, be admitted and filled (digest per switch, then a reply)."""


@dataclass(frozen=True)
class Block:
    prefix_hash: int
    data: bytes

    @property
    def chunks(self) -> int:
        return chunk_count(len(self.data))


@dataclass(frozen=True)
class Read:
    host: str
    statuses: tuple[str, ...]
    """HIT_SWITCH / HIT_SERVER per chunk, in chunk order."""


def client_in(bed: Testbed, hosts: tuple[str, ...], *args: str) -> list[tuple[int, str]]:
    """Run the KVP client with `args` in every host at once; (exit status, output) per host."""
    processes = [bed.net[h].popen([*CLIENT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  cwd=str(REPO), env=ENV, text=True) for h in hosts]
    return [(p.returncode, out) for p in processes for out in [p.communicate(timeout=60)[0]]]


def get(bed: Testbed, block: Block, hosts: tuple[str, ...] = READERS) -> list[Read]:
    """GET the whole block from every host at once; every read must succeed with exactly the written bytes."""
    reads = []
    for host, (rc, out) in zip(hosts, client_in(bed, hosts, "get", hex(block.prefix_hash), "--chunks",
                                                str(block.chunks)), strict=True):
        assert rc == 0, f"{host}: {out}"
        lines = out.strip().splitlines()  # "block …", "  chunk I: STATUS …" per chunk, the bytes in hex
        assert bytes.fromhex(lines[-1].strip()) == block.data, f"{host} read a wrong value: {out}"
        statuses = tuple(line.split()[2] for line in lines if line.strip().startswith("chunk "))
        assert len(statuses) == block.chunks, out
        reads.append(Read(host, statuses))
    return reads


def stat(bed: Testbed, block: Block) -> list[int]:
    """GETs the storage node received, per chunk (asked over the management link, so not counted as a GET)."""
    with KVPClient(ClientOptions(server=bed.storage_address, timeout=0.5, retries=2)) as client:
        return [client.stat(block.prefix_hash, i) for i in range(block.chunks)]


def switch_hits(bed: Testbed, switch: str, block: Block) -> int:
    """Hits the controller of `switch` counted for the block's chunks (`ls --json`)."""
    device_id = next(sw.device_id for sw in bed.plan.switches if sw.name == switch)
    done = subprocess.run([sys.executable, "-m", "controller", "ls", "--json", "--api", bed.api_address(device_id)],
                          capture_output=True, text=True, cwd=REPO, env=ENV, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    prefix = f"{block.prefix_hash:016x}"
    return sum(int(row.get("hits") or 0) for row in json.loads(done.stdout) if prefix in row["key"])


def leaf_of(bed: Testbed, host: str) -> str:
    """The switch `host` is linked to."""
    switches = set(bed.topo.switches())
    return next(peer for a, b in bed.topo.links() for me, peer in ((a, b), (b, a)) if me == host and peer in switches)


@pytest.fixture(scope="module")
def bed(module_testbed) -> Testbed:
    bed = module_testbed(target="soft", hosts=4, topology="leaf-spine")
    leaves = {host: leaf_of(bed, host) for host in READERS}
    assert len(set(leaves.values())) == len(READERS), f"the readers must sit on different leaves: {leaves}"
    return bed


@pytest.fixture(scope="module")
def hot_rounds(bed) -> tuple[Block, list[list[Read]], list[int]]:
    """Write a two-chunk block from h1, then both readers GET it at once, round after round, until one whole
    round is served by switches; (the block, the rounds, STAT right after the first all-switch round)."""
    block = Block(0x1EAF_5914E, b"leaf-spine-kv-block " * 11)  # 220 bytes: 2 chunks
    [(rc, out)] = client_in(bed, ("h1",), "put", hex(block.prefix_hash), "--version", "1", "--data",
                            block.data.decode())
    assert rc == 0, out
    rounds: list[list[Read]] = []
    deadline = time.monotonic() + WAIT
    while not rounds or not all(s == "HIT_SWITCH" for r in rounds[-1] for s in r.statuses):
        if time.monotonic() > deadline:
            pytest.fail(f"no round served by the switches within {WAIT:.0f} s: {rounds}")
        rounds.append(get(bed, block))
        time.sleep(0.3)
    return block, rounds, stat(bed, block)


def test_hot_block_is_first_served_by_the_storage_node_then_by_a_switch_for_both_leaves(hot_rounds):
    _, rounds, _ = hot_rounds
    first, last = rounds[0], rounds[-1]
    assert all(s == "HIT_SERVER" for r in first for s in r.statuses), rounds
    assert {r.host for r in last} == set(READERS)
    assert all(s == "HIT_SWITCH" for r in last for s in r.statuses), rounds


def test_storage_node_stops_counting_gets_once_a_switch_serves_the_block(bed, hot_rounds):
    block, _, before = hot_rounds
    assert min(before) >= len(READERS), before  # the first round went to the storage node from both leaves
    for _ in range(3):
        assert all(s == "HIT_SWITCH" for r in get(bed, block) for s in r.statuses)
    assert stat(bed, block) == before


def test_the_switch_hits_readers_saw_are_counted_by_the_leaves_controllers(bed, hot_rounds):
    block, _, _ = hot_rounds
    # the hits of the last round and of the previous test were answered by some leaf on the readers' paths
    wanted = len(READERS) * block.chunks  # at least the last round of `hot_rounds`, all served by switches
    deadline = time.monotonic() + WAIT  # controllers poll the hit counters periodically
    while True:
        counted = {sw.name: switch_hits(bed, sw.name, block) for sw in bed.plan.switches}
        if sum(counted.values()) >= wanted or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sum(counted.values()) >= wanted, counted


def test_the_readers_own_leaf_ends_up_serving_them(bed, hot_rounds):
    block, _, _ = hot_rounds
    reader = READERS[0]
    leaf = leaf_of(bed, reader)
    assert leaf != leaf_of(bed, bed.plan.storage.name)
    deadline = time.monotonic() + WAIT
    while switch_hits(bed, leaf, block) == 0:
        if time.monotonic() > deadline:
            pytest.fail(f"{leaf} served none of {reader}'s GETs within {WAIT:.0f} s")
        assert all(s == "HIT_SWITCH" for r in get(bed, block, (reader,)) for s in r.statuses)
        time.sleep(0.3)
