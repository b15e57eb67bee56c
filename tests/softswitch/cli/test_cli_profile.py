"""`python -m softswitch --profile FILE`: the packet thread's cProfile statistics, for finding per-frame costs."""

from __future__ import annotations

import pathlib
import pstats

from softswitch.cli import parse_args
from softswitch.ports import PortSet


def test_profile_option_is_taken_and_off_by_default():
    assert parse_args(["prog.json", "--profile", "/tmp/sw.prof"]).profile == pathlib.Path("/tmp/sw.prof")
    assert parse_args(["prog.json"]).profile is None


def test_port_thread_writes_its_statistics_when_the_ports_close(tmp_path):
    out = tmp_path / "ports.prof"
    ports = PortSet([], lambda port, frame: None, profile_to=out)
    ports.open()
    ports.start()
    ports.close()
    stats = pstats.Stats(str(out))
    assert any(name == "_serve" for _file, _line, name in stats.stats), "the receiving loop was profiled"

