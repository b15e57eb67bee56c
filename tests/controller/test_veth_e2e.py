"""End to end through real interfaces: client and storage node in their own network namespaces, the embedded
switch process on veth ports, the controller process over P4Runtime. A GET turns hot, the controller admits
it, the storage node's next reply fills the slot and the switch answers the one after (HIT_SWITCH).

Interface and namespace names all start with `ctlp` (this test's prefix on a shared machine). Root, slow.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvtesting.inprocess import compile_program

ROOT = Path(__file__).resolve().parents[2]
EXPECT_S = 60.0
"""Longest wait for what a correct testbed does (an admission, a fill, a counter poll): reached only when it
never happens, so a loaded machine cannot make the test fail."""
CLIENT_NS, STORAGE_NS = "ctlpc", "ctlps"
CLIENT_MAC, STORAGE_MAC = "02:00:0a:00:00:01", "02:00:0a:00:00:64"

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for veth pairs and network namespaces")]


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def network():
    """ctlp1 (switch port 1) ↔ ctlp1h in ns ctlpc (10.0.0.1); ctlp2 (port 2) ↔ ctlp2h in ns ctlps (10.0.0.100)."""
    def teardown() -> None:
        for ns in (CLIENT_NS, STORAGE_NS):
            sh("ip", "netns", "del", ns, check=False)
        for link in ("ctlp1", "ctlp2"):
            sh("ip", "link", "del", link, check=False)

    teardown()
    for ns in (CLIENT_NS, STORAGE_NS):
        sh("ip", "netns", "add", ns)
    for index, ns, ip, mac, peer_ip, peer_mac in ((1, CLIENT_NS, "10.0.0.1", CLIENT_MAC, "10.0.0.100", STORAGE_MAC),
                                                  (2, STORAGE_NS, "10.0.0.100", STORAGE_MAC, "10.0.0.1", CLIENT_MAC)):
        sh("ip", "link", "add", f"ctlp{index}", "type", "veth", "peer", "name", f"ctlp{index}h")
        sh("ip", "link", "set", f"ctlp{index}h", "netns", ns)
        sh("ip", "link", "set", f"ctlp{index}", "up")
        sh("ethtool", "-K", f"ctlp{index}", "tx", "off", "rx", "off", check=False)
        run_ns = ("ip", "netns", "exec", ns)
        sh(*run_ns, "ip", "link", "set", f"ctlp{index}h", "address", mac)
        sh(*run_ns, "ip", "addr", "add", f"{ip}/24", "dev", f"ctlp{index}h")
        sh(*run_ns, "ip", "link", "set", f"ctlp{index}h", "up")
        sh(*run_ns, "ip", "link", "set", "lo", "up")
        sh(*run_ns, "ethtool", "-K", f"ctlp{index}h", "tx", "off", "rx", "off", check=False)
        sh(*run_ns, "ip", "neigh", "replace", peer_ip, "lladdr", peer_mac, "dev", f"ctlp{index}h")  # no ARP via P4
    yield
    teardown()


class Processes:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.running: list[subprocess.Popen] = []

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.running.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.running):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def client(*argv: str) -> str:
    result = sh("ip", "netns", "exec", CLIENT_NS, sys.executable, "-m", "kvpool.client",
                "--server", "10.0.0.100:7420", "--tenant", "1", *argv)
    return result.stdout


def controller_cli(api: str, *argv: str) -> str:
    return sh(sys.executable, "-m", "controller", "--api", api, *argv).stdout


def wait_for(predicate, timeout: float, what: str, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (subprocess.CalledProcessError, OSError):
            pass
        time.sleep(0.2)
    found = {p.name: p.read_text()[-1500:] for p in logs.glob("*.log")}
    raise AssertionError(f"timed out waiting for {what}; logs: {json.dumps(found, indent=1)}")


def test_hot_block_ends_up_answered_by_the_switch(network, tmp_path):
    p4info, config = compile_program(tmp_path)
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps({"hosts": [
        {"name": "h1", "ip": "10.0.0.1", "mac": CLIENT_MAC, "port": 1},
        {"name": "st1", "ip": "10.0.0.100", "mac": STORAGE_MAC, "port": 2, "role": "storage"}]}))
    grpc, api = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    procs = Processes(tmp_path)
    try:
        procs.start("switch", [sys.executable, "-m", "softswitch", "--no-p4", "-i", "1@ctlp1", "-i", "2@ctlp2",
                               "--", "--grpc-server-addr", grpc, "--cpu-port", "255"])
        procs.start("storage", ["ip", "netns", "exec", STORAGE_NS, sys.executable, "-m", "kvpool.server",
                                "--host", "10.0.0.100", "--port", "7420"])
        procs.start("controller", [sys.executable, "-m", "controller", "serve", "--switch", grpc, "--p4info",
                                   str(p4info), "--device-config", str(config), "--state",
                                   str(tmp_path / "state.sqlite"), "--api", api, "--hosts-file", str(hosts),
                                   "--hot-threshold", "3", "--epoch-seconds", "3600"])
        wait_for(lambda: '"primary": true' in controller_cli(api, "--json", "status"), 90, "the controller", tmp_path)
        wait_for(lambda: "stored" in client("put", "0x1234", "--version", "1", "--data", "kv block"), 30,
                 "a PUT through the switch", tmp_path)
        for _ in range(3):
            assert "HIT_SERVER" in client("get", "0x1234", "--chunks", "1")
        wait_for(lambda: json.loads(controller_cli(api, "ls", "--json")), EXPECT_S, "the hot key's admission",
                 tmp_path)
        # the index entry reaches the switch and a miss fills the slot, however long a loaded machine takes:
        # GETs go on until one is a switch hit (each one correct), within a bound no load reaches
        statuses: list[str] = []
        deadline = time.monotonic() + EXPECT_S
        while not statuses or ("HIT_SWITCH" not in statuses[-1] and time.monotonic() < deadline):
            statuses.append(client("get", "0x1234", "--chunks", "1"))
            assert bytes.fromhex(statuses[-1].strip().splitlines()[-1]) == b"kv block", statuses
        assert "HIT_SWITCH" in statuses[-1], statuses
        assert bytes.fromhex(statuses[-1].strip().splitlines()[-1]) == b"kv block"
        assert "SWITCH" in client("lookup", "0x1234")
        rows = json.loads(controller_cli(api, "ls", "--json"))
        assert rows[0]["prefix_hash"] == "0000000000001234"
        wait_for(lambda: json.loads(controller_cli(api, "ls", "--json"))[0]["hits"] >= 1, EXPECT_S,
                 "the slot's hit counter", tmp_path)
    finally:
        procs.stop()
