"""What a KVP request can fail with, on the client's side (one exception family for every refusal and timeout)."""

from __future__ import annotations

from kvpool.constants import Status


class KVPError(Exception):
    """A request failed: a refusal from the peer (`status` set), a wrong reply, or a timeout."""

    def __init__(self, message: str, status: Status | None = None) -> None:
        super().__init__(message)
        self.status = status


class KVPTimeout(KVPError):
    """No (valid) reply after all retries."""


class BlockNotFound(KVPError):
    """GET answered MISS: the block is stored nowhere the request reached."""
