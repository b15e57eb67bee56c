"""Issue 9 end to end on the star testbed (softswitch): the pool never serves a wrong value.

One soft-target star (h1..h3, st1, s1 and its controller) for the module, one `kvtesting.coherence` agent per
host. Every read is judged against the test's model of the storage node: a value older than the newest write
acknowledged before the read began, or bytes no single write of that version had (stitched, truncated,
planted), is a wrong read. Each scenario records its figures (reads, HIT_SWITCH reads, wrong reads, writes,
falsely failed writes) in `out/coherence/star.json`.

Scenarios: stale value after re-admission through every admission path; a controller-written (SLOT_WRITE)
3-chunk block read whole; two writers of one version with different bytes; lost PUT_ACKs (netem on h1's link);
kill -9 of the storage node under load; and a seeded, time-bounded randomized interleaving of all of it.
"""

from __future__ import annotations

import os
import random
import shutil
import time

import pytest

from kvtesting.coherence import Figures
from tests.topo.coherence_bed import OUT, WAIT, Block, Pool, assert_no_wrong, eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

HOSTS = ("h1", "h2", "h3")
READS_AFTER = 100
"""Reads after each re-admission, on top of those until the switch serves the new version."""


@pytest.fixture(scope="module")
def pool(module_testbed):
    bed = module_testbed(target="soft", hosts=len(HOSTS))
    pool = Pool(bed, HOSTS, Figures(OUT / "star.json"))
    yield pool
    pool.close()


# ---- admission paths ------------------------------------------------------------------------------------------

def admit_by_pin(pool: Pool, block: Block) -> None:
    pool.pin(block)


def admit_by_digest(pool: Pool, block: Block) -> None:
    """Every host reads the block at once until the controller admitted it after a hot-key digest."""
    tally = pool.figures["admission path: hot-key digest"]

    def admitted() -> bool:
        pool.concurrently({h: ("reads", {"blocks": [[block.prefix_hash, block.chunks]], "count": 2})
                           for h in HOSTS})
        return pool.resident(block)

    eventually(f"{block.prefix_hash:#x} admitted after hot-key digests", admitted, pause=0.1)
    tally.notes["admitted_by_digest"] = tally.notes.get("admitted_by_digest", 0) + 1


def admit_by_insert(pool: Pool, block: Block, with_version: bool) -> None:
    """A client INSERT with F_PIN for every chunk (without or with the block's version)."""
    for i in range(block.chunks):
        answer = pool.agents["h2"].call("insert", ph=block.prefix_hash, chunk=i, chunks=block.chunks, pin=True,
                                        version=block.version if with_version else 0)
        assert answer["status"] == "OK", answer
    eventually(f"{block.prefix_hash:#x} admitted on INSERT", lambda: pool.resident(block))


ADMISSIONS = {
    "CLI pin": admit_by_pin,
    "hot-key digest": admit_by_digest,
    "client INSERT without version": lambda pool, block: admit_by_insert(pool, block, with_version=False),
    "client INSERT with version": lambda pool, block: admit_by_insert(pool, block, with_version=True),
}


@pytest.mark.parametrize("path", list(ADMISSIONS))
def test_no_stale_value_after_readmission(pool, path):
    """PUT v1, admit, read until HIT_SWITCH; evict; PUT v2 (the key is not indexed: nothing is invalidated);
    admit again (the old slot still holds v1's bytes); read: not one read of v1."""
    tally = pool.figures[f"re-admission: {path}"]
    admit = ADMISSIONS[path]
    ph = 0xC0E0_0000 + list(ADMISSIONS).index(path)
    # one chunk: a stale copy is returned whole (the client's own version check cannot mask it by a re-read)
    v1, v2 = Block.of(ph, 1, size=100), Block.of(ph, 2, size=100)
    pool.put("h1", v1, tally)
    admit(pool, v1)
    pool.read_until_switch("h1", v1, tally)
    pool.evict(v1)
    pool.put("h1", v2, tally)
    admit(pool, v2)
    pool.read_until_switch("h3", v2, tally)
    pool.reads("h1", [v2], tally, count=READS_AFTER)
    tally.notes["v1 reads after v2 acknowledged"] = tally.wrong_reads
    assert_no_wrong(tally)


