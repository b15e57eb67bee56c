"""controller.coalescing: the multicast groups request coalescing needs, and installing them over P4Runtime."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from p4.v1 import p4runtime_pb2

from controller.coalescing import (
    ALL_PORTS,
    BATCH,
    CARRY_RID,
    CoalescingOptions,
    configure_coalescing,
    group_layouts,
    sized_group,
)
from p4rt.errors import P4RuntimeError, UpdateError

PORTS = (1, 2, 5)


def test_every_batch_size_has_a_group_per_port_and_one_for_all_ports() -> None:
    options = CoalescingOptions(mcast_group=100)
    groups = group_layouts(options, PORTS)
    assert len(groups) == 1 + BATCH * (len(PORTS) + 1)
    base = options.port_group_base
    for k in range(1, BATCH + 1):
        carry = k == BATCH  # only a full batch can have a next one
        for port in PORTS:
            assert sorted(groups[base + sized_group(k, port)]) == sorted(
                [(port, rid) for rid in range(k + 1)] + ([(port, CARRY_RID)] if carry else []))
        all_ports = groups[base + sized_group(k, ALL_PORTS)]
        assert {p for p, _ in all_ports} == set(PORTS)
        assert sum(1 for _, rid in all_ports if rid == CARRY_RID) == int(carry)
        assert len(all_ports) == len(PORTS) * (k + 1) + int(carry)
    # the fallback group: every port x rids 0..BATCH and one carry copy
    assert len(groups[100]) == len(PORTS) * (BATCH + 1) + 1
    assert all(0 < g < 1 << 15 for g in groups)


def test_without_port_groups_only_the_all_ports_group() -> None:
    options = CoalescingOptions(mcast_group=100, port_groups=False)
    assert list(group_layouts(options, PORTS)) == [100]
    assert options.config_params()["port_group_base"] == 0


def test_group_ids_must_stay_below_the_clone_session_range() -> None:
    with pytest.raises(ValueError):
        CoalescingOptions(mcast_group=32000).config_params()


class _Switch:
    """Records writes; refuses INSERT of a group that exists (as BMv2 does)."""

    def __init__(self, existing: set[int]) -> None:
        self.existing = existing
        self.writes: list[tuple[int, str]] = []
        param = SimpleNamespace(id=1, bitwidth=32)
        self.p4info = SimpleNamespace(table_id=lambda name: 1, action_id=lambda name: 2,
                                      param=lambda action, name: param)

    def write(self, updates) -> None:
        for u in updates:
            if u.entity.HasField("packet_replication_engine_entry"):
                gid = u.entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
                kind = p4runtime_pb2.Update.Type.Name(u.type)
                if kind == "INSERT" and gid in self.existing:
                    raise P4RuntimeError("UNKNOWN", "batch", (UpdateError(0, "ALREADY_EXISTS", "exists"),))
                self.existing.add(gid)
                self.writes.append((gid, kind))
            else:
                self.writes.append((-1, "CONFIG"))


def test_configure_inserts_new_groups_modifies_old_ones_then_sets_the_config() -> None:
    options = CoalescingOptions(mcast_group=100)
    groups = group_layouts(options, PORTS)
    left_over = sorted(groups)[3]
    switch = _Switch({left_over})
    configure_coalescing(switch, options, PORTS)
    kinds = dict(w for w in switch.writes if w[0] != -1)
    assert kinds == {g: ("MODIFY" if g == left_over else "INSERT") for g in groups}
    assert switch.writes[-1] == (-1, "CONFIG"), "the config before its groups exist would multicast to nothing"
