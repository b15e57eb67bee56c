"""Evict the block of lowest current value: expected reads per second × prefill saved per hit ÷ slot cost.

The value of a resident block decays as it sits unread (`policies.reuse`: the longer a block waits, the
less likely its conversation comes back), at a speed that depends on its class. Within one class the
oldest block is the least valuable up to its recompute weight, so the policy keeps one recency-ordered
list per class and compares only the heads: an eviction looks at a few dozen blocks, not the pool. The
victim's value is reported as its residual, so the pool refuses a newcomer worth less than the block it
would displace (this is where "most blocks are read once" is handled) and the recycling policy can
decide whether the victim deserves a lower tier.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim
from policies.reuse import ReuseClass, ReuseModel, ReuseParams, recompute_weight


@dataclass(frozen=True)
class ValueEvictionParams(Params):
    """Weights of the value; the reuse model's own parameters live in `ReuseParams`."""

    depth_weight: float = 0.01
    """Extra prefill cost per block of prefix in front (attention over the prefix), relative to the block's own."""


def block_value(
    model: ReuseModel, block: BlockInfo, cls: ReuseClass, age: float, depth_weight: float
) -> float:
    """Expected prefill token-equivalents saved per second per byte of slot, for a block of `cls` and `age`."""
    return model.reuse_rate(cls, age) * recompute_weight(block, depth_weight) / max(1, block.size_bytes)


class ValueEviction:
    """One recency list per reuse class; the victim is the least valuable head."""

    name = "value"

    def __init__(
        self,
        params: ValueEvictionParams | None = None,
        model: ReuseModel | None = None,
        model_params: ReuseParams | None = None,
    ) -> None:
        """With `model` given (shared with the `value` admission, which feeds it) this policy only reads it."""
        self.params = params or ValueEvictionParams()
        self._owns_model = model is None
        self.model = model if model is not None else ReuseModel(model_params)
        self._lists: dict[ReuseClass, OrderedDict[CacheKey, tuple[BlockInfo, float]]] = {}
        self._class_of: dict[CacheKey, ReuseClass] = {}
        # The last victim, valid while nothing changed: refused newcomers at the same instant (most misses
        # of a request) then cost a dictionary look-up instead of a scan of the class heads.
        self._version = 0
        self._cached: tuple[tuple[float, int, int, frozenset[CacheKey]], Victim] | None = None

    def record(self, block: BlockInfo, now: float) -> None:
        if self._owns_model:
            self.model.observe(block, now)

    def _place(self, block: BlockInfo, now: float) -> None:
        self._version += 1
        key = block.key
        old = self._class_of.get(key)
        if old is not None:
            blocks = self._lists[old]
            del blocks[key]
            if not blocks:
                del self._lists[old]
        last = self.model.last(key)
        cls = last[0] if last is not None else self.model.classify(block, 0)
        self._class_of[key] = cls
        self._lists.setdefault(cls, OrderedDict())[key] = (block, now)

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._place(block, now)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._place(block, now)

    def on_remove(self, key: CacheKey) -> None:
        self._version += 1
        cls = self._class_of.pop(key, None)
        if cls is not None:
            blocks = self._lists[cls]
            del blocks[key]
            if not blocks:
                del self._lists[cls]

    def value(self, key: CacheKey, now: float) -> float:
        """Current value of a resident block."""
        cls = self._class_of[key]
        block, then = self._lists[cls][key]
        return block_value(self.model, block, cls, now - then, self.params.depth_weight)

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        stamp = (now, self._version, self.model.generation, protected)
        if self._cached is not None and self._cached[0] == stamp:
            return self._cached[1]
        # `block_value` inlined: this loop runs once per admitted block and dominates replay time.
        best_value = math.inf
        best_key: CacheKey | None = None
        weight = self.params.depth_weight
        fit = self.model.fit
        for cls, blocks in self._lists.items():
            probability, rate = fit(cls)
            for key, (block, then) in blocks.items():
                if key in protected:
                    continue
                survive = probability * math.exp(-rate * max(0.0, now - then))
                value = (
                    survive
                    / (survive + 1.0 - probability)
                    * rate
                    * block.tokens
                    * (1.0 + weight * block.depth)
                    / max(1, block.size_bytes)
                )
                if value < best_value:
                    best_value, best_key = value, key
                break
        if best_key is None:
            raise LookupError("value: every resident block is pinned")
        victim = Victim(
            best_key, best_value, f"lowest value {best_value:.3g} (class {self._class_of[best_key]})"
        )
        self._cached = (stamp, victim)
        return victim
