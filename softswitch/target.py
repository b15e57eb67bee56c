"""The in-process target interface: what a loaded P4 program offers to the P4Runtime server, tests and tools.

This is the seam between the executor (`softswitch.runtime`) and everything that drives it
(`softswitch.p4runtime`, tests, the controller's unit tests). It names P4 objects the way P4Info does
(fully qualified: `MyIngress.kv_index`, key fields by their `@name` or expression text, e.g. `hdr.kvp.tenant`),
and carries values as Python ints (unsigned, already masked to the field's width).

The CPU port is an ordinary port here, exactly as on BMv2: a packet sent to it leaves with the
`@controller_header("packet_in")` header that the deparser emitted; a packet-out is a packet arriving on it
that starts with the `packet_out` header. The P4Runtime layer adds and strips those headers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# Match values, table entries and replicas are target-neutral P4Runtime types (the controller uses them too).
from p4rt.entities import Exact, Lpm, Match, OptionalMatch, Range, Replica, TableEntry, Ternary

# One error type for every target, in-process or over P4Runtime (p4rt.errors.P4RuntimeError is a TargetError).
from p4rt.errors import TargetError

__all__ = ["DROP_PORT", "DigestMessage", "Exact", "Lpm", "Match", "OptionalMatch", "Range", "Replica", "TableEntry",
           "Target", "TargetError", "Ternary"]

DROP_PORT = 511
"""v1model's drop port for a 9-bit egress_spec (BMv2's default)."""


__all__ = ["DROP_PORT", "DigestMessage", "Exact", "Lpm", "Match", "OptionalMatch", "Range", "Replica", "TableEntry",
           "Target", "TargetError", "Ternary"]


@dataclass(frozen=True, slots=True)
class DigestMessage:
    """One `digest<T>(receiver, data)` call: `name` is the type name T as P4Info names the digest."""

    name: str
    fields: tuple[tuple[str, int], ...]
    """(field name, value) in declaration order; widths come from the program's type of T."""


class Target(Protocol):
    """A loaded v1model program, ready to take table entries and packets."""

    cpu_port: int | None

    # -- packets
    def process(self, ingress_port: int, data: bytes) -> list[tuple[int, bytes]]:
        """Run one packet through parser → ingress → traffic manager → egress → deparser.

        Returns every resulting (egress_port, bytes), clones, multicast copies and recirculations resolved.
        Never raises on packet contents: malformed packets take the program's parser-error path.
        """
        ...

    def drain_digests(self) -> list[DigestMessage]: ...

    # -- tables
    def table_insert(self, entry: TableEntry) -> None: ...
    def table_modify(self, entry: TableEntry) -> None: ...
    def table_delete(self, table: str, match: Mapping[str, Match], priority: int = 0) -> None: ...
    def table_entries(self, table: str) -> Sequence[TableEntry]: ...
    def table_set_default(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None: ...
    def table_get_default(self, table: str) -> tuple[str, Mapping[str, int]]: ...

    # -- externs (counters return (packets, bytes))
    def register_read(self, name: str, index: int) -> int: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...
    def counter_write(self, name: str, index: int, packets: int, bytes_: int) -> None: ...
    def direct_counter_read(self, table: str, match: Mapping[str, Match], priority: int = 0) -> tuple[int, int]: ...
    def meter_set(self, name: str, index: int, cir: float, cburst: int, pir: float, pburst: int) -> None: ...
    def meter_clear(self, name: str, index: int) -> None: ...

    # -- packet replication engine
    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None: ...
    def mcast_group_delete(self, group_id: int) -> None: ...
    def clone_session_set(self, session_id: int, replicas: Sequence[Replica], truncate: int = 0) -> None: ...
    def clone_session_delete(self, session_id: int) -> None: ...
