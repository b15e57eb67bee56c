"""What request coalescing needs from the controller: one multicast group and one default action, over P4Runtime.

The data plane (p4src/coalesce.p4, docs/dataplane.md "Coalescing") parks up to `WAITERS` readers of a chunk
whose GET is outstanding and multicasts the storage node's reply to them, one batch of `BATCH` per pipeline
pass; egress keeps copy `(port, rid)` only where the batch's reader `rid - 1` sits (rid 0 is the reply itself,
kept on its own route's port), and recirculates copy `CARRY_RID` to serve the next batch. So the group needs
every (port, rid) pair: every port a reader or the storage node may sit behind, rids 0..`BATCH`, plus one
`CARRY_RID` copy on any port. With `port_groups` (the default) the controller also installs groups sized to a
batch, so a batch makes only the copies it may use: for k = 1..`BATCH` waiters, group
`port_group_base + (k - 1) * 512 + p` = (p, rids 0..k) for every port p, and `... + 511` = every port × rids
0..k, each with its `CARRY_RID` copy when k = `BATCH` (only a full batch can have a next one). A batch of k
waiters whose copies all leave through one port makes k + 1 copies, otherwise P × (k + 1); not P × 9 + 1. The
data plane knows nothing else about ports.

Start-up (after the pipeline is set and before readers arrive)::

    from controller.coalescing import CoalescingOptions, configure_coalescing
    configure_coalescing(switch, CoalescingOptions(), ports=[1, 2, 3, 4])   # every front-panel port

A new `epoch` frees every pending entry at once (use a fresh one after a controller restart, as with the
sketch's epochs); `CoalescingOptions(enabled=False)` turns coalescing off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from p4.v1 import p4runtime_pb2

from p4rt.codec import default_action_entity
from p4rt.errors import P4RuntimeError
from p4rt.p4info import P4Info

CONFIG_TABLE = "MyIngress.coalesce_config"
CONFIG_ACTION = "MyIngress.set_coalesce_config"
OFF_ACTION = "MyIngress.coalesce_off"
WAITERS = 64
"""`COALESCE_WAITERS` in p4src/include/constants.p4: readers parked per pending GET."""
BATCH = 8
"""`COALESCE_BATCH`: readers served per multicast (copies rid 1..BATCH)."""
ALL_PORTS = 511
"""`COALESCE_ALL_PORTS`: the port code of the all-ports groups sized to a batch (v1model's drop port, never a
real one)."""
GROUP_SHIFT = 9
"""`COALESCE_GROUP_SHIFT`."""


def sized_group(waiters: int, port: int) -> int:
    """Offset from `port_group_base` of the group for a batch of `waiters` whose copies leave through `port`
    (`ALL_PORTS`: through several)."""
    return ((waiters - 1) << GROUP_SHIFT) + port
CARRY_RID = 255
"""`COALESCE_CARRY_RID`: the copy egress recirculates when a reply has more waiters than one batch."""


@dataclass(frozen=True)
class CoalescingOptions:
    """How the data plane coalesces GETs."""

    timeout_us: int = 200_000
    """Lifetime of a pending GET, in microseconds: a lost reply blocks its waiters this long at most, then
    they retry. Keep it below the readers' retry timeout (kvpool client: 0.5 s), so a retry never joins the
    entry it already waits in."""
    epoch: int = 1
    """Non-zero; entries opened under another epoch count as free."""
    mcast_group: int = 0x4B56
    """PRE multicast group of the copies ("KV"); any id below 32768 the controller uses for nothing else (BMv2
    keeps the upper half for clone sessions)."""
    batch: int = BATCH
    """Copies rid 1..batch per port: the program's `COALESCE_BATCH` (fewer would lose waiters' copies)."""
    port_groups: bool = True
    """Also the groups sized to a batch, per port and for all ports (ids from `port_group_base`, see above)."""
    enabled: bool = True

    @property
    def port_group_base(self) -> int:
        """`set_coalesce_config`'s `port_group_base` (0 = only the all-ports group `mcast_group`)."""
        return self.mcast_group + 1 if self.port_groups else 0

    def config_params(self) -> dict[str, int]:
        """The parameters of `set_coalesce_config`, by name."""
        if not 0 < self.epoch < 1 << 32:
            raise ValueError(f"coalescing epoch must be in [1, 2^32), not {self.epoch}")
        if not 0 < self.mcast_group < 1 << 15 or self.port_group_base + sized_group(self.batch, ALL_PORTS) >= 1 << 15:
            raise ValueError(f"multicast group {self.mcast_group}: it and the per-port groups above it must be "
                             "below 32768")
        if not 0 < self.timeout_us < 1 << 32:
            raise ValueError(f"timeout must be in [1, 2^32) us, not {self.timeout_us}")
        return {"timeout_us": self.timeout_us, "epoch": self.epoch, "mcast_group": self.mcast_group,
                "port_group_base": self.port_group_base}


