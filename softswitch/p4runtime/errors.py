"""The one error type of the P4Runtime layer: a canonical gRPC code plus a message for the client."""

from __future__ import annotations

import grpc

from p4rt import bytestrings


class P4RuntimeError(Exception):
    """A request the server refuses; `code` is a `grpc.StatusCode` (INVALID_ARGUMENT, NOT_FOUND, ...)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def from_target_code(name: str) -> grpc.StatusCode:
    """Map `softswitch.target.TargetError.code` (a canonical code name) to a `grpc.StatusCode`."""
    return getattr(grpc.StatusCode, name, grpc.StatusCode.UNKNOWN)


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def decode_bytestring(data: bytes, bitwidth: int, what: str) -> int:
    """`p4rt.bytestrings.decode` with the spec's checks, its refusals as this server's errors."""
    try:
        return bytestrings.decode(data, bitwidth, what)
    except bytestrings.BytestringError as e:
        raise P4RuntimeError(from_target_code(e.code), e.message) from None
