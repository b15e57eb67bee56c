"""Packet replication engine configuration: multicast groups and clone (mirror) sessions, as BMv2 keeps them.

The per-packet use (which copies, with which `instance_type`) lives in `switch.py`; this module only holds and
validates the control plane's view. `instance_type` values are BMv2 simple_switch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from softswitch.target import DROP_PORT, Replica, TargetError

# standard_metadata.instance_type, as behavioral-model simple_switch numbers them
PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_COALESCED = 3
PKT_INSTANCE_TYPE_RECIRC = 4
PKT_INSTANCE_TYPE_REPLICATION = 5
PKT_INSTANCE_TYPE_RESUBMIT = 6

MAX_GROUP_ID = 0xFFFF
"""mcast_grp is bit<16>; group 0 means "no multicast"."""
MAX_SESSION_ID = 0xFFFF
"""clone session ids as P4Runtime/BMv2 accept them (v1model passes a bit<32>, BMv2 masks to 16 bits)."""
MAX_PORT = DROP_PORT


@dataclass(frozen=True, slots=True)
class CloneSession:
    replicas: tuple[Replica, ...]
    truncate: int = 0
    """bytes kept of each copy (0: whole packet), P4Runtime `packet_length_bytes`"""


def _check_replicas(what: str, replicas: Sequence[Replica]) -> tuple[Replica, ...]:
    seen = set()
    for r in replicas:
        if not isinstance(r, Replica):
            raise TargetError("INVALID_ARGUMENT", f"{what}: replicas must be Replica, got {type(r).__name__}")
        if not 0 <= r.port < MAX_PORT:
            raise TargetError("INVALID_ARGUMENT", f"{what}: port {r.port} out of range [0, {MAX_PORT})")
        if not 0 <= r.rid <= 0xFFFF:
            raise TargetError("INVALID_ARGUMENT", f"{what}: rid {r.rid} does not fit bit<16>")
        if (r.port, r.rid) in seen:
            raise TargetError("INVALID_ARGUMENT", f"{what}: duplicate replica (port {r.port}, rid {r.rid})")
        seen.add((r.port, r.rid))
    return tuple(replicas)


class ReplicationEngine:
    """Multicast groups (group id → replicas) and clone sessions (session id → replicas, truncation)."""

    def __init__(self) -> None:
        self.groups: dict[int, tuple[Replica, ...]] = {}
        self.sessions: dict[int, CloneSession] = {}

    def group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        """Create or replace a group (P4Runtime INSERT/MODIFY are both this)."""
        if not 1 <= group_id <= MAX_GROUP_ID:
            raise TargetError("INVALID_ARGUMENT", f"multicast group id {group_id} not in [1, {MAX_GROUP_ID}]")
        self.groups[group_id] = _check_replicas(f"multicast group {group_id}", replicas)

    def group_delete(self, group_id: int) -> None:
        if self.groups.pop(group_id, None) is None:
            raise TargetError("NOT_FOUND", f"multicast group {group_id} does not exist")

    def session_set(self, session_id: int, replicas: Sequence[Replica], truncate: int = 0) -> None:
        if not 1 <= session_id <= MAX_SESSION_ID:
            raise TargetError("INVALID_ARGUMENT", f"clone session id {session_id} not in [1, {MAX_SESSION_ID}]")
        if truncate < 0:
            raise TargetError("INVALID_ARGUMENT", f"clone session {session_id}: negative truncation")
        self.sessions[session_id] = CloneSession(_check_replicas(f"clone session {session_id}", replicas), truncate)

    def session_delete(self, session_id: int) -> None:
        if self.sessions.pop(session_id, None) is None:
            raise TargetError("NOT_FOUND", f"clone session {session_id} does not exist")

    def replicas(self, group_id: int) -> tuple[Replica, ...]:
        """Replicas of a group; an unknown group replicates to nobody (BMv2 logs and drops)."""
        return self.groups.get(group_id, ())

    def session(self, session_id: int) -> CloneSession | None:
        return self.sessions.get(session_id & 0xFFFF)
