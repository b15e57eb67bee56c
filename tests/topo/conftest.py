"""Fixtures of the Mininet tests: a testbed shared by a whole module, always stopped afterwards.

Ports and state folders are per module, so nothing collides with a testbed someone runs by hand. Each test
stops only what it started (its Testbed objects, then whatever their testbed.json still records): never
another Mininet on the machine.
"""

from __future__ import annotations

import os
import socket

import pytest

from topo.testbed import Testbed, TestbedOptions, stop_recorded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def module_testbed(tmp_path_factory, request):
    """module_testbed(target=..., hosts=...) → a started Testbed for this module's tests (starting one costs tens
    of seconds on the embedded target); stopped when the module is done, pass or fail. The storage nodes'
    backend is `store=` if given, else $KVSWITCH_TEST_STORE (memory by default): `KVSWITCH_TEST_STORE=mooncake`
    runs the Mininet suites (coherence, hostile hosts, leaf-spine, ...) over Mooncake Store."""
    beds: list[Testbed] = []

    def stop_own_testbeds() -> None:
        for bed in beds:
            bed.stop()
            stop_recorded(bed.options.state_dir)

    request.addfinalizer(stop_own_testbeds)

    def start(**options) -> Testbed:
        root = tmp_path_factory.mktemp("testbed")
        options.setdefault("store", os.environ.get("KVSWITCH_TEST_STORE", "memory"))
        bed = Testbed(TestbedOptions(state_dir=root / "state", build_dir=root / "build",
                                     grpc_base=free_port(), api_base=free_port(),
                                     metrics_base=free_port(), **options))
        beds.append(bed)
        bed.start(progress=lambda msg: None)
        return bed

    return start
