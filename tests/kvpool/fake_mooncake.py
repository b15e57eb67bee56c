"""An in-process stand-in for `mooncake.store.MooncakeDistributedStore`, with the behaviour the backend relies on
(checked against the real store in tests/kvpool/test_backends.py): `put` of an existing key keeps the old value
and still returns 0, `upsert` replaces, `get` of a missing key is b"", `is_exist` is 1 / 0."""

from __future__ import annotations

from collections import Counter
from typing import Any

OBJECT_NOT_FOUND = -704
"""Mooncake's error code for a missing object."""


class FakeStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.configs: dict[str, Any] = {}
        self.calls: Counter[str] = Counter()
        self.refuse_puts = False
        """True: every put fails as a full Mooncake pool does (-600 no space)."""
        self.unreadable: set[str] = set()
        """Keys whose `get` fails (b"", as the real store says when the transfer from a dead node's segment
        fails) while `is_exist` still says 1."""

    def put(self, key: str, value: bytes, config: Any = None) -> int:
        self.calls["put"] += 1
        if self.refuse_puts:
            return -600
        if key not in self.objects:
            self.objects[key] = bytes(value)
            self.configs[key] = config
        return 0

    def upsert(self, key: str, value: bytes, config: Any = None) -> int:
        self.calls["upsert"] += 1
        self.objects[key] = bytes(value)
        self.configs[key] = config
        return 0

    def get(self, key: str) -> bytes:
        self.calls["get"] += 1
        return b"" if key in self.unreadable else self.objects.get(key, b"")

    def is_exist(self, key: str) -> int:
        self.calls["is_exist"] += 1
        return int(key in self.objects)

    def remove(self, key: str, force: bool = False) -> int:
        self.calls["remove"] += 1
        return 0 if self.objects.pop(key, None) is not None else OBJECT_NOT_FOUND

    def close(self) -> int:
        return 0
