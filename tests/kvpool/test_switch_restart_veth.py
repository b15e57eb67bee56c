"""Process level on veth: reads with the client's defaults survive a switch restart (docs/protocol.md, *Transport*).

The bed is `bench.incast.Bed` (client and storage node in their own namespaces, the softswitch PROCESS between
them on veth pairs at MTU 1500, so blocks are in the default 1 KiB chunks; routes, the storage port's role and
coalescing configured as the controller does). Readers in the client namespace (`bench._restart_readers`,
one process each) read blocks of a few MiB; once every reader has had some replies, the readers themselves
SIGKILL the switch process, so the kill lands mid-read however loaded the machine is. The test waits for it to
end, waits RESTART_PAUSE_S more, starts the same program on the same veths and the same P4Runtime address,
installs the same routes, port role, multicast groups and coalescing configuration, and asserts that every read
completes with its verified bytes, and that each read was mid-way when the switch died (fewer replies than
chunks) and finished only after the new switch was launched (the read spanned the outage; clocks are
CLOCK_MONOTONIC, shared by every namespace). Nothing is timed: `give_up` is raised far above any restart time a loaded machine could
need, so only correctness decides.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from kvtesting.vethnet import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and veth pairs need root")]

RESTART_PAUSE_S = 5.0
"""Seconds between the switch's death and its restart."""
BLOCK_BYTES = 4 << 20
"""4 MiB: 4,096 chunks of 1 KiB, so the reads are far from done when the kill fires."""
KILL_AFTER = 200
"""Replies every reader has had when the switch is killed (about 5% of a block)."""
GIVE_UP_S = 600.0
"""The readers' `give_up`: the only option not left at its default, so that a switch that takes long to come
back up on a loaded machine cannot fail the test (the default 30 s is the bound a user gets)."""
PHS = (0x5E57_A000, 0x5E57_A001)
READERS = 3
"""Readers 0 and 2 read the first block (coalescing may join their GETs), reader 1 the second."""


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    from bench.incast import Bed

    with Bed(tmp_path_factory.mktemp("switch-restart"), tag="rsr") as bed:
        bed.set_mtu(1500)
        bed.coalescing(True)
        yield bed


def switch_process(bed):
    """The bed's softswitch `Process` (the one `VethNet` started, or the restart that replaced it)."""
    (process,) = [p for p in bed.net.processes if p.name == "switch"]
    return process


def restart_switch(bed, old) -> None:
    """Start the program `old` ran, with its arguments (same veths, ports and P4Runtime address), and configure
    what the data path needs, as `VethNet.start` and `Bed.__enter__` did the first time."""
    from controller.coalescing import group_layouts
    from kvtesting.vethnet import Process, ShellSwitch

    net = bed.net
    old.stop()
    if net.switch is not None:
        with contextlib.suppress(Exception):  # its peer is gone
            net.switch.close()
        net.switch = None
    process = Process("switch", old.popen.args, net.workdir / "switch-restarted.log")
    net.processes[net.processes.index(old)] = process
    process.wait_for_line("softswitch: device", net.options.start_timeout)
    net.switch = ShellSwitch(net.grpc_address, net.options.device_id)
    for host in net.hosts:
        net.switch.route(host)
    net.switch.port_role(net.options.storage.port, "STORAGE")
    sh = net.switch.sh
    for group_id, layout in group_layouts(bed.options(), [h.port for h in net.hosts]).items():
        group = sh.MulticastGroupEntry(group_id)
        for port, rid in layout:
            group.add(port, rid)
        group.insert()
    bed.coalescing(True)


def test_reads_with_client_defaults_survive_a_sigkilled_switch_restarted_after_5_s(bed):
    from kvpool.blocks import chunk_len_for_mtu

    chunk = chunk_len_for_mtu(1500)
    for ph in PHS:
        bed.agent("storage", "--agent", "write", "--ph", str(ph), "--size", str(BLOCK_BYTES),
                  "--seed", str(ph & 0xFFFF), "--chunk", str(chunk))
    switch = switch_process(bed)
    readers = subprocess.Popen(
        ["ip", "netns", "exec", bed.net.netns(bed.net.options.client), sys.executable, "-m",
         "bench._restart_readers", "--server", bed.net.options.storage.ip, "--readers", str(READERS),
         "--phs", ",".join(map(str, PHS)), "--size", str(BLOCK_BYTES), "--kill-pid", str(switch.popen.pid),
         "--kill-after", str(KILL_AFTER), "--give-up", str(GIVE_UP_S)],
        cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        while switch.popen.poll() is None:
            assert readers.poll() is None, f"the readers ended before the switch was killed: {readers.stderr.read()}"
            time.sleep(0.05)
        died = time.monotonic()
        assert switch.popen.returncode == -9, "the readers' SIGKILL ended the switch"
        time.sleep(RESTART_PAUSE_S)
        relaunched = time.monotonic()
        restart_switch(bed, switch)
        restarted = time.monotonic()
        out, err = readers.communicate(timeout=GIVE_UP_S + 300)
    finally:
        if readers.poll() is None:
            readers.kill()
            readers.wait()
    assert readers.returncode == 0, err[-3000:]
    got = json.loads(out.strip().splitlines()[-1])
    print(f"\nswitch down {restarted - died:.1f} s (from its death to the end of the restart's configuration; "
          f"{RESTART_PAUSE_S:g} s of it the pause)")
    for r in got:
        print(f"reader {r['i']}: {r['chunks'] if r['time'] else '-'} chunks in "
              f"{r['time'] if r['time'] is None else round(r['time'], 2)} s, verified {r['verified']}, "
              f"killed at {r['killed_at_s'] and round(r['killed_at_s'], 2)} s after {r['replies_at_kill']} replies, "
              f"longest silence {r['longest_silence_s']:.2f} s, sent {r['sent']}, resent {r['resent']}")
    assert len(got) == READERS
    assert [r["error"] for r in got if r["error"]] == [], "0 failed reads"
    assert all(r["verified"] for r in got), "every read returned the block's bytes"
    assert all(r["chunks"] == BLOCK_BYTES // chunk for r in got)
    for r in got:
        assert r["replies_at_kill"] is not None and KILL_AFTER <= r["replies_at_kill"] < r["chunks"], \
            f"reader {r['i']} was mid-read when the switch died"
        assert r["finished_monotonic"] > relaunched, \
            f"reader {r['i']} finished only once the switch was back: its read spanned the outage"
