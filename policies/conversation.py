"""Online estimate of *when* a conversation comes back, and what holding its blocks is worth meanwhile.

Most reuse in a chat trace is a conversation re-reading its own prompt at its next turn, so the unit of
value is the request (one turn), not the block: when the next turn arrives every full block of the
previous prompt is read again together, and until then they are worth the same per slot. This model
keeps each request as a *unit* with the features known when it arrived (turn, prompt length, the gap
before it, the previous turn's output length) and learns, per class of those features, the
distribution of the time until the next turn, by Kaplan–Meier over age bins (a unit that has not come
back yet is censored at its age; nothing is read ahead). Sparse fine classes shrink towards a coarse
class (turn, prompt length), which shrinks towards the whole trace.

From that distribution comes the unit's *hit density* at age a (as in LHD, Beckmann et al., NSDI'18):
the best achievable ratio, over holding horizons H, of P(next turn within (a, a+H] | not back by a) to
the expected slot-seconds spent holding a block meanwhile. It is the quantity Belady's MIN ranks by
when the return time is known exactly (1 / time to next use), averaged over what the model knows.

Blocks shared across conversations (the common root block, system prompts) are valued by their own
rate of reads from *other* conversations, and a prompt's partial tail block, which the next turn
re-hashes, by the learned chance that such a block is read again at all.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from policies.base import BlockInfo, CacheKey, Params

AGE_EDGES_S: tuple[float, ...] = (
    0, 3, 6, 9, 12, 15, 20, 25, 30, 40, 50, 60, 75, 90, 105, 120, 150, 180, 210, 240, 300, 360, 420, 480,
    600, 720, 900, 1200,
)  # fmt: skip
"""Age bins (seconds) of the return-time distribution; 3 s steps first because trace times are 3 s quanta.
Returns after the last edge count as never (a pool could not hold a block that long anyway)."""


@dataclass(frozen=True)
class ReturnParams(Params):
    """Classes, priors and refresh of the return-time model."""

    use_turn: bool = True
    """Split classes by turn (1, 2, 3–4, ≥5)."""
    use_prompt_length: bool = False
    """Split classes by prompt length (1, 2–4, 5–16, 17–64, ≥65 blocks). Off by default: on the Mooncake
    conversation trace at 1% it lowered the online hit ratio (turn only 0.1044; + prompt length, gap and
    previous output 0.1004; with `use_branches`, 0.1113 → 0.1076), the sparser classes learning too slowly."""
    use_turn_gap: bool = False
    """Split classes by the gap before this turn (< 60, < 120, < 240, ≥ 240 s; first turns apart). Off by
    default: 0.1044 → 0.1013 at 1%."""
    use_previous_output: bool = True
    """Split classes by the previous turn's output length (< 50, < 200, < 500, ≥ 500 tokens). A small gain
    with `use_branches` (1%: 0.1099 → 0.1113, 5%: 0.2186 → 0.2207); none without (0.1044 → 0.1042)."""
    shrinkage: float = 30.0
    """Pseudo-units with which a class starts from its parent class's hazard in each age bin."""
    prior_probability: float = 0.3
    """Chance of a next turn assumed before any data."""
    prior_return_s: float = 120.0
    """Mean time to the next turn assumed before any data (exponential)."""
    horizon_s: float = 1200.0
    """Longest holding horizon the hit density considers (seconds, ≤ the last age edge): a pool that turns
    over faster cannot hold a block for longer, so returns beyond it do not count (LRB's Belady boundary).
    No cap by default: on the Mooncake conversation trace at 1%, 30/60/90/120/180/300 s gave
    0.094/0.099/0.101/0.106/0.105/0.104 against 0.104 uncapped, too irregular to call a gain."""
    refit_s: float = 30.0
    """Seconds of (trace) time between refits of the hazards."""
    block_tokens: int = 512
    """Tokens of a full block; a shorter last block is a partial tail."""
    use_branches: bool = True
    """Add the learned rate at which a block is read by a request that is *not* its conversation's next
    turn (an edited or branched conversation re-reading an older prefix, another chat sharing a document),
    per class of (earlier reads ≤ 3, partial tail) and age, to the conversation's hit density. On the
    Mooncake conversation trace: 1% 0.1044 → 0.1099, 5% 0.2117 → 0.2186 (turn-only classes)."""
    branch_prior_probability: float = 0.05
    """Chance of such a read assumed before a class has data."""
    branch_prior_s: float = 300.0
    """Mean time to such a read assumed before a class has data."""
    popularity_floor_s: float = 60.0
    """Added to a shared block's observed lifetime when estimating its read rate (damps young blocks)."""
    memory: int = 1_000_000
    """Blocks remembered for cross-conversation and branch counts (least recently read forgotten first)."""
    max_units: int = 200_000
    """Requests remembered for the hazards and for linking next turns (oldest forgotten first), so a
    long-running controller keeps bounded state."""
    """Blocks remembered for cross-conversation counts (oldest forgotten first)."""


