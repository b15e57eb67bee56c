"""p4lang's PTF runs the KV pipeline tests in ptf/kv_pipeline.py against the softswitch and BMv2 alike.

The switch runs behind veth pairs (kvtesting.switch_process); this test installs the routes and one index entry
over P4Runtime, then runs the `ptf` command on the host ends of the pairs and requires every PTF test to pass.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from kvtesting.kvnet import CPU_PORT, P4_MAIN, KvNet
from kvtesting.switch_process import BMV2, KINDS, ProcessOptions, SwitchProcess, compile_program

PTF_TESTS = pathlib.Path(__file__).with_name("ptf")
REPO = pathlib.Path(__file__).resolve().parents[2]
PTF_CASES = 4
"""Test classes in ptf/kv_pipeline.py; the run must report each of them."""
_root = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and raw sockets need root")

pytestmark = [pytest.mark.slow, pytest.mark.root, _root]


def ptf_command() -> str:
    return shutil.which("ptf") or str(pathlib.Path(sys.executable).with_name("ptf"))


@pytest.mark.parametrize("kind", [
    "softswitch",
    pytest.param("bmv2", marks=[pytest.mark.bmv2,
                                pytest.mark.skipif(not BMV2.available(), reason="p4c/simple_switch_grpc not on PATH")]),
])
def test_ptf_kv_pipeline_tests_pass(kind, tmp_path):
    sys.path.insert(0, str(PTF_TESTS))
    try:
        from kv_pipeline import INDEXED, SLOT
    finally:
        sys.path.remove(str(PTF_TESTS))
    compiled = compile_program(KINDS[kind], P4_MAIN, tmp_path / "build")
    process = SwitchProcess(KINDS[kind], compiled, tmp_path, ProcessOptions(
        ports=(1, 2), cpu_port=CPU_PORT, veth_tag=f"{os.getpid() % 100000:05d}f"))
    try:
        net = KvNet(process.start(), enums={})
        net.install_routes()
        net.set_port_roles()
        net.index(INDEXED, SLOT)
        interfaces = [arg for pair in process.veths
                      for arg in ("--interface", f"0-{pair.port}@{pair.host_end}")]
        done = subprocess.run(
            [ptf_command(), "--test-dir", str(PTF_TESTS), *interfaces, "--log-dir", str(tmp_path / "ptf"),
             "--default-timeout", "2", "--default-negative-timeout", "0.5"],
            cwd=tmp_path, capture_output=True, text=True, timeout=240,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PTF_TESTS)])})
    finally:
        process.close()
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert f"Ran {PTF_CASES} tests" in report and "OK" in report, report[-4000:]
