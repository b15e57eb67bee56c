"""controller.steering: which node serves each bucket, as nodes fail and return (no switch: a recording writer)."""

from __future__ import annotations

import pathlib
import re

import pytest

from controller.hosts import Host
from controller.steering import (
    STEER_BUCKETS,
    STEER_SALT,
    Health,
    PoolNode,
    Steering,
    SteeringOptions,
    bucket_of,
    placement,
)
from p4rt.entities import TableEntry
from p4rt.errors import P4RuntimeError

NODES = (PoolNode(1, "10.0.0.100"), PoolNode(2, "10.0.0.101"), PoolNode(3, "10.0.0.102"))
ROUTES = [Host(f"st{n.node_id}", n.address, f"00:00:0a:00:00:{0x63 + n.node_id:02x}", 4 + n.node_id)
          for n in NODES]
CONSTANTS = pathlib.Path(__file__).resolve().parents[2] / "p4src" / "include" / "constants.p4"


class Recorder:
    """A switch that keeps the last entry per (table, match) and the default actions."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], TableEntry] = {}
        self.defaults: dict[str, tuple[str, dict]] = {}
        self.writes = 0

    def insert(self, entry: TableEntry) -> None:
        key = (entry.table, repr(sorted(entry.match.items())))
        if key in self.entries:
            raise P4RuntimeError("ALREADY_EXISTS", "exists")
        self.entries[key] = entry
        self.writes += 1

    def modify(self, entry: TableEntry) -> None:
        self.entries[(entry.table, repr(sorted(entry.match.items())))] = entry
        self.writes += 1

    def set_default(self, table: str, action: str, params=None) -> None:
        self.defaults[table] = (action, dict(params or {}))

    def bucket_actions(self) -> dict[int, tuple[str, int | None]]:
        return {e.match["bucket"].value: (e.action, e.params.get("node"))
                for (t, _), e in self.entries.items() if t == "MyIngress.steer_bucket"}


def test_the_bucket_constants_are_the_programs() -> None:
    text = CONSTANTS.read_text()
    assert int(re.search(r"#define STEER_BUCKET_WIDTH (\d+)", text).group(1)) == STEER_BUCKETS.bit_length() - 1
    assert int(re.search(r"STEER_SALT = (0x[0-9a-fA-F]+)", text).group(1), 16) == STEER_SALT


def test_buckets_spread_over_the_nodes() -> None:
    homes = placement(SteeringOptions("10.0.0.200", NODES), frozenset({1, 2, 3}))
    assert sorted(set(homes.values())) == [1, 2, 3]
    assert all(abs(list(homes.values()).count(n) - STEER_BUCKETS / 3) <= 1 for n in (1, 2, 3))
    counts = [0, 0, 0]
    for ph in range(3000):
        counts[homes[bucket_of(1, ph * 0x9E3779B97F4A7C15 & (2**64 - 1))] - 1] += 1
    assert min(counts) > 800, counts


@pytest.mark.parametrize("shared", [False, True])
def test_a_down_nodes_buckets_are_unavailable_or_go_to_the_next_live_node(shared: bool) -> None:
    options = SteeringOptions("10.0.0.200", NODES, shared_store=shared)
    homes = placement(options, frozenset({1, 2, 3}))
    after = placement(options, frozenset({1, 3}))
    for bucket, home in homes.items():
        if home != 2:
            assert after[bucket] == home, "other buckets never move"
        else:
            assert after[bucket] == (3 if shared else None)


def test_health_needs_consecutive_misses() -> None:
    health = Health(failures_to_down=2)
    health.record(1, False)
    assert health.live([1]) == {1}
    health.record(1, True)
    health.record(1, False)
    assert health.live([1]) == {1}
    health.record(1, False)
    assert health.live([1]) == frozenset()
    health.record(1, True)
    assert health.live([1]) == {1}


def test_install_then_resteer_only_what_changed() -> None:
    alive = {1: True, 2: True, 3: True}
    steering = Steering(SteeringOptions("10.0.0.200", NODES, failures_to_down=1), ROUTES,
                        probe=lambda node: alive[node.node_id])
    switch = Recorder()
    steering.install(switch)
    assert switch.defaults["MyIngress.steer_config"] == ("MyIngress.set_pool", {"pool_addr": 0x0A0000C8})
    assert len(switch.bucket_actions()) == STEER_BUCKETS
    members = [e for (t, _), e in switch.entries.items() if t == "MyIngress.pool_member"]
    assert sorted(e.params["node"] for e in members) == [1, 2, 3]
    one = next(e for (t, _), e in switch.entries.items()
               if t == "MyIngress.steer_bucket" and e.params.get("node") == 2)
    assert one.params["port"] == 6 and one.params["addr"] == 0x0A000065

    writes = switch.writes
    assert steering.check(switch) == {} and switch.writes == writes, "nothing changed, nothing written"
    alive[2] = False
    changed = steering.check(switch)
    assert changed and set(changed.values()) == {None}
    assert all(action == "MyIngress.bucket_unavailable" for b, (action, _) in switch.bucket_actions().items()
               if b in changed)
    assert steering.status()["nodes"][2]["live"] is False
    alive[2] = True
    assert set(steering.check(switch).values()) == {2}
    assert {node for _, node in switch.bucket_actions().values()} == {1, 2, 3}


def test_a_pool_node_without_a_route_is_refused() -> None:
    with pytest.raises(ValueError, match="no route"):
        Steering(SteeringOptions("10.0.0.200", NODES), ROUTES[:2], probe=lambda node: True)


def test_pool_options_are_checked() -> None:
    with pytest.raises(ValueError):
        SteeringOptions("10.0.0.200", (PoolNode(1, "10.0.0.1"), PoolNode(1, "10.0.0.2")))
    with pytest.raises(ValueError):
        PoolNode(0, "10.0.0.1")
    assert SteeringOptions.parse_node("10.0.0.5:7421", 4) == PoolNode(4, "10.0.0.5", 7421)
