"""One exception type for everything a P4 target refuses, carrying the per-update errors of a P4Runtime batch.

`TargetError` is any refusal with its canonical code name (the in-process softswitch `Target` raises it);
`P4RuntimeError` is the same refusal seen by a P4Runtime client (the controller's connection and the test
harness's session alike), with the gRPC status of the call and the failed updates. BMv2 and our softswitch both
report a failed Write as gRPC UNKNOWN with a `google.rpc.Status` in the `grpc-status-details-bin` trailer holding
one `p4.v1.Error` per update (OK for the ones that succeeded); other RPC failures come as a plain status code and
message.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2


@dataclass(frozen=True, slots=True)
class UpdateError:
    """The failure of one update in a Write batch."""

    index: int
    """Position of the update in the batch."""
    code: str
    """Canonical code name, e.g. ALREADY_EXISTS, NOT_FOUND."""
    message: str


class TargetError(Exception):
    """A request the target refuses; `code` is the P4Runtime/gRPC canonical code name it maps to
    ("INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED", ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class P4RuntimeError(TargetError):
    """A P4Runtime RPC failed. `status` and `details` are the call's gRPC status name and message, `updates` the
    failed updates of a Write; `code` and `message` are the refusal's: the first failed update's, else the call's."""

    def __init__(self, status: str, details: str, updates: tuple[UpdateError, ...] = ()) -> None:
        first = updates[0] if updates else None
        super().__init__(status if first is None else first.code, details if first is None else first.message)
        self.status = status
        self.details = details
        self.updates = updates

    def __str__(self) -> str:
        detail = "; ".join(f"update {u.index}: {u.code} {u.message}" for u in self.updates)
        return f"{self.status}: {self.details}" + (f" [{detail}]" if detail else "")

    def only(self, code: str) -> bool:
        """True when every failed update has `code` (e.g. ALREADY_EXISTS on a replayed insert)."""
        if self.updates:
            return all(u.code == code for u in self.updates)
        return self.status == code

    @classmethod
    def from_grpc(cls, exc: grpc.RpcError) -> P4RuntimeError:
        status = exc.code().name if hasattr(exc, "code") and exc.code() else "UNKNOWN"
        message = exc.details() if hasattr(exc, "details") else str(exc)
        return cls(status, message or "", _update_errors(exc))


def _update_errors(exc: grpc.RpcError) -> tuple[UpdateError, ...]:
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailing or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status()
        status.ParseFromString(value)
        found = []
        for index, detail in enumerate(status.details):
            error = p4runtime_pb2.Error()
            if not detail.Unpack(error) or error.canonical_code == code_pb2.OK:
                continue
            name = code_pb2.Code.Name(error.canonical_code) if error.canonical_code in code_pb2.Code.values() else str(error.canonical_code)
            found.append(UpdateError(index, name, error.message))
        return tuple(found)
    return ()
