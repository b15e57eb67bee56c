"""Kept for importers of the old path: the key types live in `kvpool.keys` (one definition for every part)."""

from kvpool.keys import BlockKey, ChunkKey, parse_key

__all__ = ["BlockKey", "ChunkKey", "parse_key"]
