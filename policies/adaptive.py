"""An online choice among expert policies: the pool *is* the cache of whichever expert has hit most lately.

No single policy wins on every trace (on the Mooncake conversation trace the conversation-level policy is
best, on the synthetic one ARC, on agent fan-out plain recency), and tuning one per trace is not something a
deployed pool can do. So the `adaptive` pool runs every expert as a *shadow cache* of the same capacity on the
same references (a shadow holds keys only, never bytes) and scores each by its hits with exponentially
decaying weights: the half-life is `half_life_capacities` × the capacity in references (at least
`min_half_life` references), so the score reflects the last few turnovers of the pool, not the whole trace.

The real pool follows the leader exactly: it admits what the leader admitted and evicts what the leader
evicted, so between switches its contents *are* the leader's. A challenger takes the lead once its decayed
hits exceed the leader's by `switch_margin_hits` (hysteresis in hits: a lead of less than one hit is noise).
Until the pool first fills, LRU and ARC hold the same blocks and have the same record, so the first time
they disagree nothing at full size says which to follow; the ensemble breaks such exact ties by the experts'
record at half the capacity (miniature shadows, as in Waldspurger et al., ATC'17, dropped once no expert is tied):
a smaller pool fills and disagrees earlier, so it has evidence when the full-size experts have none.
On a switch the pool **adopts** the new leader's resident set at once (`adopt`): what the leader does not hold
is evicted, what it holds and the pool lacks is prefetched from the storage node (the controller's fill path).
The prefetches are the price of switching; the pool counts them (`Pool.stats["prefetched"]`) so a report can
charge them as extra storage reads (`switch_cost` can make every switch justify them). A switch can instead be
*lazy* (evict first what the leader no longer holds, admit what it holds when read): that costs at most one
missed read per block an adoption would have prefetched, so the pool switches lazily whenever its lead over the
best single expert (hits since the start) exceeds that count (`spend_lead`), and adopts otherwise. With `adopt`
off every switch is lazy.

This is the experts idea of ACME and of LeCaR/CACHEUS (follow the best expert measured on recent requests),
with whole shadow caches instead of per-eviction weights: shadows are cheap (metadata only), so following the
leader costs only the prefetches of each switch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params, Victim
from policies.pool import Adoption, Pool

EXPERTS: tuple[tuple[str, str], ...] = (("always", "lru"), ("always", "arc"), ("conversation", "conversation"))
"""(admission, eviction) of each shadow: recency, ARC's recency/frequency balance, and the conversation-level
return model (`policies.conversation`)."""

_RENORMALISE = 1e100
"""Scores grow by a rising weight instead of all decaying each reference; rescaled when the weight passes this."""


@dataclass(frozen=True)
class AdaptiveParams(Params):
    """How fast the choice follows the workload; the same values on every trace (nothing tuned per trace)."""

    half_life_capacities: float = 8.0
    """Weights of past hits halve every this many × capacity references: long enough that a lead is not one
    lucky turnover of the pool (every switch prefetches), short enough to follow a workload that changes."""
    min_half_life: float = 50.0
    """…but never faster than this many references (a tiny pool would otherwise follow single hits)."""
    switch_margin_hits: float = 0.5
    """A challenger leads once its decayed hits exceed the leader's by this many (hysteresis in hits)."""
    initial_leader: str = "lru"
    """Expert the pool follows before any has shown better (an expert's eviction name), unless the miniature
    shadows of `tie_break_capacity` say otherwise first."""
    adopt: bool = True
    """On a switch, take over the new leader's contents at once (prefetching what it holds); else converge lazily."""
    spend_lead: bool = True
    """With `adopt`: switch *lazily* (no prefetch) whenever the pool's lead over the best single expert, in hits
    since the start, exceeds the blocks an adoption would prefetch. A lazy switch misses at most one read per
    block the leader holds and the pool lacks (each such miss admits the block and evicts one the leader does not
    hold, and nothing else can widen the gap), i.e. at most what adopting would have prefetched; so the pool
    spends its lead on saved storage reads only when the lead can pay for the worst case, and adopts otherwise."""
    tie_break_capacity: float = 0.5
    """While two experts have the same record at full size (identical hits so far: LRU and ARC hold the same
    blocks until the pool first fills and their evictions differ), the tie is broken by their record at this
    fraction of the capacity (miniature shadows, dropped once no expert is tied any more). A smaller pool
    diverges earlier, so it is the only evidence there is when the full-size experts first disagree; the
    first disagreement is otherwise a coin flip that costs one hit when it goes the wrong way, and that hit
    cannot be recovered on a trace where the winning expert is already as good as MIN. 0 = off (the tie
    stays with `initial_leader`)."""
    switch_cost: float = 0.0
    """Optionally make a switch pay for its prefetches: the challenger's decayed lead (≈ the hits it gained over
    the last window, so the hits it promises over the next one) must exceed this many × the blocks the pool
    would prefetch. 0 (default) = prefetch whatever a switch needs. Measured on every trace of the report, 1
    (break even within one window) keeps the pool on LRU where it should have left it (19 of 30 cells below
    max(LRU, ARC)); 0.03–0.1 cut prefetches by about half but leave 5–8 cells short by up to 0.2 points
    (measured with a one-hit switch margin)."""