def replica_layout(ports: Iterable[int], batch: int = BATCH, carry: bool = True) -> list[tuple[int, int]]:
    """(egress port, rid) of every copy: each port × rids 0..batch, and the carry copy (`CARRY_RID`) on the
    lowest port (it is recirculated, never sent: any port of the group does)."""
    ports = sorted(set(ports))
    if not ports:
        raise ValueError("the coalescing group needs at least one port")
    return [(port, rid) for port in ports for rid in range(batch + 1)] + ([(ports[0], CARRY_RID)] if carry else [])


def group_layouts(options: CoalescingOptions, ports: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
    """Every multicast group coalescing uses, by id: the all-ports group, and with `port_groups` one per port."""
    ports = sorted(set(ports))
    groups = {options.mcast_group: replica_layout(ports, options.batch)}
    if options.port_groups:
        for k in range(1, options.batch + 1):
            full = k == options.batch
            groups[options.port_group_base + sized_group(k, ALL_PORTS)] = replica_layout(ports, k, carry=full)
            for port in ports:
                groups[options.port_group_base + sized_group(k, port)] = replica_layout([port], k, carry=full)
    return groups


def multicast_group_entities(options: CoalescingOptions, ports: Iterable[int]) -> list[p4runtime_pb2.Entity]:
    entities = []
    for group_id, layout in group_layouts(options, ports).items():
        entity = p4runtime_pb2.Entity()
        group = entity.packet_replication_engine_entry.multicast_group_entry
        group.multicast_group_id = group_id
        for port, rid in layout:
            group.replicas.add(egress_port=port, instance=rid)
        entities.append(entity)
    return entities


def config_entity(p4info: P4Info, options: CoalescingOptions) -> p4runtime_pb2.Entity:
    """`coalesce_config`'s default action: `set_coalesce_config(...)`, or `coalesce_off` when disabled."""
    if not options.enabled:
        return default_action_entity(p4info, CONFIG_TABLE, OFF_ACTION)
    return default_action_entity(p4info, CONFIG_TABLE, CONFIG_ACTION, options.config_params())


def coalescing_updates(p4info: P4Info, options: CoalescingOptions, ports: Iterable[int],
                       group_exists: bool = False) -> list[p4runtime_pb2.Update]:
    """One Write's updates: the groups (INSERT, or MODIFY when they exist), then the default action (MODIFY).

    The groups come first, so no reply is ever multicast to a group that does not exist yet."""
    kind = p4runtime_pb2.Update.MODIFY if group_exists else p4runtime_pb2.Update.INSERT
    updates = [p4runtime_pb2.Update(type=kind, entity=entity) for entity in multicast_group_entities(options, ports)]
    updates.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=config_entity(p4info, options)))
    return updates


class Writer(Protocol):
    """What `configure_coalescing` needs of a switch connection (`p4rt.connection.SwitchConnection`)."""

    p4info: P4Info

    def write(self, updates: Sequence[p4runtime_pb2.Update]) -> None: ...


def configure_coalescing(switch: Writer, options: CoalescingOptions, ports: Iterable[int]) -> None:
    """Install the groups and the configuration; a group left by an earlier controller is modified instead."""
    ports = list(ports)
    *groups, config = coalescing_updates(switch.p4info, options, ports)
    modify = coalescing_updates(switch.p4info, options, ports, group_exists=True)
    for insert, again in zip(groups, modify, strict=False):
        try:
            switch.write([insert])
        except P4RuntimeError as exc:
            if not exc.only("ALREADY_EXISTS"):
                raise
            switch.write([again])
    switch.write([config])
