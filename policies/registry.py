"""Policies by name, with parameters given as a `{"name": value}` mapping (values may be CLI strings).

    make_admission("tinylfu", {"width": "8192"})
    make_eviction("s3fifo", None, capacity_blocks=1828)
    make_pool(1828, admission="value", eviction="value", recycling="residual")

Unknown names and unknown or mistyped parameters raise ValueError naming what is known. Every policy is
built the same way, `Entry.build(params, PolicyContext)`; `make_policies` / `make_pool` give a pool's pair one
context, so the `value` admission and eviction share one reuse model (the admission feeds it, the eviction
reads it), which is what the controller and the evaluator should use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policies.adaptive import (
    AdaptiveAdmission,
    AdaptiveAdmissionParams,
    AdaptiveEviction,
    AdaptiveParams,
    Ensemble,
)
from policies.admission.always import AlwaysAdmission, AlwaysParams
from policies.admission.conversation import ConversationAdmission, ConversationAdmissionParams
from policies.admission.frequency import FrequencyAdmission, FrequencyParams
from policies.admission.tinylfu import TinyLFUAdmission, TinyLFUParams
from policies.admission.value import ValueAdmission, ValueAdmissionParams
from policies.base import AdmissionPolicy, EvictionPolicy, Params, RecyclingPolicy, Tier
from policies.conversation import ReturnModel, ReturnParams
from policies.eviction.arc import ARCEviction, ARCParams
from policies.eviction.conversation import ConversationEviction, ConversationEvictionParams
from policies.eviction.kvcache_wild import KVCacheWildEviction, KVCacheWildParams
from policies.eviction.lfu import LFUEviction, LFUParams
from policies.eviction.lru import LRUEviction, LRUParams
from policies.eviction.prefix_lru import PrefixLRUEviction, PrefixLRUParams
from policies.eviction.s3fifo import S3FIFOEviction, S3FIFOParams
from policies.eviction.value import ValueEviction, ValueEvictionParams
from policies.pool import Pool
from policies.recycling.demote import DemoteParams, DemoteRecycling
from policies.recycling.drop import DropParams, DropRecycling
from policies.recycling.residual import ResidualParams, ResidualRecycling
from policies.reuse import ReuseModel, ReuseParams

Mapping = dict[str, Any] | None

ShadowFactory = Callable[[int, str, str, int | None], Pool]
"""(capacity_blocks, admission name, eviction name, log_limit) → a fresh shadow `Pool` with drop recycling on
the switch tier (the `adaptive` pair's experts); passed in so that a policy never imports its own catalogue."""


class PolicyContext:
    """What every policy is built with besides its parameters: one constructor signature for all of them,
    `build(params, context)`, as libCacheSim gives every policy one.

    A pool's admission and eviction may share one model (`shared`): the one named by both their entries' `shares`.
    The first of the two to ask creates it, the other gets the same object; a policy whose partner does not share
    gets None and builds its own (or refuses, when it only exists as half of a pair).
    """

    def __init__(self, capacity_blocks: int | None = None, model_params: Mapping = None, *,
                 sharing: str | None = None, provided: dict[str, Any] | None = None,
                 shadows: ShadowFactory | None = None) -> None:
        self.capacity_blocks = capacity_blocks
        self.model_params = model_params
        self.sharing = sharing
        """The name of the model this pool's admission and eviction share, if any."""
        self._models: dict[str, Any] = dict(provided or {})
        self.shadows = shadows

    def shared(self, name: str, create: Callable[[], Any] | None = None) -> Any:
        """The shared model `name`: given by the caller, or shared by this pool's pair (created by `create`
        on first use); None when neither."""
        if name in self._models:
            return self._models[name]
        if name != self.sharing or create is None:
            return None
        self._models[name] = model = create()
        return model

    def capacity(self, policy: str) -> int:
        if self.capacity_blocks is None:
            raise ValueError(f"eviction policy {policy!r} needs capacity_blocks")
        return self.capacity_blocks


@dataclass(frozen=True)
class Entry:
    """A registered policy: its parameter class, how to build it, and what it shares with its partner."""

    params: type[Params]
    build: Callable[[Any, PolicyContext], Any]
    """(parsed parameters, context) → the policy."""
    shares: str | None = None
    """The model it shares with a partner policy naming the same one: "reuse" (`value`: the admission feeds
    it, the eviction reads it), "return" (`conversation`: the eviction feeds it) or "ensemble" (`adaptive`)."""
    needs_requests: bool = False
    """It ranks whole requests (`BlockInfo.request`), which only the evaluator's traces carry."""


def _reuse(context: PolicyContext) -> ReuseModel:
    return ReuseModel(ReuseParams.from_mapping(context.model_params))


def _return(context: PolicyContext) -> ReturnModel:
    return ReturnModel(ReturnParams.from_mapping(context.model_params))


def _ensemble_of(context: PolicyContext, params: AdaptiveParams | None) -> Ensemble:
    if context.model_params:
        raise ValueError("model_params given but the adaptive pool's experts keep their own models")
    ensemble = context.shared("ensemble", None if params is None else lambda: Ensemble(
        context.capacity("adaptive"), params, shadows=_shadows(context)))
    if ensemble is None:
        raise ValueError("'adaptive' is built by make_pool only: its admission and eviction share one ensemble "
                         "(adaptive admission and eviction come together: adaptive+adaptive)")
    return ensemble


def _shadows(context: PolicyContext) -> ShadowFactory:
    return context.shadows or shadow_pool


def shadow_pool(capacity_blocks: int, admission: str, eviction: str, log_limit: int | None) -> Pool:
    """The registry's `ShadowFactory`: `make_pool` with drop recycling on the switch tier."""
    return make_pool(capacity_blocks, admission, eviction, "drop", tier=Tier.SWITCH, log_limit=log_limit)


ADMISSION: dict[str, Entry] = {
    "always": Entry(AlwaysParams, lambda p, c: AlwaysAdmission(p)),
    "frequency": Entry(FrequencyParams, lambda p, c: FrequencyAdmission(p)),
    "tinylfu": Entry(TinyLFUParams, lambda p, c: TinyLFUAdmission(p)),
    "value": Entry(ValueAdmissionParams, lambda p, c: ValueAdmission(
        p, model=c.shared("reuse", lambda: _reuse(c)), model_params=ReuseParams.from_mapping(c.model_params)),
        shares="reuse"),
    "conversation": Entry(ConversationAdmissionParams, lambda p, c: ConversationAdmission(
        p, model=c.shared("return", lambda: _return(c)), model_params=ReturnParams.from_mapping(c.model_params)),
        shares="return", needs_requests=True),
    # needs_requests: one of its experts ranks whole requests, so the controller refuses it with that reason.
    "adaptive": Entry(AdaptiveAdmissionParams, lambda p, c: AdaptiveAdmission(_ensemble_of(c, None), p),
                      shares="ensemble", needs_requests=True),
}
EVICTION: dict[str, Entry] = {
    "lru": Entry(LRUParams, lambda p, c: LRUEviction(p)),
    "lfu": Entry(LFUParams, lambda p, c: LFUEviction(p)),
    "s3fifo": Entry(S3FIFOParams, lambda p, c: S3FIFOEviction(c.capacity("s3fifo"), p)),
    "arc": Entry(ARCParams, lambda p, c: ARCEviction(c.capacity("arc"), p)),
    "prefix_lru": Entry(PrefixLRUParams, lambda p, c: PrefixLRUEviction(p)),
    "value": Entry(ValueEvictionParams, lambda p, c: ValueEviction(
        p, model=c.shared("reuse", lambda: _reuse(c)), model_params=ReuseParams.from_mapping(c.model_params)),
        shares="reuse"),
    "kvcache_wild": Entry(KVCacheWildParams, lambda p, c: KVCacheWildEviction(p)),
    "conversation": Entry(ConversationEvictionParams, lambda p, c: ConversationEviction(
        p, model=c.shared("return", lambda: _return(c)), model_params=ReturnParams.from_mapping(c.model_params)),
        shares="return", needs_requests=True),
    "adaptive": Entry(AdaptiveParams, lambda p, c: AdaptiveEviction(_ensemble_of(c, p)), shares="ensemble",
                      needs_requests=True),
}
RECYCLING: dict[str, Entry] = {
    "drop": Entry(DropParams, lambda p, c: DropRecycling(p)),
    "demote": Entry(DemoteParams, lambda p, c: DemoteRecycling(p)),
    "residual": Entry(ResidualParams, lambda p, c: ResidualRecycling(p)),
}
KINDS = {"admission": ADMISSION, "eviction": EVICTION, "recycling": RECYCLING}


def names() -> dict[str, list[str]]:
    """Registered names per kind: {"admission": [...], "eviction": [...], "recycling": [...]}."""
    return {kind: sorted(table) for kind, table in KINDS.items()}


def params_class(kind: str, name: str) -> type[Params]:
    """The frozen parameter class of a registered policy (for help texts and validation)."""
    return _entry(kind, name).params


def needs_requests(kind: str, name: str) -> bool:
    """True when the policy ranks whole requests (`BlockInfo.request`): it runs in the evaluator only."""
    return _entry(kind, name).needs_requests


def _entry(kind: str, name: str) -> Entry:
    table = KINDS.get(kind)
    if table is None:
        raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
    if name not in table:
        raise ValueError(f"unknown {kind} policy {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def build(kind: str, name: str, params: Mapping, context: PolicyContext) -> Any:
    """The one way every policy is built: its entry's builder, its parameters parsed, the context given."""
    entry = _entry(kind, name)
    return entry.build(entry.params.from_mapping(params), context)


def make_admission(
    name: str,
    params: Mapping = None,
    *,
    model: ReuseModel | None = None,
    return_model: ReturnModel | None = None,
    model_params: Mapping = None,
) -> AdmissionPolicy:
    """One admission policy on its own; `model` / `return_model` are shared models the caller provides (else it
    builds its own from `model_params`)."""
    provided = {name: m for name, m in (("reuse", model), ("return", return_model)) if m is not None}
    return build("admission", name, params, PolicyContext(None, model_params, provided=provided))


def make_eviction(
    name: str,
    params: Mapping = None,
    *,
    capacity_blocks: int | None = None,
    model: ReuseModel | None = None,
    model_params: Mapping = None,
    return_model: ReturnModel | None = None,
) -> EvictionPolicy:
    """`capacity_blocks` is required by s3fifo and arc (their queue sizes derive from it). A `value`
    eviction given `model` only reads it (its feeder is the `value` admission); without one it builds
    its own from `model_params` and feeds it from every access."""
    provided = {name: m for name, m in (("reuse", model), ("return", return_model)) if m is not None}
    return build("eviction", name, params, PolicyContext(capacity_blocks, model_params, provided=provided))


def make_recycling(name: str, params: Mapping = None) -> RecyclingPolicy:
    return build("recycling", name, params, PolicyContext())


def make_policies(
    capacity_blocks: int,
    admission: str = "value",
    eviction: str = "value",
    recycling: str = "residual",
    *,
    admission_params: Mapping = None,
    eviction_params: Mapping = None,
    recycling_params: Mapping = None,
    model_params: Mapping = None,
    shadows: ShadowFactory | None = None,
) -> tuple[AdmissionPolicy, EvictionPolicy, RecyclingPolicy]:
    """The three policies of one pool, built the same way: one context, the pair's shared model in it.

    The eviction is built first (the `adaptive` ensemble is made from its parameters; the admission joins it).
    """
    admission_entry, eviction_entry = _entry("admission", admission), _entry("eviction", eviction)
    sharing = admission_entry.shares if admission_entry.shares == eviction_entry.shares else None
    if model_params and admission_entry.shares is None and eviction_entry.shares is None:
        raise ValueError("model_params given but neither policy uses the reuse model")
    context = PolicyContext(capacity_blocks, model_params, sharing=sharing, shadows=shadows)
    evicting = build("eviction", eviction, eviction_params, context)
    admitting = build("admission", admission, admission_params, context)
    return admitting, evicting, build("recycling", recycling, recycling_params, context)


def make_pool(
    capacity_blocks: int,
    admission: str = "value",
    eviction: str = "value",
    recycling: str = "residual",
    *,
    admission_params: Mapping = None,
    eviction_params: Mapping = None,
    recycling_params: Mapping = None,
    model_params: Mapping = None,
    tier: Tier = Tier.SWITCH,
    log_limit: int | None = 100_000,
    shadows: ShadowFactory | None = None,
) -> Pool:
    """A `Pool` with the named policies; the project default is value / value / residual."""
    admitting, evicting, recycling_policy = make_policies(
        capacity_blocks, admission, eviction, recycling, admission_params=admission_params,
        eviction_params=eviction_params, recycling_params=recycling_params, model_params=model_params,
        shadows=shadows)
    return Pool(capacity_blocks, admitting, evicting, recycling_policy, tier=tier, log_limit=log_limit)
