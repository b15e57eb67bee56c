"""The workload-aware eviction of "KVCache Cache in the Wild" (Wang et al., USENIX ATC'25, Alibaba Bailian).

What the paper observes and proposes (§4–5, as we read it): reuse of a KV block is predictable per
*workload type* (request category × conversation turn, e.g. "chat turn 1", "chat turn 2", "API single
turn"); within a type, the time to the next reuse follows an exponential distribution and the chance of
any reuse is stable; blocks near the head of a prompt are worth more than tail blocks, because a prefix
hit needs every block before it. The policy therefore gives each block the predicted probability that
it is reused within a near-future window, from its type's profile and the time since its last access,
evicts the block with the lowest probability, and breaks ties by evicting the block further from the
head of its prompt (larger offset) first.

What we took: per-type reuse probability p_w and exponential rate λ_w; priority = P(reused within the
next `window_s` | type, unread for a) = q_w(a)·(1 − e^(−λ_w·window)) with q_w(a) = p_w e^(−λ_w a) /
(p_w e^(−λ_w a) + 1 − p_w) (the conditional chance, given no reuse so far, under the fitted
exponential); lowest priority leaves, deeper offset first on ties.
What we simplified: the paper profiles each type offline from past traces and refreshes periodically;
we keep the profile online from the accesses seen so far (counts and summed reuse times per type,
with a weak prior), which uses only the past. The Mooncake traces carry no request category, so the
type is (`BlockInfo.category`, turn) with turn inferred from prefix sharing (`policies.request`).
Admission is not part of the paper's policy: pair this eviction with any admission policy. Within a
type the priority only falls with age, so each type keeps a heap by (last access, deeper first) and an
eviction compares one head per type. `Victim.residual` is the probability, not a `value` score.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim

WorkloadType = tuple[str, int]
"""(request category, conversation turn bucket)."""


@dataclass(frozen=True)
class KVCacheWildParams(Params):
    """Profile shape and horizon."""

    window_s: float = 60.0
    """The near future (seconds) over which the reuse probability is predicted."""
    max_turn: int = 4
    """Turns ≥ this share one workload type."""
    prior_weight: float = 20.0
    """Pseudo-accesses of the prior per type."""
    prior_probability: float = 0.3
    """Reuse probability assumed before a type has data."""
    prior_reuse_s: float = 120.0
    """Mean reuse time (seconds) assumed before a type has data."""
    memory: int = 1_000_000
    """Blocks whose last access is remembered for profiling."""


class KVCacheWildEviction:
    """One recency list per workload type; the victim is the lowest-probability head (deepest on ties)."""

    name = "kvcache_wild"

    def __init__(self, params: KVCacheWildParams | None = None) -> None:
        self.params = p = params or KVCacheWildParams()
        if p.window_s <= 0 or p.max_turn < 1 or not 0 < p.prior_probability < 1 or p.prior_reuse_s <= 0:
            raise ValueError(f"kvcache_wild: bad parameters {p}")
        self._seen: dict[CacheKey, tuple[WorkloadType, float]] = {}  # last access, for profiling
        self._accesses: dict[WorkloadType, float] = {}
        self._reuses: dict[WorkloadType, float] = {}
        self._reuse_time: dict[WorkloadType, float] = {}
        self._heaps: dict[WorkloadType, list[tuple[float, int, int, CacheKey]]] = {}
        self._entry: dict[CacheKey, tuple[WorkloadType, tuple[float, int, int, CacheKey]]] = {}
        self._seq = 0

    # ------------------------------------------------------------ profiling (every access)
    def record(self, block: BlockInfo, now: float) -> None:
        previous = self._seen.pop(block.key, None)
        if previous is not None:
            kind, then = previous
            self._reuses[kind] = self._reuses.get(kind, 0.0) + 1.0
            self._reuse_time[kind] = self._reuse_time.get(kind, 0.0) + max(0.0, now - then)
        kind = self._type(block)
        self._accesses[kind] = self._accesses.get(kind, 0.0) + 1.0
        self._seen[block.key] = (kind, now)
        if len(self._seen) > self.params.memory:
            del self._seen[next(iter(self._seen))]

    def _type(self, block: BlockInfo) -> WorkloadType:
        return (block.category, min(block.turn, self.params.max_turn))

    def priority(self, kind: WorkloadType, age: float) -> float:
        """P(reused within the window | type, unread for `age` seconds)."""
        p = self.params
        prior_reuses = p.prior_weight * p.prior_probability
        reuses = self._reuses.get(kind, 0.0) + prior_reuses
        probability = min(0.999, reuses / (self._accesses.get(kind, 0.0) + p.prior_weight))
        rate = reuses / (self._reuse_time.get(kind, 0.0) + prior_reuses * p.prior_reuse_s)
        survive = probability * math.exp(-rate * max(0.0, age))
        return survive / (survive + 1.0 - probability) * (1.0 - math.exp(-rate * p.window_s))

    # ------------------------------------------------------------ resident set
    # Per type, a heap ordered by (last access, deeper first): within a type the priority only falls with
    # age, so the head is the type's victim. Re-read blocks push a new entry; stale ones are skipped.
    def _place(self, block: BlockInfo, now: float) -> None:
        kind = self._type(block)
        self._seq += 1
        entry = (now, -block.depth, self._seq, block.key)
        self._entry[block.key] = (kind, entry)
        heapq.heappush(self._heaps.setdefault(kind, []), entry)

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self._place(block, now)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self._place(block, now)

    def on_remove(self, key: CacheKey) -> None:
        self._entry.pop(key, None)

    def _head(
        self, kind: WorkloadType, protected: frozenset[CacheKey]
    ) -> tuple[float, int, int, CacheKey] | None:
        heap = self._heaps[kind]
        skipped = []
        found = None
        while heap:
            entry = heap[0]
            current = self._entry.get(entry[3])
            if current is None or current[1] is not entry:
                heapq.heappop(heap)
                continue
            if entry[3] in protected:
                skipped.append(heapq.heappop(heap))
                continue
            found = entry
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        best: tuple[float, int, CacheKey] | None = None  # (priority, -offset, key): smallest leaves
        for kind in self._heaps:
            head = self._head(kind, protected)
            if head is None:
                continue
            then, negative_depth, _, key = head
            candidate = (self.priority(kind, now - then), negative_depth, key)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        if best is None:
            raise LookupError("kvcache_wild: every resident block is pinned")
        probability, offset, key = best
        return Victim(
            key, probability, f"reuse probability {probability:.3g} within window, offset {-offset}"
        )
