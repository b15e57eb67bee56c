"""`python -m softswitch.compile`: p4c's flags, its output files, and its error lines."""

from __future__ import annotations

import json
import pathlib

import pytest

from softswitch import compile as compiler
from softswitch.p4runtime.p4info import from_text

PROGRAM = pathlib.Path(__file__).parent.parent / "p4runtime" / "programs" / "l2l3.p4"


def test_other_architectures_are_refused(capsys, tmp_path):
    assert compiler.main([str(PROGRAM), "-o", str(tmp_path), "--arch", "psa"]) == 2
    assert "only --arch v1model" in capsys.readouterr().err


def test_missing_program_is_reported(capsys, tmp_path):
    assert compiler.main([str(tmp_path / "nope.p4"), "-o", str(tmp_path)]) == 1
    assert "nope.p4: no such file" in capsys.readouterr().err


@pytest.mark.slow  # runs the real front end
def test_writes_device_config_and_p4info_in_every_requested_format(tmp_path):
    outs = [tmp_path / "p.p4info.txtpb", tmp_path / "p.p4info.json", tmp_path / "p.p4info.bin"]
    assert compiler.main([str(PROGRAM), "-o", str(tmp_path / "build"), "--target", "bmv2", "--arch", "v1model",
                          "--p4runtime-files", ",".join(map(str, outs))]) == 0
    bundle = json.loads((tmp_path / "build" / "l2l3.json").read_text())
    assert bundle["main"] == "l2l3.p4" and "l2l3.p4" in bundle["sources"]
    info = from_text(outs[0].read_text())
    assert info.tables and json.loads(outs[1].read_text())["tables"]
    assert info.SerializeToString() == outs[2].read_bytes()


@pytest.mark.slow  # runs the real front end
def test_bad_program_gives_file_line_col(capsys, tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\nconst bit<8> X = ;\n")
    assert compiler.main([str(bad), "-o", str(tmp_path)]) == 1
    assert f"{bad}:3:" in capsys.readouterr().err