class Ensemble:
    """The shadows, their decayed hit scores, the current leader and the real pool's eviction suspects."""

    def __init__(self, capacity_blocks: int, params: AdaptiveParams | None = None,
                 experts: tuple[tuple[str, str], ...] = EXPERTS, *,
                 shadows: Callable[[int, str, str, int | None], Pool]) -> None:
        """`shadows(capacity_blocks, admission, eviction, log_limit)` builds one expert's shadow pool (drop
        recycling, switch tier); the registry passes its own `make_pool`: a policy never imports its catalogue."""
        self.params = params or AdaptiveParams()
        if self.params.half_life_capacities <= 0 or self.params.min_half_life <= 0:
            raise ValueError("adaptive: half_life_capacities and min_half_life must be > 0")
        if self.params.switch_margin_hits < 0:
            raise ValueError("adaptive: switch_margin_hits must be ≥ 0")
        evictions = [e for _, e in experts]
        if self.params.initial_leader not in evictions:
            raise ValueError(f"adaptive: initial_leader {self.params.initial_leader!r} is not one of {evictions}")
        if not 0 <= self.params.tie_break_capacity < 1:
            raise ValueError("adaptive: tie_break_capacity must be in [0, 1)")
        self.names = [f"{a}+{e}" for a, e in experts]
        # Shadows log their changes so that the real pool can evict exactly what the leader evicted.
        self.shadows: list[Pool] = [
            shadows(capacity_blocks, a, e, None) for a, e in experts
        ]
        self.scores = [0.0] * len(experts)
        self.totals = [0] * len(experts)
        """Each expert's hits since the start (undecayed), against which the pool's own lead is measured."""
        self.real_hits = 0
        mini = round(capacity_blocks * self.params.tie_break_capacity)
        # Miniature shadows for breaking ties at full size (by expert index; dropped when no longer tied).
        self._minis: dict[int, Pool] = (
            {i: shadows(mini, a, e, 0) for i, (a, e) in enumerate(experts)}
            if mini >= 1 else {})
        self.mini_hits = [0] * len(experts)
        self.leader = evictions.index(self.params.initial_leader)
        self.switches = 0
        half_life = max(self.params.min_half_life, self.params.half_life_capacities * capacity_blocks)
        self._growth = 2.0 ** (1.0 / half_life)  # scores decay by 1/growth per reference: weights grow instead
        self._weight = 1.0
        self.real: set[CacheKey] = set()
        self._suspects: deque[CacheKey] = deque()
        self._limit = 4 * capacity_blocks + 16
        self._adoption: Adoption | None = None
        self.lazy_switches = 0
        """Switches made without prefetching because the pool's lead over the best expert covered them."""
        self._prefetches = 0  # blocks the last counted challenger holds and the pool lacks
        self._counted_for = -1
        self._count_due = 0
        self._recount = max(16, capacity_blocks // 8)

    @property
    def leader_name(self) -> str:
        return self.names[self.leader]

    def observe(self, block: BlockInfo, now: float) -> None:
        """Feed one reference to every shadow; score their hits; collect what the leader evicted; maybe switch."""
        scores = self.scores
        weight = self._weight
        leader = self.leader
        totals = self.totals
        for i, shadow in enumerate(self.shadows):
            if shadow.access(block, now):
                scores[i] += weight
                totals[i] += 1
            events = shadow.events
            if i == leader:
                for event in events:
                    if event.kind == "evicted":
                        self._suspects.append(event.key)
            events.clear()
        self._weight = weight * self._growth
        if self._weight > _RENORMALISE:
            self.scores = scores = [s / self._weight for s in scores]
            self._weight = 1.0
        if self._minis:
            self._feed_minis(block, now)
        best = max(range(len(scores)), key=scores.__getitem__)
        lead = (scores[best] - scores[leader]) / self._weight  # in (decayed) hits
        if best != leader and lead > self.params.switch_margin_hits and self._pays_for_prefetches(best, lead):
            self._switch(best)
        elif (self._minis and (winner := self._tie_winner()) is not None
              and self._pays_for_prefetches(winner, self.mini_hits[winner] - self.mini_hits[leader])):
            self._switch(winner)
        elif len(self._suspects) > self._limit:
            self._rebuild_suspects()

    def _switch(self, to: int) -> None:
        self.leader = to
        self.switches += 1
        self._rebuild_suspects()
        if not self.params.adopt:
            return
        real = self.real
        missing = [b for b in self.shadows[to].resident_blocks() if b.key not in real]
        if self.params.spend_lead and len(missing) < self.real_hits - max(self.totals):
            self.lazy_switches += 1  # the lead covers every read a lazy switch could lose: prefetch nothing
            return
        self._adoption = Adoption(list(self._suspects), missing)

    def _feed_minis(self, block: BlockInfo, now: float) -> None:
        """One reference to the miniature shadows of the experts still tied at full size; drop the others'."""
        scores, minis, mini_hits = self.scores, self._minis, self.mini_hits
        for i, mini in minis.items():
            if mini.access(block, now):
                mini_hits[i] += 1
        for i in [i for i in minis if not any(scores[i] == scores[j] for j in minis if j != i)]:
            del minis[i]  # its full-size record is its own now: no tie left to break

    def _tie_winner(self) -> int | None:
        """The expert tied with the leader at full size whose miniature has hit strictly more, if any."""
        leader, minis, mini_hits = self.leader, self._minis, self.mini_hits
        if leader not in minis:
            return None
        best = max((i for i in minis if self.scores[i] == self.scores[leader]), key=mini_hits.__getitem__)
        return best if mini_hits[best] > mini_hits[leader] else None

    def _pays_for_prefetches(self, challenger: int, lead: float) -> bool:
        """Is `lead` worth the prefetches of adopting `challenger`'s contents? (Counted at most once per
        `_recount` references while the challenger keeps leading: counting is linear in the capacity.)"""
        cost = self.params.switch_cost
        if not self.params.adopt or cost <= 0:
            return True
        if self._count_due > 0 and self._counted_for == challenger:
            self._count_due -= 1
            return lead > cost * self._prefetches
        shadow = self.shadows[challenger]
        real = self.real
        self._prefetches = sum(1 for key in shadow.resident() if key not in real)
        self._counted_for, self._count_due = challenger, self._recount
        return lead > cost * self._prefetches

    def _rebuild_suspects(self) -> None:
        leader = self.shadows[self.leader]
        self._suspects = deque(key for key in self.real if key not in leader)

    def leads(self, key: CacheKey) -> bool:
        """Does the leader hold `key` (after the current reference)?"""
        return key in self.shadows[self.leader]

    def adoption(self) -> Adoption | None:
        """What the pool should evict and prefetch now to take over the new leader's contents (once per switch)."""
        adoption, self._adoption = self._adoption, None
        return adoption

    def inserted(self, key: CacheKey) -> None:
        self.real.add(key)
        if not self.leads(key):
            self._suspects.append(key)

    def victim(self, protected: frozenset[CacheKey]) -> CacheKey:
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
    """Evicts what the leading expert has already evicted (or never admitted); hands the pool a new leader's set."""

    name = "adaptive"

    def __init__(self, ensemble: Ensemble, params: AdaptiveParams | None = None) -> None:
        self.params = params or ensemble.params
        self.ensemble = ensemble

    def on_insert(self, block: BlockInfo, now: float) -> None:
        self.ensemble.inserted(block.key)

    def on_hit(self, block: BlockInfo, now: float) -> None:
        self.ensemble.real_hits += 1

    def on_remove(self, key: CacheKey) -> None:
        self.ensemble.real.discard(key)

    def target(self) -> Adoption | None:
        """`policies.pool.Retargeting`: after a leader change, the contents the pool should adopt."""
        return self.ensemble.adoption()

    def victim(self, now: float, protected: frozenset[CacheKey] = frozenset()) -> Victim:
        key = self.ensemble.victim(protected)
        return Victim(key, 0.0, f"not held by the leading expert {self.ensemble.leader_name}")
