"""Extern state: registers, counters, meters, random; and the replication engine's configuration."""

import pytest

from softswitch.runtime.externs import (
    GREEN,
    RED,
    CounterArray,
    MeterArray,
    MeterConfig,
    RandomSource,
    RegisterArray,
)
from softswitch.runtime.replication import ReplicationEngine
from softswitch.target import Replica, TargetError


def test_register_control_plane_write_then_read_round_trips_the_pattern():
    r = RegisterArray("r", 4, 8, signed=True)
    r.write(1, 0xFF)
    assert r.cells[1] == -1          # the data plane sees int<8> -1
    assert r.read(1) == 0xFF         # the control plane sees the bit pattern


@pytest.mark.parametrize(("index", "value", "code"), [(4, 0, "OUT_OF_RANGE"), (0, 256, "INVALID_ARGUMENT")])
def test_register_refuses_bad_index_or_value(index, value, code):
    r = RegisterArray("r", 4, 8)
    with pytest.raises(TargetError) as err:
        r.write(index, value)
    assert err.value.code == code


def test_register_reset_keeps_the_list_the_program_holds():
    r = RegisterArray("r", 2, 8)
    held = r.cells
    r.write(0, 5)
    r.reset()
    assert held is r.cells and held == [0, 0]


def test_counter_counts_packets_and_bytes_and_ignores_out_of_range():
    c = CounterArray("c", 2)
    c.count(1, 100)
    c.count(1, 50)
    c.count(5, 10)
    assert c.read(1) == (2, 150)
    assert c.read(0) == (0, 0)
    c.write(1, 0, 0)
    assert c.read(1) == (0, 0)


def test_unconfigured_meter_is_green_and_configured_meter_turns_red_over_peak():
    m = MeterArray("m", 1, "packets")
    assert m.execute(0, 64, 0) == GREEN
    m.configure(0, MeterConfig(cir=0.0, cburst=1, pir=0.0, pburst=1))
    assert m.execute(0, 64, 0) == GREEN
    assert m.execute(0, 64, 0) == RED


def test_random_is_reproducible_with_a_seed_and_within_bounds():
    a, b = RandomSource(7), RandomSource(7)
    xs = [a.between(3, 9) for _ in range(50)]
    assert xs == [b.between(3, 9) for _ in range(50)]
    assert all(3 <= x <= 9 for x in xs)


def test_multicast_group_set_replace_and_delete():
    pre = ReplicationEngine()
    pre.group_set(1, [Replica(1), Replica(2, rid=7)])
    assert pre.replicas(1) == (Replica(1), Replica(2, 7))
    pre.group_set(1, [Replica(3)])
    assert pre.replicas(1) == (Replica(3),)
    pre.group_delete(1)
    assert pre.replicas(1) == ()
    with pytest.raises(TargetError) as err:
        pre.group_delete(1)
    assert err.value.code == "NOT_FOUND"


@pytest.mark.parametrize("replicas", [[Replica(511)], [Replica(1), Replica(1)], [Replica(1, rid=70000)]])
def test_bad_replicas_are_invalid_argument(replicas):
    with pytest.raises(TargetError) as err:
        ReplicationEngine().group_set(1, replicas)
    assert err.value.code == "INVALID_ARGUMENT"


def test_clone_session_keeps_truncation_and_group_zero_is_refused():
    pre = ReplicationEngine()
    pre.session_set(5, [Replica(3)], truncate=64)
    assert pre.session(5).truncate == 64
    with pytest.raises(TargetError):
        pre.group_set(0, [Replica(1)])
