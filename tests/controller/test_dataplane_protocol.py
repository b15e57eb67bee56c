"""Every data plane the pool is given implements the whole `DataPlane` protocol: the pool calls each method
directly, never after probing for it, so a fake missing one would fail only on the path that needs it."""

from __future__ import annotations

import inspect

import pytest

from controller.dataplane import DataPlane, MemoryDataPlane
from controller.p4dataplane import P4RuntimeDataPlane
from tests.controller.fakes import FakeDataPlane
from tests.controller.test_first_hit_poll import ReadRecordingDataPlane
from tests.controller.test_pool_outage import VanishingDataPlane

METHODS = {name: member for name, member in vars(DataPlane).items()
           if inspect.isfunction(member) and not name.startswith("_")}


def test_the_protocol_lists_what_the_pool_calls():
    assert {"install", "remove", "swap", "installed", "installed_entries", "write_slot", "slot_hits",
            "hit_counts"} <= set(METHODS)


@pytest.mark.parametrize("implementation", [MemoryDataPlane, P4RuntimeDataPlane, FakeDataPlane,
                                            ReadRecordingDataPlane, VanishingDataPlane])
@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_data_plane_implements_each_method_with_the_protocols_parameters(implementation, name):
    method = getattr(implementation, name, None)
    assert callable(method), f"{implementation.__name__} lacks {name}"
    wanted = list(inspect.signature(METHODS[name]).parameters)
    assert list(inspect.signature(method).parameters)[: len(wanted)] == wanted
