"""What the stream join needs from the controller: clone sessions, the storage ports and one default action.

The data plane (p4src/stream.p4, docs/dataplane.md "Stream join") lets a reader whose F_STREAM GET of a block
leaves towards a storage node while another reader's read of that block is under way subscribe to it; a later
reply to any member (the first reader or a subscriber) beyond the stream's front is pushed to every other member
through a chain of egress-to-egress clones, one per member, to clone session `SESSION_BASE + p` for a member
behind port p. So the switch needs:

* one clone session per front-panel port p: `SESSION_BASE + p` → port p;
* `MyEgress.stream_storage_port`: the ports leading to storage nodes (the same ports `MyIngress.port_role`
  marks STORAGE), so only the switch next to a storage node makes streams;
* `MyEgress.stream_config`'s default action: `set_stream_config(idle_us, epoch)`, or `stream_off`.

Start-up (after the pipeline is set)::

    from controller.streaming import StreamingOptions, configure_streaming
    configure_streaming(switch, StreamingOptions(), ports=[1, 2, 3, 4], storage_ports=[2])

A new `epoch` ends every stream at once; `StreamingOptions(enabled=False)` turns streams off. A bench holding a
p4runtime-shell handle calls `set_streaming_sh(sh, on, ports, storage_ports)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from p4.v1 import p4runtime_pb2

from p4rt.bytestrings import encode
from p4rt.codec import default_action_entity
from p4rt.errors import P4RuntimeError
from p4rt.p4info import P4Info

CONFIG_TABLE = "MyEgress.stream_config"
CONFIG_ACTION = "MyEgress.set_stream_config"
OFF_ACTION = "MyEgress.stream_off"
STORAGE_PORT_TABLE = "MyEgress.stream_storage_port"
STORAGE_PORT_ACTION = "MyEgress.stream_towards_storage"
STORAGE_PORT_KEY = "egress_port"
EVENTS = "MyEgress.stream_events"
SESSION_BASE = 1024
"""`STREAM_SESSION_BASE` in p4src/include/constants.p4: the chain's clone session for port p is this + p."""
SUBSCRIBERS = 64
"""`STREAM_SUBSCRIBERS`: readers subscribed per stream beside its origin."""
MAX_PORT = 511
"""Ports are bit<9>; 511 is v1model's drop port, never a front-panel port."""


@dataclass(frozen=True)
class StreamingOptions:
    """How the data plane runs the stream join."""

    idle_us: int = 500_000
    """A stream with no activity (its origin's GETs and replies) for this long ends, in microseconds. About the
    readers' retry timeout (kvpool client: 0.5 s): a subscriber falls back to GETting the rest of the block
    when pushes stop that long, so a stream no one feeds must not outlive that."""
    epoch: int = 1
    """Non-zero; streams opened under another epoch count as ended."""
    enabled: bool = True

    def config_params(self) -> dict[str, int]:
        """The parameters of `set_stream_config`, by name."""
        if not 0 < self.epoch < 1 << 32:
            raise ValueError(f"stream epoch must be in [1, 2^32), not {self.epoch}")
        if not 0 < self.idle_us < 1 << 32:
            raise ValueError(f"stream idle time must be in [1, 2^32) us, not {self.idle_us}")
        return {"idle_us": self.idle_us, "epoch": self.epoch}


def session_of(port: int) -> int:
    """The clone session that sends a chain copy out of `port`."""
    if not 0 <= port < MAX_PORT:
        raise ValueError(f"port {port} is not a front-panel port (0..{MAX_PORT - 1})")
    return SESSION_BASE + port


def clone_session_entities(ports: Iterable[int]) -> list[p4runtime_pb2.Entity]:
    """One clone session per port: `SESSION_BASE + p` → port p (instance 0)."""
    entities = []
    for port in sorted(set(ports)):
        entity = p4runtime_pb2.Entity()
        session = entity.packet_replication_engine_entry.clone_session_entry
        session.session_id = session_of(port)
        session.replicas.add(egress_port=port, instance=0)
        entities.append(entity)
    return entities


