"""Fixtures for the data-plane tests (helpers in kvnet.py): a fresh switch per test, the program parsed once."""

from __future__ import annotations

import pytest

from softswitch.target import Target
from tests.dataplane.kvnet import CPU_PORT, P4_MAIN, KvNet

# ---- fixtures -------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def program():
    """The kvswitch program through the softswitch front end (parsed once per session)."""
    from softswitch.frontend import load_program

    return load_program(str(P4_MAIN))


@pytest.fixture(scope="session")
def enums(program) -> dict[str, dict[str, int]]:
    """The program's serializable enums, {type: {member: value}}, read from the P4 source."""
    names = ("kvp_opcode_t", "kvp_status_t", "kvp_tier_t", "punt_reason_t", "drop_reason_t", "kvp_event_t")
    out = {}
    for name in names:
        t = program.type(name)
        out[name] = {m: t.value_of(m) for m in t.members}
    return out


@pytest.fixture
def target(program) -> Target:
    """A fresh switch running kvswitch.p4 (the in-process softswitch)."""
    from softswitch.runtime import SoftSwitch

    return SoftSwitch.load(program, cpu_port=CPU_PORT)


@pytest.fixture
def net(target, enums) -> KvNet:
    """The two-host network with its host routes installed, sketch off."""
    n = KvNet(target, enums)
    n.install_routes()
    return n