def test_no_stale_value_after_readmission_across_a_controller_restart(pool):
    """Restore path: evict, kill -9 the controller, restart it (it restores its entries and generation counter),
    PUT v2, pin again: the new admission's generation is not the old one's, so v1's bytes are never served."""
    tally = pool.figures["re-admission: controller restart (restore)"]
    v1, v2, v3 = (Block.of(0xC0E0_0100, v) for v in (1, 2, 3))
    pool.put("h1", v1, tally)
    pool.pin(v1)
    pool.read_until_switch("h1", v1, tally)
    assert pool.bed.kill("controller s1") == -9
    pool.put("h2", v2, tally)  # while the controller is down: the data plane invalidates and bounds alone
    pool.bed.restart("controller s1")
    pool.read_until_switch("h3", v2, tally)  # restored entry (fresh generation), refilled with v2
    pool.evict(v2)
    assert pool.bed.kill("controller s1") == -9
    pool.bed.restart("controller s1")
    pool.put("h1", v3, tally)
    pool.pin(v3)
    pool.read_until_switch("h1", v3, tally)
    pool.reads("h2", [v3], tally, count=READS_AFTER)
    assert_no_wrong(tally)


def test_no_stale_value_after_readmission_across_a_switch_restart(pool):
    """Resync path: kill -9 the switch while the block is cached, restart it (the controller re-installs its
    entries under fresh generations), then evict, PUT v2 and pin again."""
    tally = pool.figures["re-admission: switch restart (resync)"]
    v1, v2 = Block.of(0xC0E0_0200, 1), Block.of(0xC0E0_0200, 2)
    pool.put("h1", v1, tally)
    pool.pin(v1)
    pool.read_until_switch("h1", v1, tally)
    connections = pool.status()["connections"]
    assert pool.bed.kill("switch s1") == -9
    pool.bed.restart("switch s1")
    eventually("the controller's resync of the restarted switch",
               lambda: (s := pool.status())["connections"] > connections
               and s["last_reconcile"].get("reinstalled", 0) > 0)
    pool.read_until_switch("h2", v1, tally)
    pool.evict(v1)
    pool.put("h3", v2, tally)
    pool.pin(v2)
    pool.read_until_switch("h1", v2, tally)
    pool.reads("h2", [v2], tally, count=READS_AFTER)
    assert_no_wrong(tally)


# ---- whole blocks ---------------------------------------------------------------------------------------------

def test_controller_written_three_chunk_block_is_read_whole(pool):
    """INSERT with a value makes the controller SLOT_WRITE what the storage node holds: every chunk with the
    block's real chunk_count, so a whole-block read without a chunk count returns every byte (300 of 300)."""
    tally = pool.figures["controller-written 3-chunk block"]
    block = Block.of(0xC0E0_0300, 1, size=300)
    assert block.chunks == 3
    pool.put("h1", block, tally)
    pool.pin(block)
    for i in range(block.chunks):  # the client's value is a claim; the controller writes the stored chunk
        chunk = block.data[i * 128:(i + 1) * 128]
        assert pool.agents["h2"].call("insert", ph=block.prefix_hash, chunk=i, chunks=block.chunks, pin=True,
                                      version=1, value=chunk.hex())["status"] == "OK"
    fills = [d for d in pool.api("GET", "/decisions?limit=200")[1] if d["action"] == "fill"
             and d["key"].startswith(block.key)]
    tally.notes["slot_writes"] = len(fills)
    pool.read_until_switch("h1", block, tally)
    reads = pool.agents["h3"].call("reads", blocks=[[block.prefix_hash, None]], count=READS_AFTER)["reads"]
    tally.count_reads(reads, pool.model)  # no chunk count given: chunk 0's header tells it
    assert all(len(bytes.fromhex(r["data"])) == 300 for r in reads), reads[:2]
    assert_no_wrong(tally)