def _bucket(value: float, edges: tuple[float, ...]) -> int:
    return bisect.bisect_right(edges, value)


@dataclass(slots=True)
class Unit:
    """One request: when it arrived, its class, and whether/when its conversation came back."""

    birth: float
    turn: int
    """1 + the turn of the request it continues (`BlockInfo.previous_request`), 1 if none."""
    fine: int
    gap: float = math.inf
    """Seconds from its arrival to the first request continuing it; inf = not (yet)."""
    returned_by: int = -1
    """Arrival number of the first request continuing it; -1 = not (yet)."""


class ReturnModel:
    """Units (requests) with their return-time classes, block popularity, and the fitted hit densities."""

    def __init__(self, params: ReturnParams | None = None) -> None:
        self.params = p = params or ReturnParams()
        if p.shrinkage <= 0 or p.refit_s <= 0 or p.block_tokens < 1 or p.memory < 1 or p.max_units < 1:
            raise ValueError(f"return model: bad parameters {p}")
        if not 0.0 < p.prior_probability < 1.0 or p.prior_return_s <= 0 or p.popularity_floor_s <= 0:
            raise ValueError(f"return model: bad priors {p}")
        self.units: dict[int, Unit] = {}
        self._classes: dict[tuple[int, ...], int] = {}
        self._coarse_of: list[int] = []
        self._coarse: dict[tuple[int, ...], int] = {}
        self._last_unit: dict[CacheKey, int] = {}
        self._first_seen: dict[CacheKey, float] = {}
        self._cross_reads: dict[CacheKey, int] = {}
        self._tail_first: set[CacheKey] = set()
        self._read: dict[CacheKey, tuple[tuple[int, bool], float]] = {}  # key → (branch class, last read)
        self._branch_reads: dict[tuple[int, bool], list[float]] = {}  # class → [reads, branch reads, seconds]
        self._branch_fit: dict[tuple[int, bool], tuple[float, float]] = {}
        self._tails = 0
        self._tails_read_again = 0
        self.current = -1
        """Arrival number of the request whose blocks are being read now."""
        self._fitted_at = -math.inf
        self.generation = 0
        """Bumped at every refit, so readers can cache values computed from the fit."""
        edges = np.asarray(AGE_EDGES_S, dtype=float)
        self._edges = edges
        self._index = self._fit_table(np.zeros((1, len(edges))), np.zeros((1, len(edges))), [0])
        self._index_rows: list[list[float]] = self._index.tolist()

    # ------------------------------------------------------------ observing
    def conversation(self, block: BlockInfo, now: float) -> tuple[int, float]:
        """(turn, seconds since the previous turn arrived or -1) of the request reading `block`, by the
        annotator's strict continuation link (a shared document is not a previous turn)."""
        previous = self.units.get(block.previous_request)
        if previous is None:
            return 1, -1.0
        return previous.turn + 1, now - previous.birth

    def classify(self, block: BlockInfo, turn: int, gap_s: float) -> tuple[int, ...]:
        """The fine class of a request: features known when it arrived (`turn`, `gap_s` from `conversation`)."""
        p = self.params
        turn = min(turn, 5) - (turn >= 4) if p.use_turn else 0  # 1, 2, 3–4 → 3, ≥5 → 4
        length = _bucket(block.request_blocks, (2, 5, 17, 65)) if p.use_prompt_length else 0
        gap = -1 if gap_s < 0 or not p.use_turn_gap else _bucket(gap_s, (60, 120, 240))
        out = (
            -1
            if block.previous_output_tokens < 0 or not p.use_previous_output
            else _bucket(block.previous_output_tokens, (50, 200, 500))
        )
        return (turn, length, gap, out)

    def observe(self, block: BlockInfo, now: float) -> int:
        """Account one read; returns the unit (request) the block now belongs to. Needs `block.request`."""
        request = block.request
        if request < 0:
            raise ValueError(f"return model needs annotated requests (BlockInfo.request), got {block!r}")
        if request != self.current:
            self._start(block, now)
        key = block.key
        last = self._last_unit.pop(key, None)  # re-inserted below: dict order = least recently read first
        if last is None:
            self._first_seen[key] = now
            if block.is_last and block.tokens < self.params.block_tokens:
                self._tails += 1
                self._tail_first.add(key)
            if len(self._last_unit) >= self.params.memory:
                self._forget()
        else:
            if key in self._tail_first:
                self._tail_first.discard(key)
                self._tails_read_again += 1
            if last != request and last != block.previous_request:
                self._cross_reads[key] = self._cross_reads.get(key, 0) + 1
                if key in self._read:
                    then_class, then = self._read[key]
                    counts = self._branch_reads[then_class]
                    counts[1] += 1.0
                    counts[2] += now - then
        self._last_unit[key] = request
        if self.params.use_branches and last != request:
            found = self._read.get(key)
            reads = 0 if found is None else found[0][0] + 1
            branch = (min(reads, 3), block.is_last and block.tokens < self.params.block_tokens)
            self._read[key] = (branch, now)
            self._branch_reads.setdefault(branch, [0.0, 0.0, 0.0])[0] += 1.0
        return request

    def _start(self, block: BlockInfo, now: float) -> None:
        request = self.current = block.request
        turn, gap = self.conversation(block, now)
        features = self.classify(block, turn, gap)
        fine = self._classes.get(features)
        if fine is None:
            fine = self._classes[features] = len(self._classes)
            self._coarse_of.append(self._coarse.setdefault(features[:2], len(self._coarse)))
        self.units[request] = Unit(now, turn, fine)
        if len(self.units) > self.params.max_units:
            del self.units[next(iter(self.units))]
        previous = self.units.get(block.previous_request)
        if previous is not None and previous.returned_by < 0:
            previous.returned_by = request
            previous.gap = now - previous.birth
        if now - self._fitted_at >= self.params.refit_s or fine >= len(self._index_rows):
            self.refit(now)  # also when a class is new: it needs a row (its parents' estimate, shrunk)

    def _forget(self) -> None:
        oldest = next(iter(self._last_unit))
        del self._last_unit[oldest]
        self._first_seen.pop(oldest, None)
        self._cross_reads.pop(oldest, None)
        self._tail_first.discard(oldest)
        self._read.pop(oldest, None)

    # ------------------------------------------------------------ fitting
    def refit(self, now: float) -> None:
        """Kaplan–Meier hazards per class from every unit so far (censored at its age), then hit densities."""
        self._fitted_at = now
        self.generation += 1
        if not self.units:
            return
        edges = self._edges
        bins = len(edges)  # bin j = [edges[j], edges[j+1]); the last bin is "beyond the horizon"
        units = self.units.values()
        births = np.fromiter((u.birth for u in units), float, len(units))
        fines = np.fromiter((u.fine for u in units), int, len(units))
        gaps = np.fromiter((u.gap for u in units), float, len(units))
        age = now - births
        observed = np.minimum(gaps, age)
        returned = gaps <= age
        count = len(self._classes)
        at_bin = np.clip(np.searchsorted(edges, observed, side="right") - 1, 0, bins - 1)
        exits = np.zeros((count, bins))
        np.add.at(exits, (fines, at_bin), 1.0)
        deaths = np.zeros((count, bins))
        np.add.at(deaths, (fines[returned], at_bin[returned]), 1.0)
        at_risk = exits[:, ::-1].cumsum(axis=1)[:, ::-1]  # units whose observed time reached bin j
        self._index = self._fit_table(at_risk, deaths, self._coarse_of)
        self._index_rows = self._index.tolist()
        self._branch_fit.clear()

    def _prior_hazard(self) -> np.ndarray:
        p = self.params
        cdf = p.prior_probability * (1.0 - np.exp(-self._edges / p.prior_return_s))
        step = np.diff(cdf, append=p.prior_probability)
        return step / np.maximum(1.0 - cdf, 1e-9)

    def _fit_table(self, at_risk: np.ndarray, deaths: np.ndarray, coarse_of: list[int]) -> np.ndarray:
        """Hit density per (fine class, age bin), with hazards shrunk fine → coarse → all → prior."""
        w = self.params.shrinkage
        coarse_index = np.asarray(coarse_of, dtype=int)
        everything = (deaths.sum(axis=0) + w * self._prior_hazard()) / (at_risk.sum(axis=0) + w)
        c_risk = np.zeros((int(coarse_index.max()) + 1, at_risk.shape[1]))
        c_deaths = np.zeros_like(c_risk)
        np.add.at(c_risk, coarse_index, at_risk)
        np.add.at(c_deaths, coarse_index, deaths)
        coarse = (c_deaths + w * everything) / (c_risk + w)
        hazard = (deaths + w * coarse[coarse_index]) / (at_risk + w)
        hazard[:, -1] = 0.0  # beyond the horizon: no return counts
        return hit_density(hazard, self._edges, self.params.horizon_s)

    # ------------------------------------------------------------ values
    def unit_value(self, unit: int, now: float) -> float:
        """Hit density of a not-yet-returned unit's full blocks (reads per slot-second); 0 once it returned."""
        found = self.units.get(unit)
        if found is None:
            return 0.0
        if found.returned_by >= 0:
            # Its leftovers are only worth keeping while the request continuing it is still being read.
            return math.inf if found.returned_by == self.current else 0.0
        j = bisect.bisect_right(AGE_EDGES_S, now - found.birth) - 1
        return self._index_rows[found.fine][j]

    def tail_factor(self) -> float:
        """Chance that a partial tail block is read again (the next turn re-hashes it), with a weak prior."""
        return (self._tails_read_again + 1.0) / (self._tails + 10.0)

    def popularity(self, key: CacheKey, now: float) -> float:
        """Reads per second by other conversations: what a shared block earns per slot-second."""
        reads = self._cross_reads.get(key, 0)
        if not reads:
            return 0.0
        return reads / (now - self._first_seen[key] + self.params.popularity_floor_s)

    def branch_rate(self, key: CacheKey, now: float) -> float:
        """Expected reads per second of `key` by requests other than its conversation's next turn, from its
        class's fitted probability p and exponential rate λ, given it has not been so read for its age."""
        found = self._read.get(key)
        if found is None:
            return 0.0
        branch, then = found
        fitted = self._branch_fit.get(branch)
        if fitted is None:
            p = self.params
            reads, reuses, seconds = self._branch_reads[branch]
            prior = p.branch_prior_probability * 20.0
            probability = min((reuses + prior) / (reads + 20.0), 0.999)
            rate = (reuses + prior) / (seconds + prior * p.branch_prior_s)
            fitted = self._branch_fit[branch] = (probability, rate)
        probability, rate = fitted
        survive = probability * math.exp(-rate * max(0.0, now - then))
        return survive / (survive + 1.0 - probability) * rate

    def block_value(self, block: BlockInfo, unit: int, now: float, unit_value: float | None = None) -> float:
        """What keeping `block` (last read by `unit`) earns per slot-second from now on: its conversation's
        hit density, plus what reads from elsewhere earn (its class's branch rate or its own cross rate).
        `unit_value`: `self.unit_value(unit, now)` when the caller has it already (one per unit, not per block)."""
        value = self.unit_value(unit, now) if unit_value is None else unit_value
        if value == math.inf:
            return value
        params = self.params
        if block.is_last and block.tokens < params.block_tokens:
            value *= self.tail_factor()
        # `popularity` and `branch_rate` inlined (the same arithmetic): this runs for every block the
        # eviction ranks, the hottest code of a conversation replay.
        key = block.key
        reads = self._cross_reads.get(key, 0)
        elsewhere = reads / (now - self._first_seen[key] + params.popularity_floor_s) if reads else 0.0
        if params.use_branches:
            found = self._read.get(key)
            if found is None:
                branched = 0.0
            else:
                fitted = self._branch_fit.get(found[0])
                if fitted is None:
                    branched = self.branch_rate(key, now)
                else:
                    probability, rate = fitted
                    survive = probability * math.exp(-rate * max(0.0, now - found[1]))
                    branched = survive / (survive + 1.0 - probability) * rate
            elsewhere = max(elsewhere, branched)
        return value + elsewhere


