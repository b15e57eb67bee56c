"""Fixtures for the data-plane tests (helpers in kvnet.py): every test runs on every available target.

    inproc               a fresh in-process SoftSwitch per test (default, fast)
    softswitch-process   one `python -m softswitch` process for the session, driven over P4Runtime and veth
                         pairs (slow, root; runs in CI)
    bmv2-process         the same with p4c + simple_switch_grpc (slow, root, bmv2; skipped when not on PATH)

`pytest tests/dataplane -m "not slow"` runs the in-process variant only; `-k softswitch-process` the process
one. A shared process is brought back to a fresh switch's state before each test (tests/targets/
kvswitch_reset.py: tables deleted, counters zeroed, touched slots scrubbed, a new block of sketch epochs).
"""

from __future__ import annotations

import pathlib

import pytest

from kvtesting.kvnet import CPU_PORT, P4_MAIN, KvNet
from softswitch.target import Target
from tests.targets.kinds import INPROC, SharedSwitches, kind_of, target_params

HERE = pathlib.Path(__file__).resolve().parent
SHARED_SWITCHES = pytest.StashKey[SharedSwitches]()

# ---- fixtures -------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def program():
    """The kvswitch program through the softswitch front end (parsed once per session)."""
    from softswitch.frontend import load_program

    return load_program(str(P4_MAIN))


@pytest.fixture(scope="session")
def enums(program) -> dict[str, dict[str, int]]:
    """The program's serializable enums, {type: {member: value}}, read from the P4 source."""
    names = ("kvp_opcode_t", "kvp_status_t", "kvp_tier_t", "punt_reason_t", "drop_reason_t", "kvp_event_t",
             "port_role_t", "coalesce_event_t", "steer_event_t", "stream_event_t")
    out = {}
    for name in names:
        t = program.type(name)
        out[name] = {m: t.value_of(m) for m in t.members}
    return out


@pytest.fixture(scope="session")
def dataplane_switches(tmp_path_factory, request):
    """The switch processes shared by this directory's tests (started on first use, stopped after its last
    test: `pytest_runtest_teardown`)."""
    switches = SharedSwitches(tmp_path_factory.mktemp("dataplane-switches"), "dp")
    request.session.stash[SHARED_SWITCHES] = switches
    yield switches
    switches.close()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared switch processes once the next test is not one of this directory's (they start again
    if one comes later). Kept to the end of the session, their P4Runtime streams kept a thread inside gRPC,
    and a later test's fork() then aborted its child (grpc skips its fork handlers while another thread is in
    a call: tests/evaluation/test_evaluation_parallel.py died of SIGABRT beside two CPU hogs)."""
    if nextitem is not None and HERE in nextitem.path.parents:
        return
    switches = item.session.stash.get(SHARED_SWITCHES, None)
    if switches is not None:
        switches.close()


@pytest.fixture(params=target_params())
def target(request, program) -> Target:
    """kvswitch.p4 on one target, in a fresh switch's state."""
    if request.param == INPROC:
        from softswitch.runtime import SoftSwitch

        yield SoftSwitch.load(program, cpu_port=CPU_PORT)
        return
    switches: SharedSwitches = request.getfixturevalue("dataplane_switches")
    kind = kind_of(request.param)
    yield switches.for_test(kind)
    switches.after_test(kind)


@pytest.fixture
def net(target, enums) -> KvNet:
    """The two-host network with its host routes and port roles installed, sketch off."""
    n = KvNet(target, enums, epoch_offset=getattr(target, "epoch_offset", 0))
    n.install_routes()
    n.set_port_roles()
    return n
