"""An online choice among expert policies: the pool follows whichever expert has hit most lately.

No single policy wins on every trace (on the Mooncake conversation trace the conversation-level policy is
best, on the synthetic one ARC, on workloads with heavy sharing plain recency), and tuning one per trace is
not something a deployed pool can do. So the `adaptive` pool runs every expert as a *shadow cache* of the
same capacity on the same references (a shadow holds keys only, never bytes) and measures online how many
hits each would have had, with exponentially decaying weights (half-life: `half_life_capacities` × the
capacity, in references, so the memory scales with the pool, not with the trace). The real pool follows the
leader: it admits what the leader admitted and evicts first what the leader no longer holds (its
"suspects"), so while one expert leads the real contents converge to that expert's and then track it
exactly; a leader change needs the margin `switch_margin` (hysteresis against flapping).

This is the experts/regret idea of ACME and of LeCaR/CACHEUS (follow the best expert measured on recent
requests), with whole shadow caches instead of per-eviction weights, so the pool is never worse than the
best expert by more than what a switch costs.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from policies.base import BlockInfo, BlockKey, Params, Tier, Victim
from policies.pool import Pool

EXPERTS: tuple[tuple[str, str], ...] = (("always", "lru"), ("always", "arc"), ("conversation", "conversation"))
"""(admission, eviction) of each shadow: recency, ARC's recency/frequency balance, and the conversation-level
return model (`policies.conversation`)."""


@dataclass(frozen=True)
class AdaptiveParams(Params):
    """How fast the choice follows the workload; the same values on every trace (nothing tuned per trace)."""

    half_life_capacities: float = 256.0
    """Weights of past hits halve every this many × capacity references (and at least every 8,000)."""
    significance: float = 3.0
    """…and by this many standard deviations of the hit-count difference (√ of the two decayed counts, as
    for Poisson counts), so that a lead must be both real and lasting before the pool pays for a switch."""
    switch_margin: float = 0.02
    """A challenger leads once its decayed hits exceed the leader's by this fraction (a switch
    throws away the learned contents, e.g. ARC's frequency list, and short-lived leads do not repay that)."""


class Ensemble:
    """The shadows, their decayed hit scores, the current leader and the real pool's eviction suspects."""

    def __init__(self, capacity_blocks: int, params: AdaptiveParams | None = None,
                 experts: tuple[tuple[str, str], ...] = EXPERTS) -> None:
        from policies.registry import make_pool  # the registry imports this module

        self.params = params or AdaptiveParams()
        if self.params.half_life_capacities <= 0 or self.params.switch_margin < 0:
            raise ValueError("adaptive: half_life_capacities must be > 0 and switch_margin ≥ 0")
        self.names = [f"{a}+{e}" for a, e in experts]
        self.shadows: list[Pool] = [
            make_pool(capacity_blocks, a, e, "drop", tier=Tier.SWITCH, log_limit=None) for a, e in experts
        ]
        self.scores = [0.0] * len(experts)
        self.leader = min(1, len(experts) - 1)  # ARC until another expert has shown better
        self.switches = 0
        # Scores decay by 2^(-1/8) every eighth of a half-life, and the leader is reconsidered then.
        self._period = max(1_000, int(self.params.half_life_capacities * capacity_blocks) // 8)
        self._decay = 0.5 ** (1 / 8)
        self._count = 0
        self.real: set[BlockKey] = set()
        self._suspects: deque[BlockKey] = deque()
        self._limit = 4 * capacity_blocks + 16

    @property
    def leader_name(self) -> str:
        return self.names[self.leader]

    def observe(self, block: BlockInfo, now: float) -> None:
        """Feed one reference to every shadow; score their hits; collect what the leader evicted."""
        scores = self.scores
        for i, shadow in enumerate(self.shadows):
            if shadow.access(block, now):
                scores[i] += 1.0
            events = shadow.events
            if i == self.leader:
                for event in events:
                    if event.kind == "evicted":
                        self._suspects.append(event.key)
            events.clear()
        self._count += 1
        if self._count >= self._period:
            self._count = 0
            self.scores = [s * self._decay for s in scores]
            self._choose()
        if len(self._suspects) > self._limit:
            self._rebuild_suspects()

    def _choose(self) -> None:
        best = max(range(len(self.scores)), key=self.scores.__getitem__)
        lead, best_score = self.scores[self.leader], self.scores[best]
        if (best != self.leader and best_score > lead * (1 + self.params.switch_margin)
                and best_score - lead > self.params.significance * math.sqrt(best_score + lead)):
            self.leader = best
            self.switches += 1
            self._rebuild_suspects()

    def _rebuild_suspects(self) -> None:
        leader = self.shadows[self.leader]
        self._suspects = deque(key for key in self.real if key not in leader)

    def leads(self, key: BlockKey) -> bool:
        """Does the leader hold `key` (after the current reference)?"""
        return key in self.shadows[self.leader]

    def inserted(self, key: BlockKey) -> None:
        self.real.add(key)
        if not self.leads(key):
            self._suspects.append(key)

    def victim(self, protected: frozenset[BlockKey]) -> BlockKey:
        """A real resident the leader does not hold (oldest suspect first), else any unprotected one."""
        kept = []
        leader = self.shadows[self.leader]
        real = self.real
        found = None
        while self._suspects:
            key = self._suspects.popleft()
            if key in real and key not in leader:
                if key in protected:
                    kept.append(key)
                    continue
                found = key
                break
        self._suspects.extendleft(reversed(kept))
        if found is not None:
            return found
        for key in real:  # the leader holds every real block: only pins or a refused admission lead here
            if key not in protected and key not in leader:
                return key
        for key in real:
            if key not in protected:
                return key
        raise LookupError("adaptive: every resident block is pinned")


@dataclass(frozen=True)
class AdaptiveAdmissionParams(Params):
    """The admission side has no parameters of its own (they are the ensemble's)."""


class AdaptiveAdmission:
    """Admits a missed block when the leading expert admitted it; feeds every shadow first."""

    name = "adaptive"

    def __init__(self, ensemble: Ensemble, params: AdaptiveAdmissionParams | None = None) -> None:
        self.params = params or AdaptiveAdmissionParams()
        self.ensemble = ensemble

    def record(self, block: BlockInfo, now: float) -> None:
        self.ensemble.observe(block, now)

    def admit(self, block: BlockInfo, now: float) -> bool:
        return self.ensemble.leads(block.key)

    def score(self, block: BlockInfo, now: float) -> float:
        return 1.0 if self.ensemble.leads(block.key) else 0.0


class AdaptiveEviction:
    """Evicts what the leading expert has already evicted (or never admitted)."""

    name = "adaptive"

    def __init__(self, ensemble: Ensemble, params: AdaptiveParams | None = None) -> None:
        self.params = params or ensemble.params
        self.ensemble = ensemble

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self.ensemble.inserted(block.key)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        pass

    def on_remove(self, key: BlockKey) -> None:
        self.ensemble.real.discard(key)

    def victim(self, now: float, protected: frozenset[BlockKey] = frozenset()) -> Victim:
        key = self.ensemble.victim(protected)
        return Victim(key, 0.0, f"not held by the leading expert {self.ensemble.leader_name}")
