"""The real controller (`python -m controller serve`) against a bench bed's switch, and its CPU seconds.

A benchmark that wants the control plane's cost under its rows runs the controller as an operator would: its own
process, a host plan naming every port of the bed (routes, and which port is the storage node's), the pipeline
the bed compiled, a fresh SQLite state file. The controller takes a higher election id than the bed's
p4runtime-shell session, so it becomes the switch's primary: it installs its pipeline (a switch started from a
device config carries no cookie of ours, so this wipes what the bed wrote), the routes, the port roles and request
coalescing with its multicast group, exactly as in `make run`. The bed's own session stays connected as a backup
and may still read counters; it may write again once the controller stopped.

CPU seconds come from `/proc/<pid>/stat` (user + system time of every thread of the process), so a row's cost is
the difference of two samples around it, whatever else runs on the machine. Underscore: a helper of benchmarks, not one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kvtesting.vethnet import ROOT, Host

ELECTION_ID = 10
"""Above the bed's p4runtime-shell session (election id 1): the controller is the primary while it runs."""
READY_LINE = " controller: serving "
"""The controller logs `controller: serving <switch>; API on ...` once connected and reconciled."""


@dataclass(frozen=True)
class ControllerSetup:
    """What the controller is started with."""

    switch: str
    """P4Runtime address of the bed's switch, HOST:PORT."""
    p4info: Path
    device_config: Path
    hosts: tuple[Host, ...]
    storage_ports: tuple[int, ...]
    """Switch ports whose replies may fill the pool and end coalescing entries (role STORAGE)."""
    coalesce_timeout_ms: float | None = None
    """None: the controller's default; 0: coalescing off."""
    extra_args: tuple[str, ...] = ()
    """More `serve` options (e.g. what a later data-plane feature adds)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat(5)


class RunningController:
    """One controller process; `cpu_s()` its CPU seconds so far; `stop()` by its id."""

    def __init__(self, setup: ControllerSetup, workdir: Path, start_timeout: float = 120.0) -> None:
        self.setup = setup
        workdir.mkdir(parents=True, exist_ok=True)
        plan = {"hosts": [{"name": f"{h.role}", "ip": h.ip, "mac": h.mac, "port": h.port,
                           "role": "storage" if h.port in setup.storage_ports else "inference"} for h in setup.hosts],
                "ports": [{"port": h.port, "role": "storage" if h.port in setup.storage_ports else "host"}
                          for h in setup.hosts]}
        hosts_file = workdir / "hosts.json"
        hosts_file.write_text(json.dumps(plan, indent=1))
        state = workdir / "controller-state.sqlite"
        state.unlink(missing_ok=True)
        args = [sys.executable, "-m", "controller", "serve", "--switch", setup.switch, "--election-id",
                str(ELECTION_ID), "--p4info", str(setup.p4info), "--device-config", str(setup.device_config),
                "--state", str(state), "--hosts-file", str(hosts_file), "--api", "127.0.0.1:0"]
        if setup.coalesce_timeout_ms is not None:
            args += ["--coalesce-timeout-ms", f"{setup.coalesce_timeout_ms:g}"]
        args += list(setup.extra_args)
        self.log_path = workdir / "controller.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(args, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        try:
            self._wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise
        self.started_cpu_s = self.cpu_s()
        """CPU seconds spent starting (imports, pipeline, reconcile): not part of any row."""

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if READY_LINE in self.log_path.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"controller exited with {self.process.returncode}:\n{self.tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"controller not serving after {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def cpu_s(self) -> float:
        return cpu_seconds(self.process.pid)

    def stop(self, grace: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
