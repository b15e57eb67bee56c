"""What a connector is told in the engine's config (vLLM: `kv_connector_extra_config`), checked at start-up.

    {"pool": "10.0.0.200:7420", "block_tokens": 256, "timeout_s": 0.2, "retries": 2, "chunk_size": "auto",
     "probe": "stat", "model_name": "kvswitch/tiny", "salt": "", "load_workers": 4, "save_queue": 64,
     "stats_dir": null}

Unknown keys are refused with the list of known ones: a misspelt option must not silently fall back to a
default (a wrong `block_tokens` would only show as a pool that never hits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from connectors.store import PROBE_OPCODES


@dataclass(frozen=True, slots=True)
class ConnectorOptions:
    """A connector's settings; every field but `pool` has a default."""

    pool: str
    """The pool's address, "HOST:PORT" (the storage node, or the pool address the switch serves)."""
    block_tokens: int = 256
    """Tokens per pool block (a whole number of engine blocks)."""
    timeout_s: float = 0.2
    """Seconds per try of a pool request."""
    retries: int = 2
    """Resends of a pool request before the pool counts as down."""
    chunk_size: int | str | None = "auto"
    """Bytes per KVP chunk of written blocks: 128 .. 8192, null for the client's default (fits a 1,500-byte
    MTU), "auto": 8 KiB on loopback, else the default."""
    probe: str = "stat"
    """How the scheduler asks which blocks the pool holds: "stat" or "lookup_meta" (`connectors.store`)."""
    model_name: str | None = None
    """The model's name in its identity; default: the engine's served model name. Engines that generated
    the same preset in different folders set the same name to share blocks."""
    salt: str = ""
    """Tenant salt of every block (requests may add their own cache salt)."""
    save_queue: int = 64
    """Pool blocks waiting to be written; a save beyond is dropped (and counted), never waited for."""
    load_workers: int = 4
    """Blocks of one request read side by side (`connectors.fetch`)."""
    saver_nice: int = 10
    """CPU priority of the saver process below the engine's (`nice` increment; 0: the same)."""
    save: bool = True
    """Write new blocks to the pool (off: read only)."""
    load: bool = True
    """Read blocks from the pool (off: write only)."""
    bypass: bool = False
    """Set F_BYPASS: switches neither answer nor fill (the "storage node only" baseline)."""
    stats_dir: str | None = None
    """Folder where each side writes its counters as JSON (`<role>-<pid>.json`), for tests and benchmarks."""

    def __post_init__(self) -> None:
        if not isinstance(self.pool, str) or not self.pool:
            raise ValueError('the pool address is missing: kv_connector_extra_config {"pool": "HOST:PORT"}')
        if (self.block_tokens <= 0 or self.timeout_s <= 0 or self.retries < 0 or self.save_queue < 1
                or self.load_workers < 1 or not 0 <= self.saver_nice <= 19):
            raise ValueError("block_tokens, timeout_s, save_queue and load_workers must be positive, retries >= 0, "
                             "saver_nice 0..19")
        if self.probe not in PROBE_OPCODES:
            raise ValueError(f"probe must be one of {', '.join(PROBE_OPCODES)}, got {self.probe!r}")
        if isinstance(self.chunk_size, str) and self.chunk_size != "auto":
            raise ValueError(f'chunk_size must be bytes, null or "auto", got {self.chunk_size!r}')

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> ConnectorOptions:
        """Options from the engine's extra config; ValueError naming the unknown keys."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown connector option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "pool" not in config:
            raise ValueError('the pool address is missing: kv_connector_extra_config {"pool": "HOST:PORT"}')
        return cls(**dict(config))
