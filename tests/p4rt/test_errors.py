"""One error type: a P4Runtime client's refusal is a `TargetError` with the first failed update's code."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from p4rt.errors import P4RuntimeError, TargetError, UpdateError
from softswitch.target import TargetError as SoftswitchTargetError


class FailedCall(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, updates=()) -> None:
        self._code, self._details = code, details
        status = status_pb2.Status(code=code_pb2.UNKNOWN)
        for canonical, message in updates:
            detail = any_pb2.Any()
            detail.Pack(p4runtime_pb2.Error(canonical_code=canonical, message=message))
            status.details.append(detail)
        self._trailer = status.SerializeToString() if updates else None

    def code(self):
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return [("grpc-status-details-bin", self._trailer)] if self._trailer else []


def test_a_failed_batch_reports_its_first_failed_update_as_the_refusal():
    call = FailedCall(grpc.StatusCode.UNKNOWN, "batch failed",
                      [(code_pb2.OK, ""), (code_pb2.ALREADY_EXISTS, "entry exists"), (code_pb2.NOT_FOUND, "gone")])
    error = P4RuntimeError.from_grpc(call)
    assert isinstance(error, TargetError) and TargetError is SoftswitchTargetError
    assert (error.code, error.message) == ("ALREADY_EXISTS", "entry exists")
    assert (error.status, error.details) == ("UNKNOWN", "batch failed")
    assert error.updates == (UpdateError(1, "ALREADY_EXISTS", "entry exists"), UpdateError(2, "NOT_FOUND", "gone"))
    assert not error.only("ALREADY_EXISTS") and str(error).startswith("UNKNOWN: batch failed [update 1:")


def test_a_call_without_update_errors_is_refused_with_its_own_code():
    error = P4RuntimeError.from_grpc(FailedCall(grpc.StatusCode.UNAVAILABLE, "switch went away"))
    assert (error.code, error.status, error.message, error.updates) == ("UNAVAILABLE", "UNAVAILABLE",
                                                                        "switch went away", ())
    assert error.only("UNAVAILABLE")
