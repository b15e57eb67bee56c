"""Online estimate of how likely, and how soon, a block is read again, learned only from the past.

Blocks fall into classes by what is known when they are read: the conversation turn of the request
(later turns are more likely to be followed by another), how often the block was read before (blocks
shared by many requests come back soon), whether it is the prompt's tail (a partial last block is
almost never read again: the next turn extends it into a different block), and, more finely, how long
the conversation's previous turn took (users keep a pace) and how long the prompt is (one-block prompts
are rarely continued). Fine classes are sparse, so their estimates back off to the coarse class (turn,
reads, tail) until they have data of their own. For each class the model
counts accesses, the accesses that were followed by another read of the same block, and the time those
reuses took; a class then has a reuse probability p and, fitting an exponential to its reuse times, a
rate λ = 1 / mean reuse time. A block of age a (seconds since its last read) that has not been read
again is still going to be read with probability q(a) = p·e^(−λa) / (p·e^(−λa) + 1 − p), and its
expected reads per second are q(a)·λ: that is the block's *reuse rate*, the quantity the `value`
policies rank by. Reuses are credited when they happen, so nothing here looks ahead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.base import BlockInfo, CacheKey, Params

ReuseClass = tuple[int, int, bool, int, int]
"""(turn bucket, prior reads bucket, is the prompt's tail, previous-turn gap bucket, prompt length bucket)."""


@dataclass(frozen=True)
class ReuseParams(Params):
    """Shape of the classes and strength of the priors."""

    max_turn: int = 5
    """Turns ≥ this share one class."""
    max_prior_reads: int = 3
    """Blocks read ≥ this many times before share one class."""
    prior_weight: float = 20.0
    """Pseudo-accesses of the prior in each class (how fast observations take over)."""
    prior_probability: float = 0.3
    """Reuse probability assumed before a class has data."""
    prior_reuse_s: float = 120.0
    """Mean reuse time (seconds) assumed before a class has data."""
    memory: int = 1_000_000
    """Blocks whose last read is remembered (older ones are forgotten, oldest first)."""
    refresh: int = 256
    """Accesses between recomputations of each class's (p, λ)."""
    use_turn_gap: bool = False
    """Split classes by the conversation's previous turn gap (log₂ buckets of 10 s). Off by default: on
    the Mooncake conversation trace at 1% it lowered the hit ratio (0.101 → 0.097), the finer classes
    learning too slowly online, and the extra class heads slow eviction down."""
    use_prompt_length: bool = False
    """Split classes by prompt length (log₂ buckets of blocks). Off by default for the same reason
    (0.101 → 0.098 at 1%)."""
    backoff_weight: float = 20.0
    """Pseudo-accesses with which a fine class starts from its coarse class's estimate."""


class ReuseModel:
    """Per-class counters plus each remembered block's (class, last read time, reads so far)."""

    def __init__(self, params: ReuseParams | None = None) -> None:
        self.params = p = params or ReuseParams()
        if p.max_turn < 1 or p.max_prior_reads < 0 or p.memory < 1 or p.refresh < 1:
            raise ValueError(f"reuse model: bad parameters {p}")
        if not 0.0 < p.prior_probability < 1.0 or p.prior_reuse_s <= 0 or p.prior_weight <= 0:
            raise ValueError(f"reuse model: bad priors {p}")
        self._last: dict[CacheKey, tuple[ReuseClass, float, int]] = {}
        # Keyed by full classes and by their coarse 3-field prefixes (the fallback when a class is rare).
        self._accesses: dict[tuple, float] = {}
        self._reuses: dict[tuple, float] = {}
        self._reuse_time: dict[tuple, float] = {}
        self._fit: dict[ReuseClass, tuple[float, float]] = {}
        self._since_fit = 0
        self.generation = 0
        """Bumped whenever the fitted (p, λ) may change, so readers can cache values computed from them."""

    def observe(self, block: BlockInfo, now: float) -> ReuseClass:
        """Account one read of `block` at `now`; returns the class the block is in until its next read."""
        key = block.key
        p = self.params
        previous = self._last.pop(key, None)
        if previous is not None:
            cls, then, reads = previous
            for counted in (cls, cls[:3]):
                self._reuses[counted] = self._reuses.get(counted, 0.0) + 1.0
                self._reuse_time[counted] = self._reuse_time.get(counted, 0.0) + max(0.0, now - then)
        else:
            reads = 0
        cls = self.classify(block, reads)
        self._accesses[cls] = self._accesses.get(cls, 0.0) + 1.0
        coarse = cls[:3]
        self._accesses[coarse] = self._accesses.get(coarse, 0.0) + 1.0
        self._last[key] = (cls, now, reads + 1)
        if len(self._last) > p.memory:
            del self._last[next(iter(self._last))]
        self._since_fit += 1
        if self._since_fit >= p.refresh:
            self._since_fit = 0
            self._fit.clear()
            self.generation += 1
        return cls

    def classify(self, block: BlockInfo, reads: int) -> ReuseClass:
        """The class of `block` read now after `reads` earlier reads."""
        p = self.params
        gap = -1
        if p.use_turn_gap and block.turn_gap_s >= 0:
            gap = min(int(math.log2(1.0 + block.turn_gap_s / 10.0)), 6)
        length = min(block.request_blocks.bit_length(), 8) if p.use_prompt_length else 0
        return (min(block.turn, p.max_turn), min(reads, p.max_prior_reads), block.is_last, gap, length)

    def last(self, key: CacheKey) -> tuple[ReuseClass, float] | None:
        """(class, time of last read) of a remembered block."""
        found = self._last.get(key)
        return None if found is None else (found[0], found[1])

    def fit(self, cls: ReuseClass) -> tuple[float, float]:
        """(p, λ): the class's reuse probability and reuse rate per second, backed off to its coarse class."""
        fitted = self._fit.get(cls)
        if fitted is None:
            p = self.params
            coarse = cls[:3]
            prior_reuses = p.prior_weight * p.prior_probability
            c_reuses = self._reuses.get(coarse, 0.0) + prior_reuses
            c_probability = c_reuses / (self._accesses.get(coarse, 0.0) + p.prior_weight)
            c_time = (self._reuse_time.get(coarse, 0.0) + prior_reuses * p.prior_reuse_s) / c_reuses
            if len(cls) > 3:
                w = p.backoff_weight
                reuses = self._reuses.get(cls, 0.0) + w * c_probability
                probability = reuses / (self._accesses.get(cls, 0.0) + w)
                rate = reuses / (self._reuse_time.get(cls, 0.0) + w * c_probability * c_time)
            else:
                probability, rate = c_probability, 1.0 / c_time
            fitted = self._fit[cls] = (min(probability, 0.999), rate)
        return fitted

    def probability(self, cls: ReuseClass, age: float) -> float:
        """Chance that a block of `cls`, unread for `age` seconds, is read again at all."""
        p, rate = self.fit(cls)
        survive = p * math.exp(-rate * max(0.0, age))
        return survive / (survive + 1.0 - p)

    def reuse_rate(self, cls: ReuseClass, age: float) -> float:
        """Expected reads per second from now on: probability(cls, age) × λ."""
        return self.probability(cls, age) * self.fit(cls)[1]

    def within(self, cls: ReuseClass, age: float, window_s: float) -> float:
        """Chance that a block of `cls`, unread for `age` seconds, is read in the next `window_s` seconds."""
        rate = self.fit(cls)[1]
        return self.probability(cls, age) * (1.0 - math.exp(-rate * window_s))


def recompute_weight(block: BlockInfo, depth_weight: float) -> float:
    """Prefill work a hit saves, in token-equivalents: tokens, plus attention over the prefix before it."""
    return block.tokens * (1.0 + depth_weight * block.depth)
