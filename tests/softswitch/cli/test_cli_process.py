"""`python -m softswitch` as a process: starts, stops cleanly on SIGTERM, fails clearly on bad input."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def switch(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "softswitch", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    """Read stderr until the start-up line (or the process ends)."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("softswitch: device"):
            return line
    raise AssertionError(f"switch did not start: {''.join(lines)}")


def test_sigterm_stops_the_switch_cleanly():
    port = free_port()
    proc = switch("--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{port}")
    try:
        assert f"127.0.0.1:{port}" in wait_ready(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()


def test_missing_interface_exits_non_zero_with_its_name():
    proc = switch("--no-p4", "-i", "1@sswpmissing", "--", "--grpc-server-addr", f"127.0.0.1:{free_port()}")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "sswpmissing: no such interface" in err


def test_grpc_address_in_use_exits_non_zero():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = switch("--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{port}")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in err


def test_bad_program_prints_file_line_col(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<8> x }\n")
    proc = switch(str(bad), "--", "--grpc-server-addr", f"127.0.0.1:{free_port()}")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"{bad}:3:" in err or "bad.p4:3:" in err


def test_bad_usage_exits_2_with_usage_line():
    proc = switch("-i", "nonsense", "--no-p4")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "usage:" in err


def test_compiled_bundle_as_program_is_served_to_controllers(tmp_path):
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    program = os.path.join(ROOT, "tests", "softswitch", "p4runtime", "programs", "l2l3.p4")
    res = subprocess.run([sys.executable, "-m", "softswitch.compile", program, "-o", str(tmp_path),
                          "--p4runtime-files", str(tmp_path / "l2l3.p4info.txtpb")], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    port = free_port()
    proc = switch(str(tmp_path / "l2l3.json"), "--device-id", "4", "--", "--grpc-server-addr", f"127.0.0.1:{port}")
    try:
        wait_ready(proc, timeout=60)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            resp = stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=4))
        text = (tmp_path / "l2l3.p4info.txtpb").read_text()
        from softswitch.p4runtime.p4info import from_text

        assert resp.config.p4info == from_text(text)
        assert resp.config.p4_device_config == (tmp_path / "l2l3.json").read_bytes()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
