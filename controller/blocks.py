"""Operator actions on whole blocks (`TENANT:PREFIX`): every chunk of the block, as the storage node holds it.

The switch pool works on chunks; an operator thinks in blocks. A block's chunks are 0 .. chunk_count-1, with
chunk_count read from the storage node (chunk 0's GET_REPLY), else the chunks the controller tracks. Pinning
something that exists nowhere is refused with the reason (unless forced); chunks beyond the block's current
chunk_count (left over when the block was rewritten shorter) are evicted when the block is pinned or shown.
Versions reported are the ones the storage node holds (read from it), not what a client announced.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.pool import PinError, PoolManager
from kvpool.keys import BlockKey, ChunkKey


class UnknownBlock(KeyError):
    """Neither the storage node nor the controller knows the block (or chunk)."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class BlockView:
    block: BlockKey
    chunk_count: int
    """Chunks of the block now (0: unknown)."""
    stored: bool
    """The storage node answered for chunk 0 (so chunk_count and versions are its)."""
    chunks: tuple[ChunkKey, ...]
    """The chunks to act on: 0 .. chunk_count-1, or the tracked ones when the storage node does not know it."""
    orphans: tuple[ChunkKey, ...]
    """Tracked chunks at or beyond chunk_count: left over from a longer earlier version."""


