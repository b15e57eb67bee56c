"""Byte-for-byte differential check of kvswitch.p4 across targets.

`golden/kvswitch_vectors.json` holds a fixed sequence of packets through kvswitch.p4 (every opcode; hit,
miss, fill, PUT, stale and bad fills; punts, packet-outs, SLOT_WRITE/SLOT_READ; malformed KVP and truncated
frames; routed, unrouted and expiring L3; the hot-key digest; the final counters) with the outputs the
in-process softswitch gave when it was recorded. Each available target replays it on a fresh switch and must
give identical bytes, ports, digests and counters. On the in-process target this is a regression guard; on
`softswitch-process` it checks the P4Runtime server, packet I/O and ports; on `bmv2-process` it is the
cross-target check that our target's output is BMv2's.

Regenerate the golden file only after a deliberate change of behaviour, and review its diff:

    .venv/bin/python -m tests.targets.kvswitch_vectors --write tests/targets/golden/kvswitch_vectors.json
"""

from __future__ import annotations

import os

import pytest

from kvtesting.kvnet import CPU_PORT
from kvtesting.switch_process import SOFTSWITCH_NO_P4, ProcessOptions, SwitchProcess
from tests.targets import kvswitch_vectors as vectors
from tests.targets.kinds import INPROC, SharedSwitches, kind_of, target_params


@pytest.fixture(scope="module")
def golden() -> list[vectors.Step]:
    return vectors.load()


@pytest.fixture(scope="module")
def switches(tmp_path_factory):
    s = SharedSwitches(tmp_path_factory.mktemp("differential"), "df")
    yield s
    s.close()


@pytest.fixture(params=target_params())
def fresh_target(request):
    """A switch that has seen nothing yet (a new process for the process targets)."""
    if request.param == INPROC:
        from softswitch.frontend import load_program
        from softswitch.runtime import SoftSwitch

        yield SoftSwitch.load(load_program(str(vectors.P4_MAIN)), cpu_port=CPU_PORT)
        return
    switches: SharedSwitches = request.getfixturevalue("switches")
    kind = kind_of(request.param)
    proc = switches.start(kind, kind[0])
    yield proc.target
    proc.close()


def test_golden_vectors_cover_every_opcode_and_outcome(golden) -> None:
    from scapy.layers.l2 import Ether

    from kvpool.constants import Opcode
    from kvpool.protocol import KVP

    sent = set()
    for step in golden:
        if step["op"] == "packet":
            data = bytes.fromhex(step["in"])
            frame = Ether(data[4:] if step["port"] == CPU_PORT else data)
            if KVP in frame:
                sent.add(int(frame[KVP].opcode))
    host_ops = {Opcode.GET, Opcode.GET_REPLY, Opcode.PUT, Opcode.INSERT, Opcode.LOOKUP_META, Opcode.SLOT_WRITE,
                Opcode.SLOT_READ}
    assert {int(o) for o in host_ops} <= sent
    outcomes = {tuple(p for p, _ in step["out"]) for step in golden if step["op"] == "packet"}
    assert {(), (1,), (2,), (3,), (CPU_PORT,)} <= outcomes, "dropped, answered, forwarded, routed, punted"
    assert any(step["op"] == "digests" and step["out"] for step in golden)


def test_target_reproduces_golden_vectors_byte_for_byte(fresh_target, golden) -> None:
    diffs = vectors.replay(fresh_target, golden)
    assert diffs == [], "\n".join(diffs[:20])


def test_replay_names_the_step_whose_bytes_differ(golden) -> None:
    from softswitch.frontend import load_program
    from softswitch.runtime import SoftSwitch

    changed = [dict(step) for step in golden]
    i = next(i for i, s in enumerate(changed) if s["op"] == "packet" and s["case"] == "get_hit")
    port, data = changed[i]["out"][0]
    changed[i]["out"] = [[port, data[:-2] + f"{int(data[-2:], 16) ^ 1:02x}"]]
    diffs = vectors.replay(SoftSwitch.load(load_program(str(vectors.P4_MAIN)), cpu_port=CPU_PORT), changed)
    assert len(diffs) == 1 and diffs[0].startswith(f"step {i} (get_hit, packet)")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and raw sockets need root")
def test_softswitch_started_like_bmv2_reproduces_golden_vectors(switches, golden) -> None:
    """`--no-p4` and the pipeline pushed over P4Runtime: BMv2's start-up path, checked where BMv2 is absent."""
    proc = SwitchProcess(SOFTSWITCH_NO_P4, switches.compiled("softswitch"), switches.work_dir,
                         ProcessOptions(cpu_port=CPU_PORT, veth_tag=f"{os.getpid() % 10000:04d}dfn"))
    try:
        diffs = vectors.replay(proc.start(), golden)
    finally:
        proc.close()
    assert diffs == [], "\n".join(diffs[:20])
