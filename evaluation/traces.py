"""Load LLM-serving KV-cache traces (Mooncake FAST'25 JSON Lines) into typed requests.

Every problem in a trace file is an error naming `file:line`: a replay that silently skips lines would report
hit ratios for a trace nobody asked about.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

BLOCK_TOKENS = 512
"""Tokens per block in the Mooncake traces (upstream: each hash id covers 512 tokens)."""

TRACES_ENV = "KVSWITCH_TRACES"
"""Environment variable naming the folder that holds `mooncake/…` (the shared traces folder)."""

REQUIRED_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class TraceError(ValueError):
    """A user-visible problem with a trace file, printed as `file:line: message`."""

    def __init__(self, path: str | os.PathLike[str], line: int, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        super().__init__(f"{self.path}:{line}: {message}")


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request: when it arrived and which prefix blocks its prompt consists of."""

    arrival_s: float
    """Arrival time in seconds from the start of the trace."""
    input_tokens: int
    """Prompt length in tokens."""
    output_tokens: int
    """Generated length in tokens."""
    blocks: tuple[int, ...]
    """Chained prefix-block ids, first block first; equal ids are reusable KV blocks."""
    session: int = -1
    """Conversation id when the source knows it (synthetic traces), -1 otherwise."""

    def block_tokens(self, index: int, block_tokens: int = BLOCK_TOKENS) -> int:
        """Tokens covered by block `index`; the last block of a prompt may be partial."""
        if index < len(self.blocks) - 1:
            return block_tokens
        rest = self.input_tokens - block_tokens * (len(self.blocks) - 1)
        return max(1, min(block_tokens, rest))


@dataclass(frozen=True)
class Trace:
    """A named, time-ordered list of requests."""

    name: str
    requests: tuple[Request, ...]

    @property
    def block_references(self) -> int:
        return sum(len(r.blocks) for r in self.requests)

    @property
    def unique_blocks(self) -> int:
        return len({b for r in self.requests for b in r.blocks})

    @property
    def duration_s(self) -> float:
        return self.requests[-1].arrival_s - self.requests[0].arrival_s if self.requests else 0.0

    def head(self, n: int) -> Trace:
        """The first `n` requests (for quick runs and excerpts)."""
        return Trace(f"{self.name}[:{n}]", self.requests[:n])


def _int_field(record: dict, field: str, path: Path, line: int, minimum: int = 0) -> int:
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(path, line, f"field {field!r} must be an integer, got {value!r}")
    if value < minimum:
        raise TraceError(path, line, f"field {field!r} must be ≥ {minimum}, got {value}")
    return value


def parse_lines(lines: Iterable[str], path: str | os.PathLike[str] = "<trace>",
                block_tokens: int = BLOCK_TOKENS, time_unit_s: float = 1e-3) -> Iterator[Request]:
    """Parse Mooncake JSON Lines into requests, checking every field and the time order; blank lines are errors.

    `time_unit_s` converts the `timestamp` field to seconds (Mooncake: milliseconds).
    """
    path = Path(path)
    previous_ms: float | None = None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            raise TraceError(path, number, "empty line (a trace has one JSON object per line)")
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(path, number, f"invalid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(record, dict):
            raise TraceError(path, number, f"expected a JSON object, got {type(record).__name__}")
        missing = [f for f in REQUIRED_FIELDS if f not in record]
        if missing:
            raise TraceError(path, number, f"missing field(s) {', '.join(missing)}")
        stamp = record["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
            raise TraceError(path, number, f"field 'timestamp' must be a finite number, got {stamp!r}")
        if previous_ms is not None and stamp < previous_ms:
            raise TraceError(path, number,
                             f"timestamp {stamp} is earlier than the previous line's {previous_ms} "
                             "(traces must be in arrival order)")
        previous_ms = stamp
        input_tokens = _int_field(record, "input_length", path, number, minimum=1)
        output_tokens = _int_field(record, "output_length", path, number)
        ids = record["hash_ids"]
        if not isinstance(ids, list) or not ids:
            raise TraceError(path, number, f"field 'hash_ids' must be a non-empty list, got {ids!r}")
        if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise TraceError(path, number, "field 'hash_ids' must hold integers only")
        expected = math.ceil(input_tokens / block_tokens)
        if len(ids) != expected:
            raise TraceError(path, number,
                             f"{len(ids)} hash_ids for input_length {input_tokens}; expected "
                             f"ceil({input_tokens}/{block_tokens}) = {expected}")
        session = record.get("session", -1)
        yield Request(stamp * time_unit_s, input_tokens, output_tokens, tuple(ids),
                      session if isinstance(session, int) else -1)


def load_trace(path: str | os.PathLike[str], limit: int | None = None, block_tokens: int = BLOCK_TOKENS) -> Trace:
    """Read a whole trace file (or its first `limit` requests); raises TraceError or FileNotFoundError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such trace file")
    requests: list[Request] = []
    with path.open(encoding="utf-8") as handle:
        for request in parse_lines(handle, path, block_tokens):
            requests.append(request)
            if limit is not None and len(requests) >= limit:
                break
    if not requests:
        raise TraceError(path, 1, "trace is empty")
    return Trace(path.stem, tuple(requests))


def default_trace_path(name: str = "conversation_trace.jsonl", environ: dict[str, str] | None = None) -> Path:
    """The full Mooncake trace: `$KVSWITCH_TRACES/mooncake/<name>`, else the shared folder next to the repo."""
    environ = dict(os.environ if environ is None else environ)
    root = environ.get(TRACES_ENV)
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "traces"
    return base / "mooncake" / name


def excerpt_path() -> Path:
    """The small excerpt shipped in the repository (first requests of the conversation trace)."""
    return Path(__file__).resolve().parents[1] / "data" / "traces" / "mooncake_conversation_excerpt.jsonl"