class BlockOps:
    """Block-level pin, unpin, evict and show over a `PoolManager`."""

    def __init__(self, pool: PoolManager) -> None:
        self.pool = pool

    def _known_chunks(self, block: BlockKey) -> list[ChunkKey]:
        with self.pool.locked():
            keys = {k for k in self.pool.tracked if k.block == block}
            keys |= {k for k, _ in self.pool.slots.items() if isinstance(k, ChunkKey) and k.block == block}
            keys |= {p.key for p in self.pool.pins.all() if isinstance(p.key, ChunkKey) and p.key.block == block}
        return sorted(keys)

    def view(self, block: BlockKey, refresh_versions: bool = False) -> BlockView:
        """The block's chunks as the storage node reports them (`refresh_versions`: read every chunk's version)."""
        pool = self.pool
        first = pool.mover.fetch(block.chunk(0))
        known = self._known_chunks(block)
        if first is None:
            return BlockView(block, 0, False, tuple(known), ())
        count = first.chunk_count
        chunks = tuple(block.chunks(count))
        with pool.locked():
            now = pool.clock()
            pool.track(block.chunk(0), now).version = max(pool.track(block.chunk(0), now).version, first.version)
            pool.tracked[block.chunk(0)].chunk_count = count
        if refresh_versions:
            for key in chunks[1:]:
                stored = pool.mover.fetch(key)
                if stored is not None:
                    with pool.locked():
                        entry = pool.track(key, now)
                        entry.version, entry.chunk_count = max(entry.version, stored.version), stored.chunk_count
        return BlockView(block, count, True, chunks, tuple(k for k in known if k.chunk >= count))

    def _chunk_known(self, key: ChunkKey) -> bool:
        with self.pool.locked():
            if key in self.pool.tracked or key in self.pool.slots:
                return True
        return self.pool.mover.fetch(key) is not None

    def evict_orphans(self, view: BlockView) -> list[str]:
        """Unpin and evict the chunks a shrunk block no longer has; their names."""
        gone = []
        for key in view.orphans:
            self.pool.unpin(key)
            if key in self.pool.slots:
                self.pool.evict(key, f"orphan: {view.block} now has {view.chunk_count} chunk(s)")
                gone.append(str(key))
        return gone

    # ---- actions

    def pin(self, key: BlockKey | ChunkKey, ttl: float | None, force: bool = False) -> dict:
        if isinstance(key, ChunkKey):
            if not force and not self._chunk_known(key):
                raise UnknownBlock(f"{key} is unknown: the storage node holds no such chunk and the controller never "
                                   "saw it (--force pins it anyway)")
            pin = self.pool.pin(key, ttl)
            return {"key": str(key), "kind": pin.kind, "expires_at": pin.expires_at, "chunks": [str(key)]}
        view = self.view(key)
        chunks = view.chunks
        if not view.stored:
            if not force:
                raise UnknownBlock(f"block {key} is unknown: the storage node holds no chunk 0 of it"
                                   + (" (the controller tracks some of its chunks)" if chunks else "")
                                   + "; --force pins it anyway")
            chunks = chunks or (key.chunk(0),)
        orphans = self.evict_orphans(view)
        pinned: list[str] = []
        kind, expires = "hard", None
        for chunk in chunks:
            try:
                pin = self.pool.pin(chunk, ttl)
            except PinError as exc:
                raise PinError(f"{exc} (pinned {len(pinned)} of {len(chunks)} chunks of {key})") from None
            pinned.append(str(chunk))
            kind, expires = pin.kind, pin.expires_at
        return {"key": str(key), "kind": kind, "expires_at": expires, "chunks": pinned, "chunk_count": view.chunk_count,
                "orphans_evicted": orphans}

    def unpin(self, key: BlockKey | ChunkKey) -> dict:
        chunks = [key] if isinstance(key, ChunkKey) else self._known_chunks(key)
        unpinned = [str(c) for c in chunks if self.pool.unpin(c)]
        if not unpinned:
            raise KeyError(f"{key} is not pinned")
        return {"key": str(key), "unpinned": True, "chunks": unpinned}

    def evict(self, key: BlockKey | ChunkKey) -> dict:
        if isinstance(key, ChunkKey):
            decision = self.pool.evict(key)
            outcome = [d for d in self.pool.recent_decisions(5) if d["key"] == str(decision.key)][-1]
            return {"key": str(decision.key), "slot": decision.slot, "reason": decision.reason, "outcome": outcome,
                    "chunks": [str(decision.key)]}
        resident = [c for c in self._known_chunks(key) if c in self.pool.slots]
        if not resident:
            raise KeyError(f"no chunk of block {key} is in the switch pool")
        pinned = [str(c) for c in resident if self.pool.pins.get(c, self.pool.clock()) is not None]
        if pinned:
            raise PinError(f"{', '.join(pinned)} pinned; unpin {key} first")
        decisions = [self.pool.evict(c) for c in resident]
        return {"key": str(key), "slots": [d.slot for d in decisions], "chunks": [str(d.key) for d in decisions],
                "reason": decisions[0].reason}

    def show(self, key: BlockKey | ChunkKey) -> dict:
        if isinstance(key, ChunkKey):
            stored = self.pool.mover.fetch(key)
            if stored is not None:
                with self.pool.locked():
                    entry = self.pool.track(key, self.pool.clock())
                    entry.version, entry.chunk_count = max(entry.version, stored.version), stored.chunk_count
            return self.pool.describe(key)
        view = self.view(key, refresh_versions=True)
        if not view.stored and not view.chunks:
            raise KeyError(f"block {key} is not tracked and the storage node does not hold it")
        orphans = self.evict_orphans(view) if view.stored else []
        rows = self.pool.describe_many(list(view.chunks))
        return {"key": str(key), "tenant": key.tenant, "prefix_hash": f"{key.prefix_hash:016x}",
                "chunk_count": view.chunk_count, "stored": view.stored,
                "cached_chunks": sum(1 for r in rows if r["slot"] is not None),
                "versions": sorted({r["version"] for r in rows}), "orphans_evicted": orphans, "chunks": rows}

    def rows(self, key: BlockKey | ChunkKey, everything: bool) -> list[dict]:
        """`ls` restricted to one block (or chunk)."""
        chunks = [key] if isinstance(key, ChunkKey) else self._known_chunks(key)
        if not everything:
            chunks = [c for c in chunks if c in self.pool.slots]
        return self.pool.describe_many(chunks)
