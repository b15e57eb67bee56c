"""Policies by name, with parameters given as a `{"name": value}` mapping (values may be CLI strings).

    make_admission("tinylfu", {"width": "8192"})
    make_eviction("s3fifo", None, capacity_blocks=1828)
    make_pool(1828, admission="value", eviction="value", recycling="residual")

Unknown names and unknown or mistyped parameters raise ValueError naming what is known. `make_pool`
wires the `value` admission and eviction to one shared reuse model (the admission feeds it, the
eviction reads it), which is what the controller and the evaluator should use.
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


@dataclass(frozen=True)
class Entry:
    """A registered policy: its parameter class and how to build it from parsed parameters."""

    params: type[Params]
    build: Callable[..., Any]
    needs_capacity: bool = False
    uses_model: bool = False
    uses_return_model: bool = False
    """Built around a `policies.conversation.ReturnModel`; `make_pool` shares one between the two
    `conversation` policies (the eviction feeds it, the admission reads it)."""
    uses_ensemble: bool = False
    """One half of the `adaptive` pair (`policies.adaptive`): `make_pool` builds both around one `Ensemble`."""


ADMISSION: dict[str, Entry] = {
    "always": Entry(AlwaysParams, AlwaysAdmission),
    "frequency": Entry(FrequencyParams, FrequencyAdmission),
    "tinylfu": Entry(TinyLFUParams, TinyLFUAdmission),
    "value": Entry(ValueAdmissionParams, ValueAdmission, uses_model=True),
    "conversation": Entry(ConversationAdmissionParams, ConversationAdmission, uses_return_model=True),
    # uses_return_model: one of its experts ranks whole requests, so the controller refuses it with that reason.
    "adaptive": Entry(AdaptiveAdmissionParams, AdaptiveAdmission, uses_return_model=True, uses_ensemble=True),
}
EVICTION: dict[str, Entry] = {
    "lru": Entry(LRUParams, LRUEviction),
    "lfu": Entry(LFUParams, LFUEviction),
    "s3fifo": Entry(S3FIFOParams, S3FIFOEviction, needs_capacity=True),
    "arc": Entry(ARCParams, ARCEviction, needs_capacity=True),
    "prefix_lru": Entry(PrefixLRUParams, PrefixLRUEviction),
    "value": Entry(ValueEvictionParams, ValueEviction, uses_model=True),
    "kvcache_wild": Entry(KVCacheWildParams, KVCacheWildEviction),
    "conversation": Entry(ConversationEvictionParams, ConversationEviction, uses_return_model=True),
    "adaptive": Entry(AdaptiveParams, AdaptiveEviction, uses_return_model=True, uses_ensemble=True),
}
RECYCLING: dict[str, Entry] = {
    "drop": Entry(DropParams, DropRecycling),
    "demote": Entry(DemoteParams, DemoteRecycling),
    "residual": Entry(ResidualParams, ResidualRecycling),
}
KINDS = {"admission": ADMISSION, "eviction": EVICTION, "recycling": RECYCLING}


def names() -> dict[str, list[str]]:
    """Registered names per kind: {"admission": [...], "eviction": [...], "recycling": [...]}."""
    return {kind: sorted(table) for kind, table in KINDS.items()}


def params_class(kind: str, name: str) -> type[Params]:
    """The frozen parameter class of a registered policy (for help texts and validation)."""
    return _entry(kind, name).params


def _entry(kind: str, name: str) -> Entry:
    table = KINDS.get(kind)
    if table is None:
        raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
    if name not in table:
        raise ValueError(f"unknown {kind} policy {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def make_admission(
    name: str,
    params: Mapping = None,
    *,
    model: ReuseModel | None = None,
    return_model: ReturnModel | None = None,
    model_params: Mapping = None,
) -> AdmissionPolicy:
    """`return_model` is read by the `conversation` admission (else it builds one from `model_params`)."""
    entry = _entry("admission", name)
    _no_ensemble(entry, name)
    parsed = entry.params.from_mapping(params)
    if entry.uses_return_model:
        return entry.build(parsed, model=return_model, model_params=ReturnParams.from_mapping(model_params))
    return entry.build(parsed, model=model) if entry.uses_model else entry.build(parsed)


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
    entry = _entry("eviction", name)
    _no_ensemble(entry, name)
    parsed = entry.params.from_mapping(params)
    if entry.needs_capacity:
        if capacity_blocks is None:
            raise ValueError(f"eviction policy {name!r} needs capacity_blocks")
        return entry.build(capacity_blocks, parsed)
    if entry.uses_model:
        return entry.build(parsed, model=model, model_params=ReuseParams.from_mapping(model_params))
    if entry.uses_return_model:
        return entry.build(parsed, model=return_model, model_params=ReturnParams.from_mapping(model_params))
    return entry.build(parsed)


def _no_ensemble(entry: Entry, name: str) -> None:
    if entry.uses_ensemble:
        raise ValueError(f"{name!r} is built by make_pool only: its admission and eviction share one ensemble")


def make_recycling(name: str, params: Mapping = None) -> RecyclingPolicy:
    entry = _entry("recycling", name)
    return entry.build(entry.params.from_mapping(params))


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
) -> Pool:
    """A `Pool` with the named policies; the project default is value / value / residual."""
    admission_entry, eviction_entry = _entry("admission", admission), _entry("eviction", eviction)
    if admission_entry.uses_ensemble or eviction_entry.uses_ensemble:
        if not (admission_entry.uses_ensemble and eviction_entry.uses_ensemble):
            raise ValueError("adaptive admission and eviction come together: adaptive+adaptive")
        if model_params:
            raise ValueError("model_params given but the adaptive pool's experts keep their own models")
        ensemble = Ensemble(capacity_blocks, AdaptiveParams.from_mapping(eviction_params))
        return Pool(
            capacity_blocks,
            AdaptiveAdmission(ensemble, AdaptiveAdmissionParams.from_mapping(admission_params)),
            AdaptiveEviction(ensemble),
            make_recycling(recycling, recycling_params),
            tier=tier,
            log_limit=log_limit,
        )
    if admission_entry.uses_return_model or eviction_entry.uses_return_model:
        return _conversation_pool(
            capacity_blocks, admission, eviction, recycling, admission_params, eviction_params,
            recycling_params, model_params, tier, log_limit,
        )  # fmt: skip
    if model_params and not (admission_entry.uses_model or eviction_entry.uses_model):
        raise ValueError("model_params given but neither policy uses the reuse model")
    model = ReuseModel(ReuseParams.from_mapping(model_params)) if admission_entry.uses_model else None
    return Pool(
        capacity_blocks,
        make_admission(admission, admission_params, model=model),
        make_eviction(
            eviction, eviction_params, capacity_blocks=capacity_blocks, model=model, model_params=model_params
        ),
        make_recycling(recycling, recycling_params),
        tier=tier,
        log_limit=log_limit,
    )


def _conversation_pool(
    capacity_blocks: int,
    admission: str,
    eviction: str,
    recycling: str,
    admission_params: Mapping,
    eviction_params: Mapping,
    recycling_params: Mapping,
    model_params: Mapping,
    tier: Tier,
    log_limit: int | None,
) -> Pool:
    """A pool with a `conversation` policy: `model_params` are `ReturnParams`; when both are
    `conversation` they share one model, fed by the eviction (which sees every access)."""
    model = ReturnModel(ReturnParams.from_mapping(model_params))
    shared = (
        _entry("admission", admission).uses_return_model and _entry("eviction", eviction).uses_return_model
    )
    return Pool(
        capacity_blocks,
        make_admission(
            admission, admission_params, return_model=model if shared else None, model_params=model_params
        ),
        make_eviction(
            eviction,
            eviction_params,
            capacity_blocks=capacity_blocks,
            return_model=model,
            model_params=model_params,
        ),
        make_recycling(recycling, recycling_params),
        tier=tier,
        log_limit=log_limit,
    )
