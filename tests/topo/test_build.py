"""The compile step runs each target's compiler with the documented command line and reports failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from topo.build import artifacts, command, compile_program
from topo.switches import SWITCHES, TestbedError


def test_soft_target_uses_softswitch_compile_with_p4c_flags():
    argv = command("soft", Path("build"))
    assert argv[1:3] == ["-m", "softswitch.compile"]
    assert argv[3].endswith("p4src/kvswitch.p4")
    assert argv[4:] == ["-o", "build/soft", "--p4runtime-files", "build/soft/kvswitch.p4info.txtpb"]


def test_bmv2_target_uses_p4c_for_v1model():
    assert command("bmv2", Path("build")) == [
        "p4c", "--target", "bmv2", "--arch", "v1model", "-o", "build/bmv2",
        "--p4runtime-files", "build/bmv2/kvswitch.p4info.txtpb", command("bmv2", Path("build"))[-1]]
    assert artifacts("bmv2", Path("build")).device_config == Path("build/bmv2/kvswitch.json")


@pytest.mark.skipif(shutil.which("p4c") is not None, reason="p4c is installed: the missing-tool message can't show")
def test_bmv2_without_p4c_says_what_is_missing(tmp_path):
    with pytest.raises(TestbedError, match="needs p4c on PATH"):
        compile_program("bmv2", tmp_path)


@pytest.mark.skipif(shutil.which("simple_switch_grpc") is not None, reason="BMv2 is installed")
def test_bmv2_switch_without_simple_switch_grpc_says_what_is_missing():
    with pytest.raises(TestbedError, match="simple_switch_grpc on PATH"):
        SWITCHES["bmv2"].setup()
