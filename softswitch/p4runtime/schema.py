"""What P4Info describes of a program: its control-plane objects, independent of the front end's IR.

P4Info generation (`p4info.py`) reads only these frozen dataclasses, so it can be tested without a parser
and the adapter from the front end's typed IR (`from_ir.py`) stays one small module. Names are fully
qualified control-plane names (`MyIngress.ipv4_lpm`), after `@name` annotations have been applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Named:
    """Preamble data every P4Info object carries."""

    name: str
    """Fully qualified control-plane name."""
    fixed_id: int | None = None
    """From `@id(N)`; used verbatim (with the type prefix added if N has none), else derived from the name."""
    brief: str = ""
    """From `@brief("...")`; goes to `preamble.doc.brief`."""
    annotations: tuple[str, ...] = ()
    """Other annotations as P4 source text (`@hidden`), copied to `preamble.annotations`."""
    id_name: str | None = None
    """The text p4c hashes into the id when it is not `name` (a controller header's id comes from its
    header type's name, `packet_in_h`, while its P4Info name is `packet_in`)."""


@dataclass(frozen=True, slots=True)
class MatchField:
    name: str
    """The key's `@name` or its expression text (`hdr.ipv4.dst_addr`)."""
    bitwidth: int
    match_type: str
    """`exact`, `lpm`, `ternary`, `range` or `optional`."""
    fixed_id: int | None = None


@dataclass(frozen=True, slots=True)
class ActionRef:
    name: str
    scope: str = "TABLE_AND_DEFAULT"
    """`TABLE_AND_DEFAULT`, `TABLE_ONLY` (`@tableonly`) or `DEFAULT_ONLY` (`@defaultonly`)."""
    annotations: tuple[str, ...] = ()
    """`@tableonly` / `@defaultonly` as written (p4c copies them to the action ref)."""


@dataclass(frozen=True, slots=True)
class Table:
    named: Named
    match_fields: tuple[MatchField, ...]
    action_refs: tuple[ActionRef, ...]
    size: int = 1024
    """v1model's default when the program gives no `size`."""
    const_default_action: str | None = None
    """Set when `default_action` is declared `const`."""
    is_const: bool = False
    """`const entries` (the control plane cannot change entries)."""
    has_initial_entries: bool = False
    direct_counter: str | None = None
    """Name of the `direct_counter` attached with `counters = ...`."""
    direct_meter: str | None = None
    support_timeout: bool = False
    initial_default_action: str | None = None
    """The action a new table runs on a miss (the program's `default_action`, else `NoAction`)."""
    initial_default_args: tuple[int, ...] = ()
    """Its action data, one value per parameter in declaration order."""


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    bitwidth: int
    fixed_id: int | None = None


@dataclass(frozen=True, slots=True)
class Action:
    named: Named
    params: tuple[Param, ...] = ()


@dataclass(frozen=True, slots=True)
class Counter:
    named: Named
    unit: str
    """`PACKETS`, `BYTES` or `BOTH` (v1model's `packets_and_bytes`)."""
    size: int


@dataclass(frozen=True, slots=True)
class DirectCounter:
    named: Named
    unit: str
    table: str


@dataclass(frozen=True, slots=True)
class Meter:
    named: Named
    unit: str
    """`PACKETS` or `BYTES`."""
    size: int


@dataclass(frozen=True, slots=True)
class DirectMeter:
    named: Named
    unit: str
    table: str


@dataclass(frozen=True, slots=True)
class Register:
    named: Named
    bitwidth: int
    size: int


@dataclass(frozen=True, slots=True)
class Digest:
    named: Named
    """Named after the digested struct type, as p4c does."""
    fields: tuple[tuple[str, int], ...]
    """(member name, bitwidth) in declaration order."""
    field_enums: tuple[tuple[str, str], ...] = ()
    """(member name, serializable enum name) for the members typed with a serializable enum."""


@dataclass(frozen=True, slots=True)
class ControllerHeader:
    named: Named
    """Named `packet_in` / `packet_out` after `@controller_header("...")`."""
    fields: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class SerializableEnum:
    """`enum bit<W> E { A = 1, ... }`, listed when a P4Info object (key, action parameter, controller-header or
    digest field) has that type, as p4c does: the controller reads the codes from here."""

    name: str
    bitwidth: int
    members: tuple[tuple[str, int], ...]
    """(member name, value) in declaration order."""


@dataclass(frozen=True, slots=True)
class Program:
    """All control-plane objects of one program."""

    name: str = "program"
    tables: tuple[Table, ...] = ()
    actions: tuple[Action, ...] = ()
    counters: tuple[Counter, ...] = ()
    direct_counters: tuple[DirectCounter, ...] = ()
    meters: tuple[Meter, ...] = ()
    direct_meters: tuple[DirectMeter, ...] = ()
    registers: tuple[Register, ...] = ()
    digests: tuple[Digest, ...] = ()
    controller_headers: tuple[ControllerHeader, ...] = ()
    serializable_enums: tuple[SerializableEnum, ...] = ()
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
