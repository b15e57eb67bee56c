"""Where a storage node keeps committed blocks: one module per backend, all implementing `StorageBackend`.

* `base`: the `StorageBackend` protocol and the types it speaks (`BlockState`, `NewChunk`, `ChunkMeta`, `Moved`).
* `memory`: DRAM + optional SQLite disk tier, in the node's process (the default; no dependency).
* `mooncake`: Mooncake Store over TCP (needs the `mooncake` package and a running `mooncake_master`).

`open_backend` is the registry by name (`python -m kvpool.server --backend NAME`); docs/storage-backends.md says
how to choose and run each.
"""

from __future__ import annotations

from pathlib import Path

from kvpool.backends.base import StorageBackend
from kvpool.backends.memory import MemoryBackend
from kvpool.backends.mooncake import MooncakeOptions, connect

BACKENDS = ("memory", "mooncake")
"""Names `open_backend` knows, the default first."""


def open_backend(name: str, *, capacity: int, disk: Path | None = None,
                 mooncake: MooncakeOptions | None = None) -> StorageBackend:
    """The backend `name`, holding up to `capacity` bytes (memory: DRAM tier; mooncake: the segment this node
    gives the pool). Raises ValueError for an unknown name or an option the backend lacks, and
    `mooncake.BackendUnavailable` when Mooncake is missing or unreachable."""
    if name == "memory":
        return MemoryBackend(capacity, disk)
    if name == "mooncake":
        if disk is not None:
            raise ValueError("--disk is the memory backend's disk tier; the mooncake backend has none")
        return connect(mooncake or MooncakeOptions(), capacity)
    raise ValueError(f"unknown storage backend {name!r} (known: {', '.join(BACKENDS)})")
