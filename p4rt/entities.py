"""Target-neutral P4Runtime entities in Python terms: match values, table entries, replicas.

P4 objects are named as P4Info names them (fully qualified, or by alias where the user resolves it), values
are unsigned Python ints already masked to their field's width. The controller builds these, the codec
(`p4rt.codec`) turns them into protobuf with P4Info's ids, and the softswitch's executor takes them as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True, slots=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class OptionalMatch:
    value: int


Match = Exact | Lpm | Ternary | Range | OptionalMatch
"""A missing key field in `TableEntry.match` is a wildcard ("don't care"), as in P4Runtime."""


@dataclass(frozen=True, slots=True)
class TableEntry:
    table: str
    match: Mapping[str, Match]
    action: str
    params: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0
    """Higher wins (P4Runtime convention); required > 0 for tables with ternary/range/optional keys."""


@dataclass(frozen=True, slots=True)
class Replica:
    port: int
    rid: int = 0
    """egress_rid of the copy (v1model: standard_metadata.egress_rid)."""