def test_two_writers_of_one_version_never_produce_a_stitched_block(pool):
    """h1 and h2 PUT the same version with different 3-chunk bytes at the same moment, 40 times; h3 reads all
    the while. The storage node commits one of them whole and refuses the other (ERR_CONFLICT); no reader ever
    gets chunks of both."""
    tally = pool.figures["two writers, one version"]
    ph = 0xC0E0_0400
    first = Block.of(ph, 1, size=300, tag="A")
    pool.put("h1", first, tally)
    pool.pin(first)
    outcomes = {"one committed": 0, "both OK": 0, "none": 0}
    for version in range(2, 42):
        a, b = Block.of(ph, version, size=300, tag="A"), Block.of(ph, version, size=300, tag="B")
        answers = pool.concurrently({"h1": ("put", {"ph": ph, "data": a.data.hex(), "version": version}),
                                     "h2": ("put", {"ph": ph, "data": b.data.hex(), "version": version}),
                                     "h3": ("reads", {"blocks": [[ph, 3]], "count": 6})})
        oks = [pool.model.record(ph, version, blk.data, answers[h]) for h, blk in (("h1", a), ("h2", b))]
        tally.count_reads(answers["h3"]["reads"], pool.model)
        tally.writes += 2
        tally.failed_writes += oks.count(False)
        winner = a if oks[0] else b if oks[1] else None
        outcomes["both OK" if all(oks) else "one committed" if winner else "none"] += 1
        for ok, blk in zip(oks, (a, b), strict=True):
            if not ok and pool.stored(blk):
                tally.falsely_failed_writes += 1
    tally.notes["rounds"] = outcomes
    assert outcomes["both OK"] == 0 and outcomes["none"] == 0, outcomes
    assert_no_wrong(tally)


# ---- lost acknowledgements ------------------------------------------------------------------------------------

def test_lost_put_acks_never_make_a_stored_write_look_failed(pool):
    """h1 writes 60 2-chunk blocks while its link loses 5% of the datagrams either way and 30% of the PUT_ACKs
    (dropped on arrival in h1, after the switch and the storage node handled the PUT: a lost ack). Every write
    is resent until acknowledged and reports success; a write reported failed while the storage node holds its
    bytes would be a falsely failed one.

    (The loss is made in h1's client process, `kvpool.transport.LossyTransport`: this machine's kernel has
    neither netem nor tc actions nor iptables, so `tc netem` on the link is not available.)"""
    tally = pool.figures["lost PUT_ACKs (5% loss both ways + 30% of acks, h1)"]
    dropped = sent = 0
    for n, block in enumerate(Block.of(0xC0E0_0500 + k, v, tag="lossy") for v in range(1, 11) for k in range(6)):
        answer = pool.agents["h1"].call("put", ph=block.prefix_hash, data=block.data.hex(), version=block.version,
                                        retries=8, timeout=0.2, loss=0.05, ack_loss=0.3, seed=n)
        dropped, sent = dropped + answer["dropped"], sent + answer["sent"]
        ok = pool.model.record(block.prefix_hash, block.version, block.data, answer)
        tally.writes += 1
        if not ok:
            tally.failed_writes += 1
            tally.falsely_failed_writes += pool.stored(block)
            tally.notes.setdefault("failures", []).append(answer.get("error"))
    tally.notes.update({"datagrams dropped": dropped, "PUT datagrams sent (resends included)": sent})
    latest = [Block.of(0xC0E0_0500 + k, 10, tag="lossy") for k in range(6)]
    pool.reads("h2", latest, tally, count=60)
    pool.figures.save()
    assert dropped > 0, tally
    assert tally.failed_writes == 0, tally
    assert_no_wrong(tally)


# ---- kill -9 of the storage node under load ----------------------------------------------------------------------

def test_storage_node_killed_under_load_never_yields_a_wrong_value(pool):
    """h2 and h3 read a cached (pinned) block and an uncached one while the storage node is killed with SIGKILL
    and restarted; then both are written anew. Reads during the outage may fail (the uncached block), never
    return a wrong value; the switch keeps serving the cached one."""
    tally = pool.figures["kill -9 of the storage node under load"]
    cached, cold = Block.of(0xC0E0_0600, 1, tag="cached"), Block.of(0xC0E0_0601, 1, tag="cold")
    for block in (cached, cold):
        pool.put("h1", block, tally)
    pool.pin(cached)
    pool.read_until_switch("h1", cached, tally)
    load = {h: ("reads", {"blocks": [[b.prefix_hash, b.chunks] for b in (cached, cold)], "seconds": 6,
                          "seed": n}) for n, h in enumerate(("h2", "h3"))}
    for host, (op, fields) in load.items():
        pool.agents[host].send(op, **fields)
    time.sleep(1.0)
    assert pool.bed.kill("storage st1") == -9
    time.sleep(1.0)
    pool.bed.restart("storage st1")
    for host in load:
        tally.count_reads(pool.agents[host].answer()["reads"], pool.model)
    tally.notes["switch reads during the outage window"] = tally.switch_reads
    newer = [Block.of(b.prefix_hash, 2, tag=t) for b, t in ((cached, "cached"), (cold, "cold"))]
    for block in newer:
        pool.put("h1", block, tally)
    pool.read_until_switch("h2", newer[0], tally)
    pool.reads("h3", newer, tally, count=40)
    assert_no_wrong(tally, errors_expected=True)
    assert tally.switch_reads > 0, tally


