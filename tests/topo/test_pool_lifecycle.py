"""The switch pool's life cycle in the Mininet testbed, end to end with real processes.

One soft-target star (h1..h3, st1, one switch, one controller) for the whole module: hot-block admission
after the digest and the storage node's GET count standing still once the switch serves; pin / unpin /
evict through the operator CLI; the controller killed (SIGKILL) and restarted with its command line; the
switch process killed and restarted. Blocks are written and read by `python -m kvpool.client` inside the
hosts' namespaces; every read's bytes are compared with what was written, so a wrong value fails the test.
The cases share the testbed but not their blocks (each has its own prefix hashes).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvpool.blocks import chunk_count
from kvpool.client import ClientOptions, KVPClient
from kvpool.keys import ChunkKey
from topo.switches import REPO
from topo.testbed import Testbed

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

HOSTS = ("h1", "h2", "h3")
CLIENT = [sys.executable, "-m", "kvpool.client", "--server", "10.0.0.100", "--timeout", "1"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WAIT = 30.0
"""Seconds any one expected change (admission, a refill, a reconnect) may take before the test fails."""


@dataclass(frozen=True)
class Block:
    """A block the test wrote: its prefix hash and the bytes every read must return."""

    prefix_hash: int
    data: bytes
    version: int = 1

    @property
    def chunks(self) -> int:
        return chunk_count(len(self.data))

    @property
    def keys(self) -> list[str]:
        """The controller's names of its chunks (`tenant:prefixhash_hex:chunk`)."""
        return [str(ChunkKey(0, self.prefix_hash, i)) for i in range(self.chunks)]


@dataclass(frozen=True)
class Read:
    """One `kvpool.client get` run in a host."""

    host: str
    statuses: tuple[str, ...]
    """HIT_SWITCH / HIT_SERVER per chunk, in chunk order."""
    data: bytes
    output: str

    @property
    def from_switch(self) -> bool:
        return bool(self.statuses) and all(s == "HIT_SWITCH" for s in self.statuses)


# ---- talking to the testbed --------------------------------------------------------------------------------

def launch(bed: Testbed, hosts: tuple[str, ...], *args: str) -> list[subprocess.Popen]:
    """Start the KVP client with `args` in every host at once."""
    return [bed.net[h].popen([*CLIENT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             cwd=str(REPO), env=ENV, text=True) for h in hosts]


def in_hosts(bed: Testbed, hosts: tuple[str, ...], *args: str,
             processes: list[subprocess.Popen] | None = None) -> list[tuple[int, str]]:
    """Run the KVP client with `args` in every host at once (or finish `processes` that `launch` started);
    (exit status, output) per host."""
    processes = processes if processes is not None else launch(bed, hosts, *args)
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=60)
        results.append((process.returncode, out))
    return results


def put(bed: Testbed, host: str, block: Block) -> None:
    [(rc, out)] = in_hosts(bed, (host,), "put", hex(block.prefix_hash), "--version", str(block.version),
                           "--data", block.data.decode())
    assert rc == 0, out


def get_args(block: Block) -> tuple[str, ...]:
    return ("get", hex(block.prefix_hash), "--chunks", str(block.chunks))


def get(bed: Testbed, block: Block, hosts: tuple[str, ...] = ("h1",),
        processes: list[subprocess.Popen] | None = None) -> list[Read]:
    """GET `block` from every host at once (or finish the GETs `launch` started); each read must succeed with
    exactly the block's bytes."""
    reads = []
    for host, (rc, out) in zip(hosts, in_hosts(bed, hosts, *get_args(block), processes=processes), strict=True):
        assert rc == 0, f"{host}: {out}"
        lines = out.strip().splitlines()  # "block …", "  chunk I: STATUS …" per chunk, the bytes in hex
        statuses = tuple(line.split()[2] for line in lines if line.strip().startswith("chunk "))
        read = Read(host, statuses, bytes.fromhex(lines[-1].strip()), out)
        assert read.data == block.data, f"{host} read a wrong value: {out}"
        assert len(statuses) == block.chunks, out
        reads.append(read)
    return reads


def stat(bed: Testbed, block: Block) -> list[int]:
    """GETs the storage node received, per chunk (asked over the management link, so not counted as a GET)."""
    with KVPClient(ClientOptions(server=bed.storage_address, timeout=0.5, retries=2)) as client:
        return [client.stat(block.prefix_hash, i) for i in range(block.chunks)]


