"""Issue 9 in a fabric: once a PUT is acknowledged, no leaf or spine serves the old version.

One soft-target leaf-spine testbed (h1, h2 on l1; h3, h4 and st1 on l2; spines sp1, sp2; a controller per
switch). The block is pinned on every switch and read until each reader's own leaf serves it. Then a writer
PUTs the next version while readers on both leaves read back to back for a few seconds: every read that began
after the writer saw its ack must return the new version. Writers on the storage node's leaf (h4: the ack
crosses l2 only, so l1 and the spines learn of the write from the data plane's INVALIDATE) and on the other
leaf (h2). Figures per round in `out/coherence/fabric.json`.
"""

from __future__ import annotations

import os
import shutil

import pytest

from kvtesting.coherence import Figures
from tests.topo.coherence_bed import OUT, Block, Pool, assert_no_wrong

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

HOSTS = ("h1", "h2", "h3", "h4")
READ_SECONDS = 3.0
"""How long the readers keep reading after (and while) each write."""


@pytest.fixture(scope="module")
def pool(module_testbed):
    bed = module_testbed(target="soft", hosts=len(HOSTS), topology="leaf-spine")
    pool = Pool(bed, HOSTS, Figures(OUT / "fabric.json"))
    yield pool
    pool.close()


def leaf_of(pool: Pool, host: str) -> str:
    switches = set(pool.bed.topo.switches())
    return next(peer for a, b in pool.bed.topo.links() for me, peer in ((a, b), (b, a))
                if me == host and peer in switches)


def device_ids(pool: Pool) -> list[int]:
    return [sw.device_id for sw in pool.bed.plan.switches]


@pytest.mark.parametrize("writer", ["h4", "h2"])
def test_no_reader_on_any_leaf_gets_the_old_version_once_the_put_is_acknowledged(pool, writer):
    """Four writes, each of a block every switch caches: the other three hosts (on both leaves) read
    throughout; 0 reads of an older version once the write was acknowledged."""
    assert leaf_of(pool, "h1") != leaf_of(pool, "h3")
    where = "the storage node's leaf" if leaf_of(pool, writer) == leaf_of(pool, "st1") else "the other leaf"
    tally = pool.figures[f"fabric: writer {writer} on {where}"]
    readers = [h for h in HOSTS if h != writer]  # both leaves
    ph = 0xFAB0_0000 + HOSTS.index(writer)
    block = Block.of(ph, 1, size=200)
    pool.put(writer, block, tally)
    for device_id in device_ids(pool):
        pool.pin(block, device_id)
    rounds = []
    for version in range(2, 6):
        for reader in readers:  # each reader's own leaf serves the cached version
            pool.read_until_switch(reader, block, tally)
        newer = Block.of(ph, version, size=200)
        for reader in readers:
            pool.agents[reader].send("reads", blocks=[[ph, newer.chunks]], seconds=READ_SECONDS)
        pool.put(writer, newer, tally)
        acked = pool.model.writes[ph][-1].acked
        before = tally.wrong_reads
        after_ack = switch_after_ack = 0
        for reader in readers:
            reads = pool.agents[reader].answer()["reads"]
            tally.count_reads(reads, pool.model)
            later = [r for r in reads if r["started"] > acked and "data" in r]
            after_ack += len(later)
            switch_after_ack += sum(all(r["switch"]) for r in later)
        rounds.append({"version": version, "reads after the ack": after_ack,
                       "HIT_SWITCH after the ack": switch_after_ack, "wrong": tally.wrong_reads - before})
        block = newer
    tally.notes["rounds"] = rounds
    pool.figures.save()
    assert_no_wrong(tally)
    assert sum(r["HIT_SWITCH after the ack"] for r in rounds) > 0, rounds  # the switches kept serving
