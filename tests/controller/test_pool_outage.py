"""Reconcile runs that lose the switch half-way: one warning, and the rest is left for the next resync."""

from __future__ import annotations

import logging

from controller.pool import PoolManager
from controller.state import StateStore
from controller.tiers import TierMap, TierMover
from kvpool.keys import ChunkKey
from p4rt.errors import P4RuntimeError
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

CAPACITY = 64
KEYS = [ChunkKey(1, 0x2000 + i, 0) for i in range(CAPACITY)]
REACHED = 5
"""Installs the switch accepts before it goes away."""


class VanishingDataPlane(FakeDataPlane):
    """A switch that goes away after `reachable_installs` more installs: every RPC then fails UNAVAILABLE."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.reachable_installs: int | None = None
        self.install_calls = 0

    def _check(self) -> None:
        if self.reachable_installs is not None and self.reachable_installs <= 0:
            raise P4RuntimeError("UNAVAILABLE", "connection to the switch lost; reconnecting")

    def install(self, key: ChunkKey, slot: int, min_version: int = 0, generation: int = 0) -> None:
        self.install_calls += 1
        self._check()
        super().install(key, slot, min_version, generation)
        if self.reachable_installs is not None:
            self.reachable_installs -= 1

    def remove(self, key: ChunkKey) -> None:
        self._check()
        super().remove(key)

    def slot_hits(self, slots: list[int] | None = None) -> dict[int, int]:
        self._check()
        return super().slot_hits(slots)


def make_pool(dataplane, state=None) -> PoolManager:
    return PoolManager(dataplane, make_policies(threshold=1, recycle_at=2.0), state=state,
                       mover=TierMover(TierMap(), FakeStorage()), clock=Clock())


def fill(pool: PoolManager) -> None:
    for key in KEYS:
        pool.on_hot_key(key)
    assert len(pool.slots) == CAPACITY


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "controller.pool" and r.levelno >= logging.WARNING]


def test_resync_stops_at_the_first_lost_connection_with_one_warning(caplog):
    dataplane = VanishingDataPlane(CAPACITY)
    pool = make_pool(dataplane)
    fill(pool)
    dataplane.index.clear()  # the switch restarted ...
    dataplane.reachable_installs = REACHED  # ... and goes away again during the resync
    dataplane.install_calls = 0
    caplog.set_level(logging.DEBUG)
    counts = pool.resync()
    assert counts["reinstalled"] == REACHED and counts["deferred"] == CAPACITY - REACHED
    assert dataplane.install_calls == REACHED + 1
    assert len(warnings_of(caplog)) == 1 and "went away" in warnings_of(caplog)[0]
    dataplane.reachable_installs = None  # back again: the next reconnect's resync installs the rest
    assert pool.resync()["reinstalled"] == CAPACITY - REACHED
    assert dataplane.index == {key: slot for key, slot in pool.slots.items()}


def test_restore_keeps_the_saved_map_when_the_switch_goes_away_mid_run(tmp_path, caplog):
    db = tmp_path / "state.sqlite"
    fill(make_pool(VanishingDataPlane(CAPACITY), StateStore(db)))
    restarted_switch = VanishingDataPlane(CAPACITY)
    restarted_switch.reachable_installs = REACHED
    pool = make_pool(restarted_switch, StateStore(db))
    caplog.set_level(logging.DEBUG)
    counts = pool.restore()
    assert counts["reinstalled"] == REACHED and counts["deferred"] == CAPACITY - REACHED
    assert counts["dropped"] == 0
    assert restarted_switch.install_calls == REACHED + 1
    assert len(warnings_of(caplog)) == 1 and "went away" in warnings_of(caplog)[0]
    assert len(pool.slots) == CAPACITY and len(StateStore(db).slots()) == CAPACITY
    restarted_switch.reachable_installs = None
    assert pool.resync()["reinstalled"] == CAPACITY - REACHED
    assert restarted_switch.index == {key: slot for key, slot in pool.slots.items()}
