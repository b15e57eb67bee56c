"""The controller's durable state in SQLite: the slot map and the pins, so a restart reconciles instead of starting blind.

Only facts that cannot be re-learnt cheaply are kept: which chunk owns which slot (the switch can tell us the
index entries, but not which ones *we* meant to hold) and the operator's pins with their expiry. Scores and
candidate lists are soft state and are rebuilt from digests and counters.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from kvpool.keys import ChunkKey
from policies.slotpool import Pin

SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    slot INTEGER PRIMARY KEY,          -- register-array index in the switch pool
    chunk_key TEXT NOT NULL UNIQUE,    -- tenant:prefixhash_hex:chunk
    admitted_at REAL NOT NULL,         -- wall-clock seconds
    version INTEGER NOT NULL DEFAULT 0, -- version the storage node holds (read from it), 0 = not known
    generation INTEGER NOT NULL DEFAULT 0 -- admission generation of the index entry (docs/dataplane.md, Coherence), 0 = none
);
CREATE TABLE IF NOT EXISTS pins (
    chunk_key TEXT PRIMARY KEY,
    expires_at REAL                    -- NULL for a hard pin; wall-clock seconds for a soft pin
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class StateStore:
    """One SQLite file (or `:memory:`); every method is one short transaction, safe from several threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable across a controller crash, cheap per admission
        self._db.executescript(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(slots)")}
        if "generation" not in columns:  # a state file written before admission generations
            self._db.execute("ALTER TABLE slots ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- slots -------------------------------------------------------------------------------------------

    def bind_slot(self, slot: int, key: ChunkKey, admitted_at: float, version: int = 0, generation: int = 0) -> None:
        with self._lock:
            self._db.execute("DELETE FROM slots WHERE chunk_key = ? AND slot != ?", (str(key), slot))
            self._db.execute(
                "INSERT OR REPLACE INTO slots (slot, chunk_key, admitted_at, version, generation) "
                "VALUES (?, ?, ?, ?, ?)",
                (slot, str(key), admitted_at, version, generation),
            )

    def free_slot(self, slot: int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM slots WHERE slot = ?", (slot,))

    def slots(self) -> dict[int, tuple[ChunkKey, float, int, int]]:
        """slot → (key, admitted_at, version, generation)."""
        with self._lock:
            rows = self._db.execute("SELECT slot, chunk_key, admitted_at, version, generation FROM slots").fetchall()
        return {slot: (ChunkKey.parse(key), admitted, version, generation)
                for slot, key, admitted, version, generation in rows}

    # ---- pins --------------------------------------------------------------------------------------------

    def save_pin(self, pin: Pin) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO pins (chunk_key, expires_at) VALUES (?, ?)",
                             (str(pin.key), pin.expires_at))

    def drop_pin(self, key: ChunkKey) -> None:
        with self._lock:
            self._db.execute("DELETE FROM pins WHERE chunk_key = ?", (str(key),))

    def pins(self) -> list[Pin]:
        with self._lock:
            rows = self._db.execute("SELECT chunk_key, expires_at FROM pins").fetchall()
        return [Pin(ChunkKey.parse(key), expires) for key, expires in rows]

    def keys(self) -> list[ChunkKey]:
        """Every chunk with a saved slot or pin."""
        with self._lock:
            rows = self._db.execute("SELECT chunk_key FROM slots UNION SELECT chunk_key FROM pins").fetchall()
        return [ChunkKey.parse(key) for (key,) in rows]

    # ---- meta --------------------------------------------------------------------------------------------

    def set_meta(self, name: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    def meta(self, name: str, default: str | None = None) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return default if row is None else row[0]