# ---- randomized interleaving ------------------------------------------------------------------------------------

RANDOM_SEED = int(os.environ.get("KVSWITCH_COHERENCE_SEED", "909"))
RANDOM_SECONDS = float(os.environ.get("KVSWITCH_COHERENCE_SECONDS", "45"))


def test_randomized_interleaving_never_serves_a_wrong_value(pool):
    """Seeded and bounded in time: h1 PUTs (new and, rarely, stale versions), GETs, evicts and admits (CLI pin,
    INSERT without and with version, and hot-key digests, which h2's and h3's background reads cause), while
    the controller and the switch are killed and restarted now and then. Every read (h1's and the background
    readers') is checked against the model: never older than the newest write acknowledged before it began,
    never bytes no write of its version had."""
    rng = random.Random(RANDOM_SEED)
    tally = pool.figures[f"randomized (seed {RANDOM_SEED}, {RANDOM_SECONDS:.0f} s)"]
    blocks = {0xC0E0_0700 + k: size for k, size in enumerate((100, 200, 300, 128, 250))}
    version = dict.fromkeys(blocks, 0)
    ops: dict[str, int] = {}

    def current(ph: int) -> Block:
        return Block.of(ph, version[ph], size=blocks[ph], tag="rnd")

    for ph in blocks:
        version[ph] = 1
        pool.put("h1", current(ph), tally)
    deadline = time.monotonic() + RANDOM_SECONDS
    background = {h: ("reads", {"blocks": [[ph, None] for ph in blocks], "seconds": RANDOM_SECONDS,
                                "seed": RANDOM_SEED + n}) for n, h in enumerate(("h2", "h3"))}
    for host, (op, fields) in background.items():
        pool.agents[host].send(op, **fields)
    choices = ["put"] * 30 + ["get"] * 25 + ["evict"] * 10 + ["pin"] * 8 + ["insert"] * 6 + \
        ["insert_version"] * 6 + ["stale_put"] * 4 + ["unpin"] * 5 + ["restart_controller"] * 3 + \
        ["restart_switch"] * 3
    while time.monotonic() < deadline - 5:
        op = rng.choice(choices)
        ph = rng.choice(list(blocks))
        ops[op] = ops.get(op, 0) + 1
        block = current(ph)
        if op == "put":
            version[ph] += 1
            pool.put("h1", current(ph), tally)
        elif op == "stale_put":
            stale = Block.of(ph, max(1, version[ph] - 1), size=blocks[ph], tag="stale")
            answer = pool.put("h1", stale, tally, expect_ok=False)
            assert answer["status"] in ("ERR_STALE", "ERR_CONFLICT"), answer
        elif op == "get":
            pool.reads("h1", [block], tally, count=rng.randrange(1, 6))
        elif op == "evict":
            pool.unpin(block)
            pool.api("POST", "/evict", {"key": block.key}, check=False)
        elif op == "unpin":
            pool.unpin(block)
        elif op == "pin":
            pool.api("POST", "/pins", {"key": block.key}, check=False)
        elif op in ("insert", "insert_version"):
            for i in range(block.chunks):
                pool.agents["h1"].call("insert", ph=ph, chunk=i, chunks=block.chunks, pin=rng.random() < 0.5,
                                       version=version[ph] if op == "insert_version" else 0)
        elif op == "restart_controller":
            pool.bed.kill("controller s1")
            pool.bed.restart("controller s1")
        elif op == "restart_switch":
            connections = pool.status()["connections"]
            pool.bed.kill("switch s1")
            pool.bed.restart("switch s1")
            eventually("the controller's resync of the restarted switch",
                       lambda c=connections: pool.status()["connections"] > c, timeout=WAIT)
    for host in background:
        tally.count_reads(pool.agents[host].answer()["reads"], pool.model)
    tally.notes["operations"] = ops
    pool.figures.save()
    print(f"\nrandomized seed {RANDOM_SEED}: {tally.reads} reads, {tally.switch_reads} HIT_SWITCH, "
          f"{tally.wrong_reads} wrong, {tally.read_errors} without value, {tally.writes} writes, "
          f"{tally.falsely_failed_writes} falsely failed; operations {ops}")
    assert_no_wrong(tally, errors_expected=True)
    assert tally.switch_reads > 0, tally
