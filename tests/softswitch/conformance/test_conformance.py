"""Conformance suite: every programs/*.p4 runs its programs/*.stf script against the embedded target."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

from softswitch.runtime.switch import SoftSwitch

HERE = pathlib.Path(__file__).parent
PROGRAMS = sorted(HERE.glob("programs/*.p4"))


def _stf():
    if "conformance_stf" not in sys.modules:
        spec = importlib.util.spec_from_file_location("conformance_stf", HERE / "stf.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["conformance_stf"] = module
        spec.loader.exec_module(module)
    return sys.modules["conformance_stf"]


def test_every_program_has_a_script():
    assert PROGRAMS, "no conformance programs found"
    for p4 in PROGRAMS:
        assert p4.with_suffix(".stf").exists(), f"{p4.name} has no .stf script"


@pytest.mark.parametrize("p4", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_matches_its_script(p4: pathlib.Path):
    sw = SoftSwitch.load(p4, seed=1)
    checked = _stf().run_stf(sw, p4.with_suffix(".stf"))
    assert checked > 0, "the script sends no packet"
