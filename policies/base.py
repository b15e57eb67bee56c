"""The small typed interface every pool policy implements, shared by the controller and the evaluator.

A pool decision has three independent parts, as in libCacheSim's split of admission from eviction:

* **admission**: does a block that is not in the pool deserve a slot at all?
* **eviction**: when the pool is full, which resident block leaves?
* **recycling**: does the evicted block go down a tier (with its residual value) or is it dropped?

Policies see blocks as `BlockInfo` (what the data plane and the traces can tell) and time as seconds, so
the same object runs inside the controller (real time, digests) and inside a trace replay (trace time).
Policies never touch a switch or a storage node: the drivers do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

# Tier: the wire codes of `kvp_tier_t`, one definition for the wire, the controller and the evaluator.
from kvpool.constants import Tier

CacheKey = Hashable
"""What a policy caches, opaque to it: the evaluator's int block ids, the controller's `kvpool.keys.ChunkKey`.
Policies only hash and compare keys, so they stay generic over the caller's key type (not a key type of its own)."""


@dataclass(frozen=True, slots=True)
class BlockInfo:
    """What a policy may know about a block when it is accessed or offered."""

    key: CacheKey
    """Identity of the block (includes its whole prefix: keys are chained prefix hashes)."""
    depth: int = 0
    """Position in its prompt's prefix chain, 0 = first block; a block is useless without its parents."""
    tokens: int = 512
    """Tokens the block covers (512 per full block in the Mooncake traces; the last one may be partial)."""
    size_bytes: int = 1
    """Bytes the block occupies in the pool; the unit of slot cost."""
    parent: CacheKey | None = None
    """Key of the previous block of the prefix, None for the first block."""
    is_last: bool = False
    """True when no block of the same request follows it (the tail of a prompt)."""
    turn: int = 1
    """Conversation turn of the request reading the block, 1 = first turn (see `policies.request`)."""
    category: str = ""
    """Workload category of the request (e.g. "chat", "api", "file"); "" when the source does not say."""
    request_blocks: int = 0
    """Blocks in the whole prompt of the request reading it (known at arrival); 0 = unknown."""
    turn_gap_s: float = -1.0
    """Seconds since the previous turn of the same conversation; -1 = first turn or unknown."""
    request: int = -1
    """Arrival number of the request reading the block (0, 1, ...); -1 = unknown. Names a conversation turn."""
    previous_request: int = -1
    """Arrival number of the request this one continues (its previous turn: it re-reads that request's whole
    prompt but its tail, `policies.request.AnnotatorOptions.continuation_slack`); -1 = none or unknown."""
    previous_output_tokens: int = -1
    """Tokens the previous turn generated: known once that generation finished, which is before this turn
    could be typed. Never the current request's own output (that is future). -1 = first turn or unknown."""


@dataclass(frozen=True, slots=True)
class Victim:
    """An eviction decision with the residual value the recycling policy weighs."""

    key: CacheKey
    residual: float
    """Expected value of keeping the block somewhere (same unit as the admission score); ≥ 0."""
    reason: str
    """Why this block was chosen, for the controller's decision log."""


@dataclass(frozen=True, slots=True)
class Recycle:
    """What happens to an evicted block: `tier` is where it goes, ABSENT meaning dropped."""

    tier: Tier
    reason: str


@runtime_checkable
class AdmissionPolicy(Protocol):
    """Decides whether a block not in the pool gets a slot. Sees every access, hit or miss."""

    name: str

    def record(self, block: BlockInfo, now: float) -> None:
        """Account one access of `block` at time `now` (seconds), whether or not it hit."""
        ...

    def admit(self, block: BlockInfo, now: float) -> bool:
        """Should `block`, just missed, enter the pool now?"""
        ...

    def score(self, block: BlockInfo, now: float) -> float:
        """The block's current value (higher = more deserving); used to rank candidates and victims."""
        ...


@runtime_checkable
class EvictionPolicy(Protocol):
    """Keeps the order of resident blocks and names a victim when the pool is full."""

    name: str

    def on_insert(self, block: BlockInfo, now: float) -> None:
        """`block` was admitted into the pool."""
        ...

    def on_hit(self, block: BlockInfo, now: float) -> None:
        """A resident block was read."""
        ...

    def on_remove(self, key: CacheKey) -> None:
        """A resident block left the pool for any reason (evicted, invalidated, explicit evict)."""
        ...

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        """Choose the block to evict, never one in `protected` (pinned). Does not remove it."""
        ...


@runtime_checkable
class AccessObserver(Protocol):
    """Optional extra of an eviction policy: it wants to see every access, misses included.

    ARC and S3-FIFO consult their ghost lists on a miss, and learned policies learn from misses; the
    pool calls `record` on any eviction policy that has it, before `on_hit`/`victim`/`on_insert`.
    """

    def record(self, block: BlockInfo, now: float) -> None: ...


@runtime_checkable
class RecyclingPolicy(Protocol):
    """Decides whether an evicted block is demoted to a lower tier or dropped."""

    name: str

    def decide(self, victim: Victim, from_tier: Tier, now: float) -> Recycle: ...


@dataclass(frozen=True)
class Params:
    """Base of every policy's parameters: frozen, typed, and built from user strings with unknown keys rejected."""

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None = None) -> Self:
        """Build from `{"name": value}` (values may be strings from a CLI); unknown or mistyped keys raise ValueError."""
        values = dict(values or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(
                f"{cls.__name__}: unknown parameter(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(fields)) or '(none)'}"
            )
        converted: dict[str, Any] = {}
        for name, raw in values.items():
            default = fields[name].default
            kind = type(default) if default is not dataclasses.MISSING else str
            try:
                if kind is bool and isinstance(raw, str):
                    if raw.lower() not in {"1", "0", "true", "false", "yes", "no"}:
                        raise ValueError(raw)
                    converted[name] = raw.lower() in {"1", "true", "yes"}
                else:
                    converted[name] = kind(raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{cls.__name__}.{name}: expected {kind.__name__}, got {raw!r}") from exc
        return cls(**converted)
