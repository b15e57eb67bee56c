"""State of v1model externs: register arrays, indirect counters, meters and the `random` source.

Out-of-range indices from the data plane behave as BMv2: a read leaves the destination unchanged, a write or
count does nothing, and both are logged. Out-of-range indices from the control plane are `TargetError`s.
"""

from __future__ import annotations

import logging
import random as _random
from dataclasses import dataclass, field

from softswitch.target import TargetError

log = logging.getLogger(__name__)


class RegisterArray:
    """`register<bit<W>>(size)`: values stored as the program reads them (signed for `int<W>`)."""

    __slots__ = ("cells", "name", "signed", "size", "width")

    def __init__(self, name: str, size: int, width: int, signed: bool = False) -> None:
        self.name = name
        self.size = size
        self.width = width
        self.signed = signed
        self.cells: list[int] = [0] * size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise TargetError("OUT_OF_RANGE", f"register {self.name}: index {index} not in [0, {self.size})")

    def read(self, index: int) -> int:
        """Control-plane read: the W-bit pattern (unsigned)."""
        self._check(index)
        return self.cells[index] & ((1 << self.width) - 1)

    def write(self, index: int, value: int) -> None:
        """Control-plane write of a W-bit pattern."""
        self._check(index)
        if not 0 <= value < (1 << self.width):
            raise TargetError("INVALID_ARGUMENT", f"register {self.name}: value {value} does not fit bit<{self.width}>")
        if self.signed and value >> (self.width - 1):
            value -= 1 << self.width
        self.cells[index] = value

    def reset(self) -> None:
        # in place: the compiled program holds a reference to this very list
        self.cells[:] = [0] * self.size


class CounterArray:
    """Indirect `counter(size, CounterType)`: packets and bytes are both kept; the type says which P4Info shows."""

    __slots__ = ("bytes", "kind", "name", "packets", "size")

    def __init__(self, name: str, size: int, kind: str = "packets_and_bytes") -> None:
        self.name = name
        self.size = size
        self.kind = kind
        self.packets: list[int] = [0] * size
        self.bytes: list[int] = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        """Data-plane `count(index)`; `nbytes` is the packet length as BMv2 counts it."""
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes
        else:
            log.error("counter %s: count at out-of-range index %d (size %d) ignored", self.name, index, self.size)

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise TargetError("OUT_OF_RANGE", f"counter {self.name}: index {index} not in [0, {self.size})")

    def read(self, index: int) -> tuple[int, int]:
        self._check(index)
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, bytes_: int) -> None:
        self._check(index)
        if packets < 0 or bytes_ < 0:
            raise TargetError("INVALID_ARGUMENT", f"counter {self.name}: negative value")
        self.packets[index] = packets
        self.bytes[index] = bytes_


@dataclass(slots=True)
class DirectCounterCell:
    """The counter of one table entry (`direct_counter`), counted on every hit of that entry."""

    packets: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class MeterConfig:
    """Two-rate three-colour marker (RFC 2698) rates; BMv2 meters are unconfigured (all green) until set."""

    cir: float
    """committed rate, in units (packets or bytes) per microsecond"""
    cburst: int
    pir: float
    pburst: int


GREEN, YELLOW, RED = 0, 1, 2
"""v1model meter colours as BMv2 writes them."""


@dataclass(slots=True)
class _MeterState:
    config: MeterConfig | None = None
    committed_tokens: float = 0.0
    peak_tokens: float = 0.0
    last_us: int = 0


class MeterArray:
    """`meter(size, MeterType)`: colour-blind trTCM per index, GREEN while unconfigured (as BMv2)."""

    def __init__(self, name: str, size: int, kind: str = "packets") -> None:
        self.name = name
        self.size = size
        self.kind = kind
        self.cells = [_MeterState() for _ in range(size)]

    def configure(self, index: int, config: MeterConfig | None) -> None:
        if not 0 <= index < self.size:
            raise TargetError("OUT_OF_RANGE", f"meter {self.name}: index {index} not in [0, {self.size})")
        self.cells[index] = _MeterState(config, config.cburst if config else 0, config.pburst if config else 0)

    def execute(self, index: int, nbytes: int, now_us: int) -> int:
        if not 0 <= index < self.size:
            log.error("meter %s: execute at out-of-range index %d ignored", self.name, index)
            return GREEN
        cell = self.cells[index]
        cfg = cell.config
        if cfg is None:
            return GREEN
        elapsed = max(0, now_us - cell.last_us)
        cell.last_us = now_us
        cell.committed_tokens = min(cfg.cburst, cell.committed_tokens + elapsed * cfg.cir)
        cell.peak_tokens = min(cfg.pburst, cell.peak_tokens + elapsed * cfg.pir)
        amount = nbytes if self.kind == "bytes" else 1
        if cell.peak_tokens < amount:
            return RED
        cell.peak_tokens -= amount
        if cell.committed_tokens < amount:
            return YELLOW
        cell.committed_tokens -= amount
        return GREEN


@dataclass
class RandomSource:
    """v1model `random(out, lo, hi)`: uniform in [lo, hi]; seeded so runs can be reproduced."""

    seed: int | None = None
    rng: _random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = _random.Random(self.seed)

    def between(self, lo: int, hi: int) -> int:
        if hi < lo:
            return lo
        return self.rng.randint(lo, hi)
