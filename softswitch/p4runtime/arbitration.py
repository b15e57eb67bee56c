"""Client arbitration (P4Runtime spec, "Client Arbitration and Controller Replication").

Per (device, role) the connected stream with the highest election id is the primary; only it may write,
set the pipeline or send packet-outs. Every change of primary is announced to every stream of the role.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

Notify = Callable[[p4runtime_pb2.StreamMessageResponse], None]


@dataclass
class Session:
    """One StreamChannel after its first arbitration message."""

    stream_id: int
    election_id: int
    role: str
    notify: Notify


def election_id(uint128: p4runtime_pb2.Uint128) -> int:
    return (uint128.high << 64) | uint128.low


class Arbitration:
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._sessions: dict[int, Session] = {}

    def primary(self, role: str = "") -> Session | None:
        with self._lock:
            return self._primary(role)

    def _primary(self, role: str) -> Session | None:
        live = [s for s in self._sessions.values() if s.role == role]
        return max(live, key=lambda s: s.election_id) if live else None

    def update(self, session: Session) -> str | None:
        """Register or re-register a stream; returns an error message if the election id is taken."""
        with self._lock:
            for s in self._sessions.values():
                if s.stream_id != session.stream_id and s.role == session.role \
                        and s.election_id == session.election_id:
                    return f"election id {session.election_id} is already used by another client"
            before = self._primary(session.role)
            self._sessions[session.stream_id] = session
            after = self._primary(session.role)
            targets = list(self._sessions.values()) if before is not after else [session]
        self._announce(targets, session.role)
        return None

    def remove(self, stream_id: int) -> None:
        with self._lock:
            gone = self._sessions.get(stream_id)
            if gone is None:
                return
            was_primary = self._primary(gone.role) is gone
            del self._sessions[stream_id]
            targets = [s for s in self._sessions.values() if s.role == gone.role]
        if was_primary and targets:
            self._announce(targets, gone.role)

    def is_primary(self, election: int, role: str = "") -> bool:
        p = self.primary(role)
        return p is not None and p.election_id == election

    def _announce(self, targets: list[Session], role: str) -> None:
        primary = self.primary(role)
        for s in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if role:
                arb.role.name = role
            if primary is not None:
                arb.election_id.high = primary.election_id >> 64
                arb.election_id.low = primary.election_id & ((1 << 64) - 1)
            if primary is s:
                arb.status.code = code_pb2.OK
                arb.status.message = "primary"
            elif primary is not None:
                arb.status.code = code_pb2.ALREADY_EXISTS
                arb.status.message = "a primary exists with a higher election id"
            else:
                arb.status.code = code_pb2.NOT_FOUND
                arb.status.message = "no primary"
            s.notify(msg)