def storage_port_entities(p4info: P4Info, storage_ports: Iterable[int]) -> list[p4runtime_pb2.Entity]:
    """`stream_storage_port` entries: each port leading to a storage node."""
    field = p4info.match_field(STORAGE_PORT_TABLE, STORAGE_PORT_KEY)
    entities = []
    for port in sorted(set(storage_ports)):
        session_of(port)  # a real port
        entity = p4runtime_pb2.Entity()
        entry = entity.table_entry
        entry.table_id = p4info.table_id(STORAGE_PORT_TABLE)
        match = entry.match.add(field_id=field.id)
        match.exact.value = encode(port, field.bitwidth)
        entry.action.action.action_id = p4info.action_id(STORAGE_PORT_ACTION)
        entities.append(entity)
    return entities


def config_entity(p4info: P4Info, options: StreamingOptions) -> p4runtime_pb2.Entity:
    """`stream_config`'s default action: `set_stream_config(...)`, or `stream_off` when disabled."""
    if not options.enabled:
        return default_action_entity(p4info, CONFIG_TABLE, OFF_ACTION)
    return default_action_entity(p4info, CONFIG_TABLE, CONFIG_ACTION, options.config_params())


def streaming_updates(p4info: P4Info, options: StreamingOptions, ports: Iterable[int],
                      storage_ports: Iterable[int], exist: bool = False) -> list[p4runtime_pb2.Update]:
    """One Write's updates: the clone sessions and storage ports (INSERT, or MODIFY when they exist), then the
    default action (MODIFY). The sessions come first, so no chain ever clones to a session not there yet."""
    kind = p4runtime_pb2.Update.MODIFY if exist else p4runtime_pb2.Update.INSERT
    entities = clone_session_entities(ports) + storage_port_entities(p4info, storage_ports)
    updates = [p4runtime_pb2.Update(type=kind, entity=entity) for entity in entities]
    updates.append(p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=config_entity(p4info, options)))
    return updates


class Writer(Protocol):
    """What `configure_streaming` needs of a switch connection (`p4rt.connection.SwitchConnection`)."""

    p4info: P4Info

    def write(self, updates: Sequence[p4runtime_pb2.Update]) -> None: ...


def configure_streaming(switch: Writer, options: StreamingOptions, ports: Iterable[int],
                        storage_ports: Iterable[int]) -> None:
    """Install the sessions, the storage ports and the configuration; what an earlier controller left is
    modified instead. Disabled options only set `stream_off` (sessions and ports stay: harmless)."""
    if not options.enabled:
        switch.write([streaming_updates(switch.p4info, options, [], [])[-1]])
        return
    ports, storage_ports = list(ports), list(storage_ports)
    *inserts, config = streaming_updates(switch.p4info, options, ports, storage_ports)
    modifies = streaming_updates(switch.p4info, options, ports, storage_ports, exist=True)
    for insert, again in zip(inserts, modifies, strict=False):
        try:
            switch.write([insert])
        except P4RuntimeError as exc:
            if not exc.only("ALREADY_EXISTS"):
                raise
            switch.write([again])
    switch.write([config])


def set_streaming_sh(sh: Any, on: bool, ports: Iterable[int], storage_ports: Iterable[int],
                     options: StreamingOptions | None = None) -> None:
    """Streams on (`options`, default `StreamingOptions()`) or off through a p4runtime-shell handle (the module
    `p4runtime_sh.shell` after `setup`, as `kvtesting.vethnet`'s switch holds it): sessions and storage ports
    are inserted, or modified when they exist. Pass a fresh `epoch` each time streams go on, so no stream of
    an earlier run lives on."""
    p4info = P4Info(sh.context.p4info)
    options = options or StreamingOptions()
    if not on:
        options = StreamingOptions(idle_us=options.idle_us, epoch=options.epoch, enabled=False)
        sh.client.write_update(streaming_updates(p4info, options, [], [])[-1])
        return
    ports, storage_ports = list(ports), list(storage_ports)
    *inserts, config = streaming_updates(p4info, options, ports, storage_ports)
    modifies = streaming_updates(p4info, options, ports, storage_ports, exist=True)
    for insert, again in zip(inserts, modifies, strict=False):
        try:
            sh.client.write_update(insert)
        except Exception as exc:  # p4runtime-shell's P4RuntimeWriteException: the entity exists already
            if "ALREADY_EXISTS" not in str(exc):
                raise
            sh.client.write_update(again)
    sh.client.write_update(config)