def ctl(bed: Testbed, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The operator CLI of s1's controller, as a person would run it (`--api` after the command)."""
    done = subprocess.run([sys.executable, "-m", "controller", *args, "--api", bed.api_address(1)],
                          capture_output=True, text=True, cwd=REPO, env=ENV, timeout=30)
    if check:
        assert done.returncode == 0, f"controller {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def ctl_json(bed: Testbed, *args: str):
    return json.loads(ctl(bed, *args, "--json").stdout)


def resident(bed: Testbed) -> dict[str, dict]:
    """`ls --json` by key: what the switch pool holds."""
    return {row["key"]: row for row in ctl_json(bed, "ls")}


def within(probe: Callable[[], object], timeout: float, pause: float = 0.2):
    """Call `probe` until it returns something true or `timeout` s passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(pause)


def eventually(what: str, probe: Callable[[], object], timeout: float = WAIT, pause: float = 0.2):
    """`within`, failing the test (naming `what`) when the probe never returned something true."""
    value = within(probe, timeout, pause)
    if not value:
        pytest.fail(f"{what}: not within {timeout:.0f} s (last: {value!r})")
    return value


def read_until_from_switch(bed: Testbed, block: Block, hosts: tuple[str, ...] = ("h1",)) -> list[list[Read]]:
    """GET (every read checked) until a whole round is served by the switch; the rounds it took."""
    rounds: list[list[Read]] = []

    def served() -> bool:
        rounds.append(get(bed, block, hosts))
        return all(r.from_switch for r in rounds[-1])

    eventually(f"GETs of {block.prefix_hash:#x} served by the switch", served, pause=0.3)
    return rounds


def make_hot(bed: Testbed, block: Block) -> list[list[Read]]:
    """Every host GETs the block at once until the switch serves all of them; the rounds it took."""
    return read_until_from_switch(bed, block, HOSTS)


# ---- the module's testbed and blocks -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bed(module_testbed) -> Testbed:
    return module_testbed(target="soft", hosts=len(HOSTS))


@pytest.fixture(scope="module")
def hot_block(bed) -> Block:
    """A two-chunk block written once by h1; case 1 makes it hot, case 4 expects it back after a switch restart."""
    block = Block(0x5EED_0001, b"hot-prefix-kv " * 15)  # 210 bytes: 2 chunks
    put(bed, "h1", block)
    return block


# ---- the cases -----------------------------------------------------------------------------------------------

def test_hot_block_is_admitted_after_its_digest_and_then_served_by_the_switch(bed, hot_block):
    assert stat(bed, hot_block) == [0, 0]
    first = get(bed, hot_block, HOSTS)  # three concurrent misses: the sketch passes the hot threshold (3)
    assert all(s == "HIT_SERVER" for r in first for s in r.statuses), [r.output for r in first]

    def admitted() -> bool:
        rows = resident(bed)
        return all(key in rows and rows[key]["slot"] is not None for key in hot_block.keys)

    # a sketch epoch (10 s) beginning mid-round resets the count: then another round of misses, as long as a
    # loaded machine needs (the controller's admission can take seconds), within a bound no load reaches
    deadline = time.monotonic() + 2 * WAIT
    while not within(admitted, 3.0):
        if time.monotonic() > deadline:
            pytest.fail(f"the hot block was not admitted after its digest: {ctl_json(bed, 'log')}")
        get(bed, hot_block, HOSTS)
    admissions = {d["key"]: d["reason"] for d in ctl_json(bed, "log", "--limit", "200") if d["action"] == "admit"}
    assert all("hot digest" in admissions.get(key, "") for key in hot_block.keys), admissions
    assert ctl_json(bed, "stats")["digests"] >= 1
    make_hot(bed, hot_block)  # the first read after admission may still fill the slot from the storage reply

    before = stat(bed, hot_block)
    # every chunk's misses reached the storage node; how many GETs that took depends on timing: concurrent misses
    # of one chunk share one GET when they overlap (request coalescing), which a loaded machine makes likelier
    assert all(n >= 1 for n in before), before
    for _ in range(2):
        assert all(r.from_switch for r in get(bed, hot_block, HOSTS))
    assert stat(bed, hot_block) == before  # six block reads later, the storage node saw none of them
    shown = ctl_json(bed, "show", hot_block.keys[0])
    assert shown["slot"] is not None and "SWITCH" in shown["tiers"], shown
    eventually("switch hits counted by the controller", lambda: ctl_json(bed, "show", hot_block.keys[0])["hits"] > 0)


def test_pin_unpin_and_evict_through_the_cli_change_what_the_switch_serves(bed):
    block = Block(0x5EED_0002, b"pinned-system-prompt")
    [key] = block.keys
    put(bed, "h2", block)
    assert key not in resident(bed)

    pinned = ctl(bed, "pin", key)
    assert "pinned" in pinned.stdout and "hard" in pinned.stdout, pinned.stdout
    row = resident(bed)[key]
    assert row["pin"] == "hard" and row["slot"] is not None, row
    read_until_from_switch(bed, block)  # admitted without a digest; the storage reply fills the slot

    refused = ctl(bed, "evict", key, check=False)
    assert refused.returncode == 1 and "pinned" in refused.stderr and "unpin" in refused.stderr, refused
    assert key in resident(bed)
    assert get(bed, block, ("h3",))[0].from_switch

    assert "unpinned" in ctl(bed, "unpin", key).stdout
    assert resident(bed)[key]["pin"] is None
    assert ctl(bed, "unpin", key, check=False).returncode == 1  # nothing left to unpin: an error, not a crash
    evicted = ctl_json(bed, "evict", key)
    assert evicted["key"] == key and evicted["slot"] == row["slot"], evicted
    assert key not in resident(bed)

    storage_gets = stat(bed, block)[0]
    [after] = get(bed, block, ("h2",))
    assert after.statuses == ("HIT_SERVER",), after.output  # bytes checked in get()
    assert stat(bed, block)[0] == storage_gets + 1

    make_hot(bed, block)  # hot again → digest → re-admitted
    assert resident(bed)[key]["slot"] is not None


def test_restarted_controller_keeps_pins_and_entries_and_never_serves_a_stale_value(bed):
    pinned = Block(0x5EED_0003, b"pinned-across-restart")
    cached = Block(0x5EED_0004, b"cached-version-one")
    for block in (pinned, cached):
        put(bed, "h1", block)
        ctl(bed, "pin", block.keys[0])
    ctl(bed, "unpin", cached.keys[0])  # resident, not pinned
    for block in (pinned, cached):
        read_until_from_switch(bed, block)
    before = resident(bed)

    status = bed.kill("controller s1")
    assert status == -9
    # the data plane keeps serving without its controller; a PUT invalidates the cached copy on the way
    assert get(bed, pinned, ("h2",))[0].from_switch
    newer = Block(cached.prefix_hash, b"cached-version-two!", version=2)
    put(bed, "h2", newer)
    get(bed, newer, ("h3",))  # the new bytes, never version one's

    bed.restart("controller s1")  # its API opens after it reconciled with the switch
    report = ctl_json(bed, "status")["last_reconcile"]
    assert report["pins"] >= 1 and report["kept"] >= 2 and report["dropped"] == 0, report
    after = resident(bed)
    assert after[pinned.keys[0]]["pin"] == "hard"
    for key in (pinned.keys[0], cached.keys[0]):
        assert after[key]["slot"] == before[key]["slot"], (before[key], after[key])
    assert get(bed, pinned, HOSTS)[0].from_switch
    read_until_from_switch(bed, newer, ("h1", "h3"))  # refilled with version two, every read checked
    refused = ctl(bed, "evict", pinned.keys[0], check=False)  # the restored pin still protects it
    assert refused.returncode == 1 and "pinned" in refused.stderr, refused


def test_restarted_switch_is_repopulated_by_the_controller(bed, hot_block):
    make_hot(bed, hot_block)  # (again, if the first case did not run)
    connections = ctl_json(bed, "status")["connections"]

    assert bed.kill("switch s1") == -9
    bed.restart("switch s1")

    def repopulated() -> dict | None:
        status = ctl_json(bed, "status")
        done = status["connections"] > connections and status["last_reconcile"].get("reinstalled", 0) > 0
        return status if done else None

    status = eventually("the controller's reconnect to the restarted switch and its resync", repopulated)
    assert status["primary"] and status["last_reconcile"]["reinstalled"] >= hot_block.chunks, status
    assert "1 received" in bed.net["h3"].cmd("ping -c1 -W1 10.0.0.1")  # routes are back (h3 → h1)
    read_until_from_switch(bed, hot_block, HOSTS)  # index re-installed; a storage reply (or SLOT_WRITE) refills
    assert all(resident(bed)[key]["slot"] is not None for key in hot_block.keys)


def test_controller_stopped_with_sigterm_while_serving_exits_cleanly_and_comes_back(bed, hot_block):
    make_hot(bed, hot_block)
    log = Path(bed.process("controller s1").log)
    start = log.stat().st_size
    reads = launch(bed, HOSTS, *get_args(hot_block))  # the data plane serves these with or without a controller
    assert bed.kill("controller s1", signal.SIGTERM) == 0
    assert all(r.from_switch for r in get(bed, hot_block, HOSTS, processes=reads))
    with log.open("rb") as text:
        text.seek(start)
        tail = text.read().decode(errors="replace")
    assert "Traceback" not in tail and "closed channel" not in tail, tail

    bed.restart("controller s1")
    assert ctl_json(bed, "status")["last_reconcile"]["kept"] >= hot_block.chunks
    assert all(r.from_switch for r in get(bed, hot_block, HOSTS))


def test_controller_stopped_while_repopulating_a_restarted_switch_exits_without_a_traceback(bed, hot_block):
    log = Path(bed.process("controller s1").log)
    start = log.stat().st_size

    def since_start() -> str:
        with log.open("rb") as text:
            text.seek(start)
            return text.read().decode(errors="replace")

    bed.kill("switch s1")
    bed.restart("switch s1")
    eventually("the controller installing its pipeline on the restarted switch",
               lambda: "installing ours" in since_start(), pause=0.005)
    assert bed.kill("controller s1", signal.SIGTERM) == 0  # most often while its SetForwardingPipelineConfig runs
    assert "Traceback" not in since_start(), since_start()

    bed.restart("controller s1")  # a fresh controller finishes the job: pipeline, routes, index entries
    read_until_from_switch(bed, hot_block, HOSTS)


INSERT_WITH_VALUE = ("import sys; from kvpool.client import ClientOptions, KVPClient; "
                     "c = KVPClient(ClientOptions(server=('10.0.0.100', 7420), timeout=1)); "
                     "print(c.insert(int(sys.argv[1], 0), value=sys.argv[2].encode(), version=int(sys.argv[3])))")
"""INSERT carrying the chunk's value (the CLI's `insert` sends none): the controller keeps it for SLOT_WRITE."""


def insert_with_value(bed: Testbed, host: str, block: Block) -> None:
    assert block.chunks == 1
    out = bed.net[host].cmd(" ".join([sys.executable, "-c", f'"{INSERT_WITH_VALUE}"', hex(block.prefix_hash),
                                      block.data.decode(), str(block.version), "; echo rc=$?"]))
    assert "rc=0" in out and "OK" in out, out


def test_restarted_switch_never_serves_a_value_older_than_the_last_put(bed):
    """A value an INSERT carried is used only while that INSERT is handled: re-populating a restarted switch
    leaves the fill to the storage node's reply, so a PUT since then wins although the restarted switch forgot
    the PUT versions it saw."""
    old = Block(0x5EED_0006, b"announced-value-v1")
    put(bed, "h1", old)
    ctl(bed, "pin", old.keys[0])
    insert_with_value(bed, "h1", old)
    read_until_from_switch(bed, old)
    new = Block(old.prefix_hash, b"written-later-v2", version=2)
    put(bed, "h2", new)
    read_until_from_switch(bed, new)  # the PUT invalidated v1 in the switch; v2 refilled from the storage node

    connections = ctl_json(bed, "status")["connections"]
    bed.kill("switch s1")
    bed.restart("switch s1")
    eventually("the controller's resync of the restarted switch",
               lambda: ctl_json(bed, "status")["connections"] > connections
               and ctl_json(bed, "status")["last_reconcile"].get("reinstalled", 0) > 0)
    read_until_from_switch(bed, new, HOSTS)  # get() fails on version one's bytes