def hit_density(hazard: np.ndarray, edges: np.ndarray, horizon_s: float = math.inf) -> np.ndarray:
    """Per class (row) and age bin i: max over horizons k of P(return in bins i..k-1 | alive at i) divided
    by the expected slot-seconds held meanwhile (held until the return or until bin k starts), for
    horizons edges[k] − edges[i] ≤ `horizon_s` (at least one bin)."""
    width = np.diff(edges, append=edges[-1])  # the beyond-horizon bin has no width: never held there
    survive = np.concatenate([np.ones((hazard.shape[0], 1)), np.cumprod(1.0 - hazard, axis=1)], axis=1)
    area = np.concatenate(
        [np.zeros((hazard.shape[0], 1)), np.cumsum((survive[:, :-1] + survive[:, 1:]) / 2 * width, axis=1)],
        axis=1,
    )
    gain = survive[:, :, None] - survive[:, None, :]  # [c, i, k] = S_i − S_k
    cost = area[:, None, :] - area[:, :, None]  # [c, i, k] = area from i to k
    n = hazard.shape[1]
    ends = np.append(edges, math.inf)
    span = ends[None, :] - edges[:, None]  # [i, k] = edges[k] − edges[i]
    later = np.triu(np.ones((n + 1, n + 1), dtype=bool), k=1)
    later[:n] &= (span <= horizon_s) | (np.arange(n + 1)[None, :] == np.arange(n)[:, None] + 1)
    later = later[None]
    density = np.where(later & (cost > 0), gain / np.where(cost > 0, cost, 1.0), 0.0).max(axis=2)
    return density[:, :n]
