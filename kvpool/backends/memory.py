"""The `memory` backend: chunks in bounded DRAM, with an optional SQLite disk tier (the default backend).

DRAM holds each chunk's padded value (128 B .. 8 KiB, the block's chunk size); `capacity` bounds that. A
chunk's bytes are kept as one object and handed to the socket as they are (no copy per GET). A commit that does not fit in DRAM
goes to disk when there is a disk tier (new chunks beyond the room), else it is refused whole (ERR_FULL).
The disk tier is one SQLite file in its folder (`chunks.sqlite`); chunks found there at start-up are served
again, and a block's chunks reach the disk in one transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kvpool.backends.base import BlockState, Moved, NewChunk
from kvpool.constants import KVP_VALUE_LEN, Status, Tier
from kvpool.keys import BlockKey, ChunkKey


@dataclass(slots=True)
class StoredChunk:
    """A chunk the node holds; `value` is None while it lives on disk."""

    chunk_count: int
    value_len: int
    version: int
    csum: int
    tier: Tier
    value: bytes | None
    score: float = 0.0
    """Residual score the controller gave it with TIER_MOVE (kept for eviction-order decisions)."""
    size: int = KVP_VALUE_LEN
    """Bytes of the padded value (the block's chunk size): what the chunk costs in DRAM."""


@dataclass(slots=True)
class _BlockRow:
    """A block's chunks by index (None: not held), so a span GET reads its chunks without a key per chunk."""

    chunks: list[StoredChunk | None]
    held: int = 0
    """Entries that are not None: the row goes when the last one does."""


class DiskTier:
    """Chunks on disk: one SQLite table keyed by (tenant, prefix_hash, chunk_idx)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / "chunks.sqlite", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS chunk (tenant INTEGER, prefix_hash BLOB, chunk_idx INTEGER, "
            "chunk_count INTEGER, value_len INTEGER, version INTEGER, score REAL, value BLOB, "
            "PRIMARY KEY (tenant, prefix_hash, chunk_idx))")
        self._db.commit()
        self._batched = False

    @staticmethod
    def _ph(prefix_hash: int) -> bytes:
        return prefix_hash.to_bytes(8, "big")  # SQLite integers are signed 64-bit; a blob keeps all 64 bits

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes and deletes inside reach the file together (one SQLite commit), so a block never half-lands."""
        self._batched = True
        try:
            yield
        finally:
            self._batched = False
            self._db.commit()

    def _commit(self) -> None:
        if not self._batched:
            self._db.commit()

    def write(self, key: ChunkKey, chunk: StoredChunk, value: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO chunk VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (key.tenant, self._ph(key.prefix_hash), key.chunk, chunk.chunk_count, chunk.value_len,
                          chunk.version, chunk.score, value))
        self._commit()

    def read(self, key: ChunkKey) -> bytes:
        row = self._db.execute("SELECT value FROM chunk WHERE tenant=? AND prefix_hash=? AND chunk_idx=?",
                               (key.tenant, self._ph(key.prefix_hash), key.chunk)).fetchone()
        assert row is not None, f"disk index out of sync for {key}"
        return bytes(row[0])

    def delete(self, key: ChunkKey) -> None:
        self._db.execute("DELETE FROM chunk WHERE tenant=? AND prefix_hash=? AND chunk_idx=?",
                         (key.tenant, self._ph(key.prefix_hash), key.chunk))
        self._commit()

    def load(self) -> dict[ChunkKey, StoredChunk]:
        """Everything on disk, as index entries (value None) with the CRC computed from the stored bytes."""
        out = {}
        for tenant, ph, idx, count, vlen, version, score, value in self._db.execute("SELECT * FROM chunk"):
            key = ChunkKey(tenant, int.from_bytes(ph, "big"), idx)
            out[key] = StoredChunk(count, vlen, version, zlib.crc32(value), Tier.STORAGE_DISK, None, score,
                                   len(value))
        return out

    def close(self) -> None:
        self._db.close()


class MemoryBackend:
    """Committed chunks in a dict (DRAM tier, bounded by `capacity` bytes) and optionally a `DiskTier`."""

    name = "memory"

    def __init__(self, capacity: int, disk: Path | None = None) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0 bytes")
        self.capacity = capacity
        self.disk = DiskTier(disk) if disk is not None else None
        self.chunks: dict[ChunkKey, StoredChunk] = {}
        self.blocks: dict[BlockKey, BlockState] = {}
        self._rows: dict[BlockKey, _BlockRow] = {}
        """`chunks` again, by block and index (`read_span`); kept in step by `_place` and `_drop`."""
        self.dram_used = 0
        """Bytes of DRAM holding chunk values (the chunk size per DRAM chunk)."""
        if self.disk is not None:
            self.chunks.update(self.disk.load())
            for key, chunk in self.chunks.items():
                self._row_set(key, chunk)
                state = self.blocks.get(key.block)
                if state is None or chunk.version > state.version:
                    self.blocks[key.block] = BlockState(chunk.version, chunk.chunk_count)

    def newest(self, block: BlockKey) -> BlockState | None:
        return self.blocks.get(block)

    def chunk(self, key: ChunkKey) -> StoredChunk | None:
        return self.chunks.get(key)

    def read(self, key: ChunkKey) -> tuple[StoredChunk, bytes] | None:
        chunk = self.chunks.get(key)
        return None if chunk is None else (chunk, self._value(key, chunk))

    def read_span(self, block: BlockKey, first: int, count: int) -> list[tuple[StoredChunk, bytes] | None]:
        """`read` of chunks first .. first + count - 1 of `block`, in one call (a span GET's): from the block's
        row, without a `ChunkKey` made and hashed per chunk (most of the node's Python time per chunk)."""
        row = self._rows.get(block)
        if row is None:
            return [None] * count
        chunks, held = row.chunks, len(row.chunks)
        out: list[tuple[StoredChunk, bytes] | None] = []
        for idx in range(first, first + count):
            chunk = chunks[idx] if idx < held else None
            if chunk is None:
                out.append(None)
            else:
                value = chunk.value
                out.append((chunk, value if value is not None else self._value(block.chunk(idx), chunk)))
        return out

    def _row_set(self, key: ChunkKey, chunk: StoredChunk) -> None:
        block = key.block
        row = self._rows.get(block)
        if row is None:
            row = self._rows[block] = _BlockRow([])
        chunks = row.chunks
        if key.chunk >= len(chunks):
            chunks.extend([None] * (key.chunk + 1 - len(chunks)))
        if chunks[key.chunk] is None:
            row.held += 1
        chunks[key.chunk] = chunk

    def _row_clear(self, key: ChunkKey) -> None:
        block = key.block
        row = self._rows.get(block)
        if row is None or key.chunk >= len(row.chunks) or row.chunks[key.chunk] is None:
            return
        row.chunks[key.chunk] = None
        row.held -= 1
        if not row.held:
            del self._rows[block]

    def _value(self, key: ChunkKey, chunk: StoredChunk) -> bytes:
        if chunk.value is not None:
            return chunk.value
        assert self.disk is not None, "a disk-tier chunk without a disk tier"
        return self.disk.read(key)

    def commit(self, block: BlockKey, version: int, chunks: Sequence[NewChunk]) -> bool:
        count = len(chunks)
        keys = list(block.chunks(count))
        old = self.blocks.get(block)
        leftovers = [k for i in range(count, old.chunk_count if old else 0) if (k := block.chunk(i)) in self.chunks]
        size = len(chunks[0].value) if chunks else KVP_VALUE_LEN
        freed = sum(self.chunks[k].size for k in leftovers if self.chunks[k].tier == Tier.STORAGE_DRAM)
        # overwritten chunks stay in their tier but may change size (a new chunk size): free the old, charge new
        kept = [c for k in keys if (c := self.chunks.get(k)) is not None and c.tier == Tier.STORAGE_DRAM]
        freed += sum(c.size for c in kept)
        new = [k for k in keys if k not in self.chunks]
        room = max(0, self.capacity - self.dram_used + freed - len(kept) * size) // size
        if len(new) > room and self.disk is None:
            return False
        to_dram = set(new[:room])
        with self.disk.transaction() if self.disk is not None else contextlib.nullcontext():
            for key in leftovers:
                self._drop(key)
            for key, staged in zip(keys, chunks, strict=True):
                before = self.chunks.get(key)
                tier = before.tier if before is not None else (
                    Tier.STORAGE_DRAM if key in to_dram else Tier.STORAGE_DISK)
                chunk = StoredChunk(count, staged.value_len, version, staged.csum, tier, None,
                                    before.score if before else 0.0, size)
                self._place(key, chunk, staged.value)
        self.blocks[block] = BlockState(version, count)
        return True

    def _place(self, key: ChunkKey, chunk: StoredChunk, value: bytes) -> None:
        """Store `chunk` in its tier, releasing whatever the key held before."""
        self._drop(key)
        if chunk.tier == Tier.STORAGE_DRAM:
            chunk.value = value
            self.dram_used += chunk.size
        else:
            assert self.disk is not None
            chunk.value = None
            self.disk.write(key, chunk, value)
        self.chunks[key] = chunk
        self._row_set(key, chunk)

    def _drop(self, key: ChunkKey) -> None:
        old = self.chunks.pop(key, None)
        if old is None:
            return
        self._row_clear(key)
        if old.tier == Tier.STORAGE_DRAM:
            self.dram_used -= old.size
        elif self.disk is not None:
            self.disk.delete(key)

    def move(self, key: ChunkKey, target: Tier, score: float) -> Moved:
        chunk = self.chunks[key]
        if target == Tier.ABSENT:
            self._drop(key)
            return Moved(Status.OK, Tier.ABSENT)
        if target == Tier.STORAGE_DISK and self.disk is None:
            return Moved(Status.ERR_DENIED, chunk.tier)
        if target != chunk.tier:
            if target == Tier.STORAGE_DRAM and self.dram_used + chunk.size > self.capacity:
                return Moved(Status.ERR_FULL, chunk.tier)
            value = self._value(key, chunk)
            moved = StoredChunk(chunk.chunk_count, chunk.value_len, chunk.version, chunk.csum, target, None,
                                size=chunk.size)
            self._place(key, moved, value)
            chunk = moved
        chunk.score = score
        if chunk.tier == Tier.STORAGE_DISK and self.disk is not None:
            self.disk.write(key, chunk, self._value(key, chunk))  # persist the score with it
        return Moved(Status.OK, chunk.tier)

    def summary(self) -> dict[str, object]:
        tiers = Counter(c.tier.name for c in self.chunks.values())
        return {"backend": self.name, "chunks": dict(tiers), "dram_used": self.dram_used, "capacity": self.capacity}

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
