"""Building and swapping the pool's policies by name (`--admission value`, `policy set eviction lru k=v`).

Policies come from `policies.registry` (shared with the evaluator), wired as `registry.make_pool` wires them:
the `value` admission and eviction share one reuse model (the admission feeds it, the eviction reads it).
A `PolicyFactory` can replace the registry (tests, experiments). Swapping a policy at run time rebuilds the
set and tells the new eviction policy about every resident chunk, so it is never blind to its victims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from controller.pool import Policies

if TYPE_CHECKING:
    from controller.pool import PoolManager

KINDS = ("admission", "eviction", "recycling")
MODEL = "model"
"""Parameter group of the shared reuse model (`--param model.NAME=VALUE`)."""

PolicyFactory = Callable[[str, str, dict[str, str]], Any]
"""(kind, name, params) → a policy of that kind; raises ValueError for an unknown name or parameter."""


@dataclass(frozen=True)
class PolicySpec:
    """Which policies, with which parameters (strings, as typed on a command line)."""

    admission: str = "value"
    eviction: str = "value"
    recycling: str = "residual"
    params: dict[str, dict[str, str]] = field(default_factory=dict)
    """Parameters by kind: "admission", "eviction", "recycling", and "model" for the shared reuse model."""

    def with_policy(self, kind: str, name: str, params: dict[str, str]) -> PolicySpec:
        if kind not in KINDS:
            raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
        merged = {k: dict(v) for k, v in self.params.items()}
        merged[kind] = dict(params)
        return replace(self, **{kind: name}, params=merged)


def build_policies(spec: PolicySpec, capacity: int, factory: PolicyFactory | None = None) -> Policies:
    """The three policies of `spec` for a pool of `capacity` slots."""
    params = {kind: dict(spec.params.get(kind, {})) for kind in (*KINDS, MODEL)}
    if factory is not None:
        return Policies(factory("admission", spec.admission, params["admission"]),
                        factory("eviction", spec.eviction, params["eviction"]),
                        factory("recycling", spec.recycling, params["recycling"]), params)
    from policies import registry
    from policies.reuse import ReuseModel, ReuseParams

    if spec.admission not in registry.ADMISSION:
        raise ValueError(f"unknown admission policy {spec.admission!r}; known: {', '.join(sorted(registry.ADMISSION))}")
    for kind, name, table in (("admission", spec.admission, registry.ADMISSION),
                              ("eviction", spec.eviction, registry.EVICTION)):
        if name in table and table[name].uses_return_model:
            raise ValueError(f"{kind} policy {name!r} ranks whole requests (BlockInfo.request), which the "
                             "controller does not see: it runs in the evaluator only")
    model = None
    if registry.ADMISSION[spec.admission].uses_model:
        model = ReuseModel(ReuseParams.from_mapping(params[MODEL]))
    return Policies(
        registry.make_admission(spec.admission, params["admission"], model=model),
        registry.make_eviction(spec.eviction, params["eviction"], capacity_blocks=capacity, model=model,
                               model_params=params[MODEL] or None),
        registry.make_recycling(spec.recycling, params["recycling"]),
        params,
    )


def replace_policy(pool: PoolManager, spec: PolicySpec, factory: PolicyFactory | None = None) -> Policies:
    """Policies for `spec`, with the new eviction policy told about the current residents; call under pool.lock."""
    policies = build_policies(spec, pool.slots.capacity, factory)
    now = pool.clock()
    for key, _ in sorted(pool.slots.items(), key=lambda kv: kv[1]):
        entry = pool.tracked.get(key)
        if entry is not None:
            policies.admission.record(entry.info, now)
            policies.eviction.on_insert(entry.info, now)
    return policies


def infer_kind(name: str) -> str:
    """The kind of a registered policy name, when only one kind has it (`lru` → eviction)."""
    from policies import registry

    kinds = [kind for kind, names in registry.names().items() if name in names]
    if len(kinds) == 1:
        return kinds[0]
    if not kinds:
        raise ValueError(f"no policy named {name!r}; known: {registry.names()}")
    raise ValueError(f"{name!r} is a {' and a '.join(kinds)} policy: say which, e.g. `policy set {kinds[0]} {name}`")
