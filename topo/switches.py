"""Mininet switch classes for the testbed: our P4 target, BMv2, and a plain Linux bridge.

All run in the root namespace (as Mininet's own switches do) and attach to their `<switch>-eth<port>`
interfaces; the P4 ones serve P4Runtime on 127.0.0.1:`grpc_port`, where the controller connects.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from mininet.node import Switch

CPU_PORT = 255
"""As `CPU_PORT` in p4src/include/constants.p4 (BMv2 is started with --cpu-port 255)."""
REPO = Path(__file__).resolve().parents[1]


class TestbedError(Exception):
    """The testbed cannot start or run; the message says what is missing and how to fix it."""

    __test__ = False  # not a pytest test class, despite the name


class P4Switch(Switch):
    """A v1model switch process: `command()` names it, `start` runs it with a log, `stop` ends it by pid."""

    def __init__(self, name: str, device_id: int, grpc_port: int, device_config: Path, log_dir: Path,
                 pcap: bool = True, log_level: str = "info", **params) -> None:
        params.pop("role", None)
        super().__init__(name, dpid=f"{device_id:x}", **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.device_config = device_config
        self.folder = log_dir / name
        """`out/testbed/<switch>/`: its console log, packet log and pcaps (as p4lang/tutorials' logs/, pcaps/)."""
        self.log_path = self.folder / "switch.log"
        self.pcap_dir: Path | None = self.folder / "pcap" if pcap else None
        """`<port interface>_in.pcap` / `_out.pcap` per port, written by the switch itself."""
        self.log_level = log_level
        """The switch's -L (trace, debug, info, warn, error, off)."""
        self.process: subprocess.Popen | None = None

    def visibility(self) -> list[str]:
        """The files where this switch's packets and log go, for the banner."""
        return [str(self.log_path), *([f"{self.pcap_dir}/*.pcap"] if self.pcap_dir else [])]

    def data_ports(self) -> list[tuple[int, str]]:
        """(port number, interface name) of every data port, by port number (not the root `lo`)."""
        return sorted((self.ports[intf], intf.name) for intf in self.intfList() if intf.name != "lo")

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers) -> None:
        self._launch("wb")

    def relaunch(self) -> subprocess.Popen:
        """Start the switch process again after it ended (a crash, or a restart test): the same command line,
        the log appended to, so the earlier run's last lines stay readable."""
        if self.process is not None and self.process.poll() is None:
            raise TestbedError(f"switch {self.name} is still running (pid {self.process.pid})")
        self._launch("ab")
        assert self.process is not None
        return self.process

    def _launch(self, log_mode: str) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open(log_mode) as log:
            self.process = self.popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, cwd=str(REPO),
                                      env={**os.environ, "PYTHONPATH": str(REPO)})

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        super().stop(deleteIntfs)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class SoftP4Switch(P4Switch):
    """softswitch, the embedded pure-Python v1model target, with simple_switch_grpc's command line."""

    def command(self) -> list[str]:
        ports = [arg for port, intf in self.data_ports() for arg in ("-i", f"{port}@{intf}")]
        pcap = ["--pcap", str(self.pcap_dir)] if self.pcap_dir else []
        return [sys.executable, "-m", "softswitch", str(self.device_config), *ports,
                "--device-id", str(self.device_id), "--cpu-port", str(CPU_PORT),
                "--log-console", "-L", self.log_level, *pcap,
                "--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]


class Bmv2P4Switch(P4Switch):
    """BMv2's simple_switch_grpc with the p4c output (needs p4c's JSON, not our bundle)."""

    BINARY = "simple_switch_grpc"

    @classmethod
    def setup(cls) -> None:
        if shutil.which(cls.BINARY) is None:
            raise TestbedError(f"TARGET=bmv2 needs {cls.BINARY} on PATH (BMv2, github.com/p4lang/behavioral-model);"
                               " it is not installed here. Use TARGET=soft for the embedded target.")

    @property
    def packet_log(self) -> Path:
        """BMv2's --log-file (it appends `.txt`): the per-packet pipeline log at `log_level`."""
        return self.folder / "packets"

    def visibility(self) -> list[str]:
        return [*super().visibility(), f"{self.packet_log}.txt"]

    def command(self) -> list[str]:
        ports = [arg for port, intf in self.data_ports() for arg in ("-i", f"{port}@{intf}")]
        pcap = [f"--pcap={self.pcap_dir}"] if self.pcap_dir else []
        return [self.BINARY, "--device-id", str(self.device_id), *ports, "--log-file", str(self.packet_log),
                "-L", self.log_level, *pcap, str(self.device_config),
                "--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}", "--cpu-port", str(CPU_PORT)]


class BridgeSwitch(Switch):
    """A Linux bridge named after the switch: plain L2, no pool, no P4Runtime.

    For checking the testbed itself (hosts, storage node, client, demo) without a P4 target, and as the
    "no switch pool" baseline. Made with iproute2 (Mininet's LinuxBridge needs brctl, not installed here).
    """

    def __init__(self, name: str, **params) -> None:
        for key in ("role", "device_id", "grpc_port", "device_config", "log_dir", "pcap", "log_level"):
            params.pop(key, None)
        super().__init__(name, **params)

    def start(self, controllers) -> None:
        self.cmd(f"ip link del {self.name} 2>/dev/null; ip link add name {self.name} type bridge "
                 f"&& ip link set {self.name} type bridge stp_state 0 && ip link set {self.name} up")
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ip link set {intf.name} master {self.name} && ip link set {intf.name} up")

    def stop(self, deleteIntfs: bool = True) -> None:
        self.cmd(f"ip link del {self.name} 2>/dev/null")
        super().stop(deleteIntfs)


SWITCHES: dict[str, type[Switch]] = {"soft": SoftP4Switch, "bmv2": Bmv2P4Switch, "bridge": BridgeSwitch}
"""Switch class by `--target`."""
