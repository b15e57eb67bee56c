"""Process level on veth: reads with the client's defaults survive a switch restart (docs/protocol.md, *Transport*).

Two kinds of case. In the first, the test itself reconfigures the restarted softswitch as `bench._incast_bed.Bed`
configured the first one. In the others the CONTROLLER process (`python -m controller serve`, from a hosts.json)
configures the switch and, after the restart, must notice the empty switch and install everything again on its
own (pipeline, routes, port roles, coalescing groups and configuration: controller/service.py's reconnection);
those run on the softswitch process and on BMv2 (`simple_switch_grpc`), both started empty (`--no-p4`) so the
controller pushes the pipeline after the restart as well.

The first case's bed is `bench._incast_bed.Bed` (client and storage node in their own namespaces, the softswitch
PROCESS between them on veth pairs at MTU 1500, so blocks are in the default 1 KiB chunks; routes, the storage
port's role and coalescing configured as the controller does). Readers in the client namespace
(`bench._restart_readers`, one process each) read blocks of a few MiB; once every reader has had some replies,
the readers themselves SIGKILL the switch process, so the kill lands mid-read however loaded the machine is. The
test waits for it to end, waits RESTART_PAUSE_S more, starts the same program on the same veths and the same
P4Runtime address, installs the same routes, port role, multicast groups and coalescing configuration, and
asserts that every read completes with its verified bytes, and that each read was mid-way when the switch died
(fewer replies than chunks) and finished only after the new switch was launched (the read spanned the outage;
clocks are CLOCK_MONOTONIC, shared by every namespace). Nothing is timed: `give_up` is raised far above any
restart time a loaded machine could need, so only correctness decides.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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


@pytest.fixture
def bed(tmp_path_factory):
    from bench._incast_bed import Bed

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


# ---- the controller reinstalls the restarted switch: softswitch and BMv2 -----------------------------------

CONTROLLER_READY_S = 120.0
"""Seconds the controller may take to connect and configure the switch (a loaded machine compiles slowly)."""


class ControlledBed:
    """`kvtesting.vethnet.VethNet`'s namespaces, veths and storage node, with the switch replaced by one of
    `kind` (`softswitch` or `bmv2`, started empty with `--no-p4`) that only the controller process configures,
    from a hosts.json naming the client and the storage node (role `storage`)."""

    def __init__(self, workdir: Path, kind: str, tag: str) -> None:
        from kvtesting.vethnet import VethNet, VethNetOptions

        self.workdir = workdir
        self.kind = kind
        self.net = VethNet(VethNetOptions(tag=tag, storage_args=("--capacity", str(1 << 30))), workdir)
        self.switch = None
        self.controller = None

    def __enter__(self) -> ControlledBed:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        from kvtesting.switch_process import BMV2, compile_program
        from kvtesting.vethnet import PROGRAM, Process

        net = self.net
        net.start()  # namespaces, veths, storage node (and a configured softswitch, replaced below)
        net.switch.close()  # type: ignore[union-attr]
        net.switch = None
        (first,) = [p for p in net.processes if p.name == "switch"]
        first.stop()
        net.processes.remove(first)
        if self.kind == "bmv2":
            compiled = compile_program(BMV2, PROGRAM, self.workdir / "bmv2")
            p4info, device_config = compiled.p4info, compiled.device_config
            command = ["simple_switch_grpc", "--no-p4"]
        else:
            p4info = self.workdir / "build" / f"{PROGRAM.stem}.p4info.txtpb"
            device_config = self.workdir / "build" / f"{PROGRAM.stem}.json"
            command = [sys.executable, "-m", "softswitch", "--no-p4"]
        for host in net.hosts:
            command += ["-i", f"{host.port}@{net.switch_if(host)}"]
        command += ["--device-id", str(net.options.device_id), "--", "--grpc-server-addr", net.grpc_address,
                    "--cpu-port", str(net.options.cpu_port)]
        self.switch = Process("switch", command, self.workdir / "switch.log")
        plan = {"hosts": [{"name": h.role, "ip": h.ip, "mac": h.mac, "port": h.port,
                           "role": "storage" if h is net.options.storage else "inference"} for h in net.hosts]}
        hosts_file = self.workdir / "hosts.json"
        hosts_file.write_text(json.dumps(plan))
        self.controller = Process("controller", [
            sys.executable, "-m", "controller", "serve", "--switch", net.grpc_address,
            "--device-id", str(net.options.device_id), "--p4info", str(p4info), "--device-config",
            str(device_config), "--state", str(self.workdir / "controller.sqlite"), "--hosts-file",
            str(hosts_file), "--api", "127.0.0.1:0"], self.workdir / "controller.log")
        self.wait_configured(1)

    def configured(self) -> int:
        """How many times the controller has configured request coalescing: once per (re)connection."""
        assert self.controller is not None
        text = self.controller.log.read_text(errors="replace")
        return text.count("request coalescing on on ports")

    def wait_configured(self, times: int) -> None:
        """Until the controller has configured the switch `times` times (VethNetError-like failure otherwise)."""
        assert self.controller is not None and self.switch is not None
        deadline = time.monotonic() + CONTROLLER_READY_S
        while self.configured() < times:
            assert self.controller.popen.poll() is None, f"the controller exited:\n{self.controller.tail(30)}"
            assert time.monotonic() < deadline, \
                f"the controller did not configure the switch:\n{self.controller.tail(30)}\n{self.switch.tail()}"
            time.sleep(0.1)

    def restart_switch(self) -> None:
        """Start the same switch command again (same veths, P4Runtime address): empty, as after a power cycle."""
        from kvtesting.vethnet import Process

        assert self.switch is not None
        old = self.switch
        old.stop()
        self.switch = Process("switch", old.popen.args, self.workdir / "switch-restarted.log")

    def close(self) -> None:
        for process in (self.controller, self.switch):
            if process is not None:
                process.stop()
        self.controller = self.switch = None
        self.net.close()


@pytest.fixture(params=["softswitch", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def controlled_bed(request, tmp_path_factory):
    import shutil

    if request.param == "bmv2":
        missing = [tool for tool in ("p4c", "simple_switch_grpc") if shutil.which(tool) is None]
        if missing:
            pytest.skip(f"BMv2 needs {' and '.join(missing)} on PATH")
    tag = {"softswitch": "rcs", "bmv2": "rcb"}[request.param]
    with ControlledBed(tmp_path_factory.mktemp(f"restart-{request.param}"), request.param, tag) as bed:
        yield bed


def test_reads_survive_a_switch_restart_that_the_controller_reinstalls(controlled_bed):
    from kvpool.blocks import chunk_len_for_mtu

    bed = controlled_bed
    net = bed.net
    chunk = chunk_len_for_mtu(1500)
    for ph in PHS:
        subprocess.run(["ip", "netns", "exec", net.netns(net.options.storage), sys.executable, "-m",
                        "bench.incast", "--server", net.options.storage.ip, "--agent", "write", "--ph", str(ph),
                        "--size", str(BLOCK_BYTES), "--seed", str(ph & 0xFFFF), "--chunk", str(chunk)],
                       cwd=ROOT, check=True, capture_output=True, timeout=600)
    switch = bed.switch
    readers = subprocess.Popen(
        ["ip", "netns", "exec", net.netns(net.options.client), sys.executable, "-m",
         "bench._restart_readers", "--server", net.options.storage.ip, "--readers", str(READERS),
         "--phs", ",".join(map(str, PHS)), "--size", str(BLOCK_BYTES), "--kill-pid", str(switch.popen.pid),
         "--kill-after", str(KILL_AFTER), "--give-up", str(GIVE_UP_S)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while switch.popen.poll() is None:
            assert readers.poll() is None, f"the readers ended before the switch was killed: {readers.stderr.read()}"
            time.sleep(0.05)
        died = time.monotonic()
        assert switch.popen.returncode == -9, "the readers' SIGKILL ended the switch"
        time.sleep(RESTART_PAUSE_S)
        relaunched = time.monotonic()
        bed.restart_switch()
        bed.wait_configured(2)
        reinstalled = time.monotonic()
        out, err = readers.communicate(timeout=GIVE_UP_S + 300)
    finally:
        if readers.poll() is None:
            readers.kill()
            readers.wait()
    assert readers.returncode == 0, err[-3000:]
    got = json.loads(out.strip().splitlines()[-1])
    log = bed.controller.log.read_text(errors="replace")
    print(f"\n{bed.kind}: switch down {reinstalled - died:.1f} s (from its death until the controller had "
          f"configured the new one; {RESTART_PAUSE_S:g} s of it the pause)")
    for r in got:
        print(f"reader {r['i']}: {r['chunks'] if r['time'] else '-'} chunks in "
              f"{r['time'] if r['time'] is None else round(r['time'], 2)} s, verified {r['verified']}, "
              f"after {r['replies_at_kill']} replies at the kill, longest silence {r['longest_silence_s']:.2f} s, "
              f"sent {r['sent']}, resent {r['resent']}")
    assert "switch reconnected (new pipeline)" in log, "the controller saw an empty switch and installed it again"
    assert len(got) == READERS
    assert [r["error"] for r in got if r["error"]] == [], "0 failed reads"
    assert all(r["verified"] for r in got), "every read returned the block's bytes"
    assert all(r["chunks"] == BLOCK_BYTES // chunk for r in got)
    for r in got:
        assert r["replies_at_kill"] is not None and KILL_AFTER <= r["replies_at_kill"] < r["chunks"], \
            f"reader {r['i']} was mid-read when the switch died"
        assert r["finished_monotonic"] > relaunched, \
            f"reader {r['i']} finished only once the switch was back: its read spanned the outage"
