"""Control composition (controls instantiated inside controls) gives the same bytes, names and counters on
every target: `programs/composition.p4` through the in-process softswitch, the softswitch process and BMv2.

The expected outputs are worked out by hand from the P4_16 calling convention (copy-in/copy-out, so an `in`
argument that overlaps an `inout` one keeps its value at the call), and are the same for every target."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from kvtesting import expect
from softswitch.target import Exact, TableEntry
from tests.targets.kinds import INPROC, SharedSwitches, kind_of, target_params

PROGRAM = pathlib.Path(__file__).parent / "programs" / "composition.p4"
PROBE_TYPE = 0x88B5
PAD = bytes(42)
"""Payload that makes each frame 60 bytes (the Ethernet minimum without FCS); it passes unchanged."""


def frame(a: int, b: int, c: int, port: int, ether_type: int = PROBE_TYPE) -> bytes:
    eth = bytes.fromhex("020000000002" "020000000001") + ether_type.to_bytes(2, "big")
    return eth + bytes([a, b, c, port]) + PAD


ENTRIES = (
    TableEntry("MyIngress.ports", {"p.port": Exact(1)}, "MyIngress.route.to_port", {"port": 1}),
    TableEntry("MyIngress.ports", {"p.port": Exact(2)}, "MyIngress.route.to_port", {"port": 2}),
    TableEntry("MyIngress.first.by_key", {"k": Exact(5)}, "MyIngress.first.set_b", {"v": 0x10}),
    TableEntry("MyIngress.second_add.by_key", {"k": Exact(5)}, "MyIngress.second_add.set_b", {"v": 0x20}),
)

CASES = [
    # first: a 5+1, b 0x10+1, Mark adds 2 to c; second: a +16, b 0x20+16, Mark (seen now 4) adds 4 to c;
    # Stamp adds 1 to c (port 1)
    pytest.param(frame(5, 0, 0, 1), [(1, frame(22, 0x30, 7, 1))], id="both-instances-hit"),
    # k is a copy of a (0) taken at the call: first returns after a += 1 even though a is then 1;
    # Stamp adds 2 to c (port 2: its other apply)
    pytest.param(frame(0, 0, 0, 2), [(2, frame(17, 0, 2, 2))], id="return-ends-only-the-instance"),
    pytest.param(frame(5, 0, 0, 3), [], id="no-route-dropped-by-route-default"),
    pytest.param(frame(5, 0, 0, 1, ether_type=0x0800), [], id="not-a-probe-dropped"),
]


@pytest.fixture(scope="module")
def switches(tmp_path_factory):
    s = SharedSwitches(tmp_path_factory.mktemp("composition"), "cp", program=PROGRAM)
    yield s
    s.close()


@pytest.fixture(scope="module", params=target_params())
def target(request):
    if request.param == INPROC:
        from softswitch.frontend import load_program
        from softswitch.runtime import SoftSwitch

        sw = SoftSwitch.load(load_program(str(PROGRAM)))
        for e in ENTRIES:
            sw.table_insert(e)
        yield sw
        return
    switches: SharedSwitches = request.getfixturevalue("switches")
    kind = kind_of(request.param)
    proc = switches.start(kind, kind[0])
    try:
        assert proc.target is not None
        for e in ENTRIES:
            proc.target.table_insert(e)
        yield proc.target
    finally:
        proc.close()


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_composed_program_gives_the_same_bytes(target, data: bytes, expected) -> None:
    assert expect.process(target, 1, data, len(expected) or None) == expected


def test_each_instance_has_its_own_counter_under_its_path(target) -> None:
    names = ("MyIngress.first.mark.marks", "MyIngress.second_add.mark.marks")
    before = {name: target.counter_read(name, 2)[0] for name in names}
    routed = target.counter_read("MyIngress.routed", 1)[0]
    seen = target.counter_read("MyIngress.routed", 3)[0]
    assert expect.process(target, 1, frame(5, 0, 0, 1), 1) == [(1, frame(22, 0x30, 7, 1))]
    assert expect.process(target, 1, frame(0, 0, 0, 1), 1) == [(1, frame(17, 0, 1, 1))]  # returns before Mark
    for name, count in before.items():
        assert target.counter_read(name, 2)[0] == count + 1, name
    assert target.counter_read("MyIngress.routed", 1)[0] == routed + 2, "the caller's counter, given to Route"
    assert target.counter_read("MyIngress.routed", 3)[0] == seen + 2, "the same counter, handed on to Tally"


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH")
def test_p4info_is_what_p4c_writes(tmp_path) -> None:
    """Names (instance paths, `@name`, key names), ids and order: our P4Info text is p4c's."""
    from softswitch import compile as compiler
    from softswitch.p4runtime import p4info

    out = tmp_path / "composition.p4info.txtpb"
    subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), "--p4runtime-files",
                    str(out), str(PROGRAM)], check=True, capture_output=True)
    theirs = "".join(line for line in out.read_text().splitlines(keepends=True)
                     if not line.startswith("# proto-")).lstrip("\n")
    assert p4info.to_text(compiler.compile_program(PROGRAM).p4info) == theirs
