"""The registry builds every policy by name, checks parameters, and every policy fits its Protocol."""

from __future__ import annotations

import dataclasses

import pytest

from policies.base import AdmissionPolicy, EvictionPolicy, RecyclingPolicy
from policies.registry import make_admission, make_eviction, make_pool, make_recycling, names, params_class

PROTOCOLS = {"admission": AdmissionPolicy, "eviction": EvictionPolicy, "recycling": RecyclingPolicy}


def test_names_list_every_policy_of_the_brief() -> None:
    assert names() == {
        "admission": ["adaptive", "always", "conversation", "frequency", "tinylfu", "value"],
        "eviction": ["adaptive", "arc", "conversation", "kvcache_wild", "lfu", "lru", "prefix_lru", "s3fifo", "value"],
        "recycling": ["demote", "drop", "residual"],
    }


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, ns in names().items() for n in ns])
def test_every_registered_policy_builds_and_implements_its_protocol(kind: str, name: str) -> None:
    build = {"admission": make_admission, "eviction": make_eviction, "recycling": make_recycling}[kind]
    if name == "adaptive":  # its two halves share one ensemble: only make_pool builds them
        pool = make_pool(100, "adaptive", "adaptive", "drop")
        policy = pool.admission if kind == "admission" else pool.eviction
    else:
        policy = build(name, None, capacity_blocks=100) if kind == "eviction" else build(name, None)
    assert isinstance(policy, PROTOCOLS[kind])
    assert policy.name == name
    params = params_class(kind, name)
    assert dataclasses.is_dataclass(params)
    assert params.__dataclass_params__.frozen


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: make_admission("nope"),
            "unknown admission policy 'nope'; known: adaptive, always, conversation, frequency",
        ),
        (lambda: make_eviction("lru", {"size": 3}), "unknown parameter"),
        (lambda: make_admission("frequency", {"threshold": "many"}), "expected float"),
        (lambda: make_eviction("arc"), "needs capacity_blocks"),
        (lambda: make_recycling("residual", {"treshold": 1}), "known: threshold"),
        (lambda: make_pool(10, "always", "lru", model_params={"max_turn": 3}), "neither policy uses"),
        (lambda: params_class("colour", "lru"), "unknown policy kind"),
    ],
)
def test_bad_names_and_parameters_raise_value_error_naming_the_choices(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_cli_strings_are_converted_to_the_declared_types() -> None:
    admission = make_admission("frequency", {"threshold": "3", "half_life_s": "60"})
    assert admission.params.threshold == 3.0
    assert admission.params.half_life_s == 60.0
    s3 = make_eviction("s3fifo", {"small_size_ratio": "0.2"}, capacity_blocks=50)
    assert s3.small_size == 10


def test_default_pool_shares_one_reuse_model_between_value_admission_and_eviction() -> None:
    pool = make_pool(10)
    assert (pool.admission.name, pool.eviction.name, pool.recycling.name) == ("value", "value", "residual")
    assert pool.admission.model is pool.eviction.model


def test_value_eviction_alone_builds_its_model_from_model_params() -> None:
    pool = make_pool(10, "always", "value", model_params={"max_turn": "3"})
    assert pool.eviction.model.params.max_turn == 3


def test_every_policy_is_built_through_one_signature() -> None:
    from policies.registry import KINDS, PolicyContext, build

    for kind, table in KINDS.items():
        for name, entry in table.items():
            if entry.shares == "ensemble":
                continue  # half of a pair: built by make_policies only (next test)
            policy = build(kind, name, None, PolicyContext(capacity_blocks=32))
            assert policy.name == name


def test_the_adaptive_ensemble_builds_its_shadows_with_the_factory_it_is_given() -> None:
    from policies.registry import shadow_pool

    asked = []

    def shadows(capacity, admission, eviction, log_limit):
        asked.append((capacity, admission, eviction))
        return shadow_pool(capacity, admission, eviction, log_limit)

    pool = make_pool(40, "adaptive", "adaptive", "drop", shadows=shadows)
    ensemble = pool.admission.ensemble  # type: ignore[attr-defined]
    assert sorted(f"{a}+{e}" for c, a, e in asked if c == 40) == sorted(ensemble.names)  # one full shadow each
    assert all(c <= 40 for c, _, _ in asked)  # the rest: the miniature tie-breakers


def test_a_value_pair_shares_one_reuse_model_and_a_lone_value_policy_keeps_its_own() -> None:
    shared = make_pool(8, "value", "value", "drop")
    assert shared.admission.model is shared.eviction.model  # type: ignore[attr-defined]
    lone = make_pool(8, "value", "lru", "drop")
    own = make_pool(8, "tinylfu", "value", "drop")
    assert lone.admission.model is not None and own.eviction.model is not None  # type: ignore[attr-defined]
