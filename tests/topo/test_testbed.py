"""The Mininet testbed for real: namespaces, veth links, the storage node process, the client through a switch.

Slow and root-only. Every test stops what it started in a finalizer, whatever happens (its Testbed, then what its
testbed.json records); ports and state folders are per test so nothing collides with a testbed someone runs by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from topo.testbed import STATE_FILE, Testbed, TestbedOptions, stop_recorded

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

ADMISSION_WAIT_S = 60.0
"""How long the reads of a hot block go on before the test gives up on its admission (a second or two on a
quiet machine)."""
CLIENT = [sys.executable, "-m", "kvpool.client", "--server", "10.0.0.100", "--timeout", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def testbed(tmp_path, request):
    """testbed(target=..., hosts=...) → a started Testbed; stopped afterwards, pass or fail."""
    beds = []

    def start(**options) -> Testbed:
        bed = Testbed(TestbedOptions(state_dir=tmp_path / "state", build_dir=tmp_path / "build",
                                     grpc_base=free_port(), api_base=free_port(),
                                     metrics_base=free_port(), **options))
        beds.append(bed)
        bed.start(progress=lambda msg: None)
        return bed

    def stop_own_testbeds() -> None:
        for bed in beds:
            bed.stop()
            stop_recorded(bed.options.state_dir)

    request.addfinalizer(stop_own_testbeds)
    return start


def host_run(bed: Testbed, host: str, *args: str) -> str:
    out = bed.net[host].cmd(" ".join([*CLIENT, *args, ";", "echo", "rc=$?"]))
    return out


def test_star_over_a_bridge_builds_pings_and_serves_blocks(testbed):
    bed = testbed(target="bridge", hosts=3)
    assert "0% packet loss" in bed.net["h3"].cmd("ping -c2 -W1 10.0.0.1")
    out = host_run(bed, "h1", "put", "0x77", "--version", "1", "--data", "through-the-testbed")
    assert "rc=0" in out, out
    out = host_run(bed, "h2", "get", "0x77")
    assert "HIT_SERVER" in out and b"through-the-testbed".hex() in out and "rc=0" in out, out


def test_stop_ends_recorded_processes_of_a_crashed_testbed(testbed, tmp_path):
    bed = testbed(target="bridge", hosts=1)
    storage = next(s for s in bed.started if s.what.startswith("storage"))
    assert (tmp_path / "state" / STATE_FILE).exists()
    stopped = stop_recorded(tmp_path / "state")  # as `python -m topo stop` would after a crash
    assert any("storage" in line for line in stopped)
    assert storage.process.wait(timeout=10) is not None
    assert not (tmp_path / "state" / STATE_FILE).exists()
    shells = {n.name: n.shell for n in bed.net.hosts}
    assert all(shell.wait(timeout=10) is not None for shell in shells.values()), shells  # namespaces gone
    assert {f"node {name}" for name in shells} <= {line.split(" (")[0] for line in stopped}
    assert not [i for i in bed._root_interfaces() if os.path.exists(f"/sys/class/net/{i}")]


def test_get_through_the_p4_switch_is_served_by_the_switch_once_the_block_is_hot(testbed):
    bed = testbed(target="soft", hosts=2)
    value = "kv-block-bytes" * 20  # 280 bytes: 3 chunks
    out = host_run(bed, "h1", "put", "0x1234", "--version", "3", "--data", value)
    assert "rc=0" in out, out
    served = []
    # the controller admits a key after a few GET misses (hot-key digest); how soon depends on how busy the
    # machine is, so the reads go on until it did, within a bound no load reaches
    deadline = time.monotonic() + ADMISSION_WAIT_S
    while not served or (served[-1] != "HIT_SWITCH" and time.monotonic() < deadline):
        out = host_run(bed, "h2", "get", "0x1234", "--chunks", "3")
        assert "rc=0" in out and value.encode().hex() in out, out
        served.append("HIT_SWITCH" if "HIT_SWITCH" in out else "HIT_SERVER")
        if served[-1] != "HIT_SWITCH":
            time.sleep(0.5)
    assert served[0] == "HIT_SERVER" and served[-1] == "HIT_SWITCH", served
    out = host_run(bed, "h1", "lookup", "0x1234")  # punted to the controller, answered in st1's name
    assert "rc=0" in out and "SWITCH" in out, out


def test_p4_testbed_writes_pcaps_and_logs_per_switch_serves_metrics_and_port_roles(testbed, tmp_path):
    bed = testbed(target="soft", hosts=2)
    assert "1 received" in bed.net["h1"].cmd("ping -c1 -W1 10.0.0.100")
    folder = tmp_path / "state" / "s1"
    hosts = json.loads((folder / "hosts.json").read_text())
    assert hosts["ports"] == [{"port": 1, "role": "host"}, {"port": 2, "role": "host"}, {"port": 3, "role": "storage"}]
    metrics = urllib.request.urlopen(bed.metrics_url(1), timeout=5).read().decode()
    assert "# TYPE" in metrics
    bed.stop()  # the switch closes its pcaps
    pcaps = {p.name: p.stat().st_size for p in (folder / "pcap").glob("*.pcap")}
    assert pcaps.get("s1-eth1_in.pcap", 0) > 24 and pcaps.get("s1-eth3_out.pcap", 0) > 24, pcaps  # past the header
    assert (folder / "switch.log").exists()


def test_demo_over_a_bridge_replays_the_trace_and_writes_report_and_plot(tmp_path, request):
    request.addfinalizer(lambda: stop_recorded(tmp_path / "state"))  # if the demo process died mid-way
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": i * 1000, "input_length": 1500, "output_length": 1, "hash_ids": [0, 100 + i, 200 + i]})
        + "\n" for i in range(12)))
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "topo", "demo", "--target", "bridge", "--hosts", "3", "--trace", str(trace),
         "--out", str(out), "--state", str(tmp_path / "state"), "--duration", "1",
         "--grpc-base", str(free_port()), "--api-base", str(free_port())],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert results["requests"] == 12 and results["wrong_blocks"] == 0 and results["errors"] == 0
    # every request ends at its first miss (its own block 100+i at the latest); block 0 hits once stored
    assert results["outcomes"]["MISS"] == 12 and 1 <= results["outcomes"]["HIT_SERVER"] <= 11
    first_block = results["hot_blocks"][0]
    assert first_block["client_gets"] == 12 and first_block["storage_gets"] == 12  # a bridge absorbs nothing
    assert (out / "demo.png").stat().st_size > 10_000 and "switch hit ratio: 0.000" in (out / "report.md").read_text()
