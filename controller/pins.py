"""Pins: blocks an operator (or a client's F_PIN) wants kept in the switch pool whatever the eviction policy says.

A hard pin lasts until unpinned; a soft pin expires after its TTL. Pinned blocks are the `protected` set the
eviction policy must never pick.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.keys import ChunkKey


@dataclass(frozen=True, slots=True)
class Pin:
    key: ChunkKey
    expires_at: float | None = None
    """Wall-clock seconds (time.time()) when a soft pin lapses; None for a hard pin."""

    @property
    def kind(self) -> str:
        return "hard" if self.expires_at is None else "soft"

    def active(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at


class PinTable:
    """The current pins, keyed by chunk."""

    def __init__(self) -> None:
        self._pins: dict[ChunkKey, Pin] = {}

    def pin(self, key: ChunkKey, now: float, ttl: float | None = None) -> Pin:
        """Pin `key` hard (ttl None) or soft for `ttl` seconds; a hard pin is never weakened by a soft one."""
        if ttl is not None and ttl <= 0:
            raise ValueError(f"a soft pin needs a positive TTL, got {ttl}")
        current = self._pins.get(key)
        if current is not None and current.expires_at is None and ttl is not None:
            return current
        pin = Pin(key, None if ttl is None else now + ttl)
        self._pins[key] = pin
        return pin

    def restore(self, pin: Pin) -> None:
        self._pins[pin.key] = pin

    def unpin(self, key: ChunkKey) -> bool:
        return self._pins.pop(key, None) is not None

    def get(self, key: ChunkKey, now: float) -> Pin | None:
        pin = self._pins.get(key)
        return pin if pin is not None and pin.active(now) else None

    def expire(self, now: float) -> list[Pin]:
        """Drop the soft pins whose TTL ran out and return them."""
        lapsed = [p for p in self._pins.values() if not p.active(now)]
        for pin in lapsed:
            del self._pins[pin.key]
        return lapsed

    def protected(self, now: float) -> frozenset[ChunkKey]:
        return frozenset(k for k, p in self._pins.items() if p.active(now))

    def all(self) -> list[Pin]:
        return list(self._pins.values())
