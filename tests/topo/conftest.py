"""Fixtures of the Mininet tests: a testbed shared by a whole module, always stopped (and `mn -c` run) afterwards.

Ports and state folders are per module, so nothing collides with a testbed someone runs by hand.
"""

from __future__ import annotations

import socket
import subprocess

import pytest

from topo.testbed import Testbed, TestbedOptions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def module_testbed(tmp_path_factory, request):
    """module_testbed(target=..., hosts=...) → a started Testbed for this module's tests (starting one costs tens
    of seconds on the embedded target); stopped, and `mn -c` run, when the module is done, pass or fail."""
    beds: list[Testbed] = []

    def cleanup() -> None:
        for bed in beds:
            bed.stop()
        subprocess.run(["mn", "-c"], capture_output=True)

    request.addfinalizer(cleanup)

    def start(**options) -> Testbed:
        root = tmp_path_factory.mktemp("testbed")
        bed = Testbed(TestbedOptions(state_dir=root / "state", build_dir=root / "build",
                                     grpc_base=free_port(), api_base=free_port(), **options))
        beds.append(bed)
        bed.start(progress=lambda msg: None)
        return bed

    return start
