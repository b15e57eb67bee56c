"""Building and swapping the pool's policies by name (`--admission value`, `policy set eviction lru k=v`).

The spec is `policies.spec.PolicySpec`, the evaluator's too; policies come from `policies.registry` through it.
A `PolicyFactory` can replace the registry (tests, experiments). Swapping a policy at run time rebuilds the set
and tells the new eviction policy about every resident chunk, so it is never blind to its victims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policies import registry
from policies.spec import KINDS, MODEL, PolicySet, PolicySpec

__all__ = ["KINDS", "MODEL", "PolicyFactory", "PolicySpec", "build_policies", "infer_kind"]

PolicyFactory = Callable[[str, str, dict[str, str]], Any]
"""(kind, name, params) → a policy of that kind; raises ValueError for an unknown name or parameter."""


def build_policies(spec: PolicySpec, capacity: int, factory: PolicyFactory | None = None) -> PolicySet:
    """The three policies of `spec` for a pool of `capacity` slots."""
    if factory is not None:
        params = {kind: spec.params_of(kind) for kind in (*KINDS, MODEL)}
        return PolicySet(factory("admission", spec.admission, params["admission"]),
                         factory("eviction", spec.eviction, params["eviction"]),
                         factory("recycling", spec.recycling, params["recycling"]), params)
    for kind, name in (("admission", spec.admission), ("eviction", spec.eviction)):
        if registry.needs_requests(kind, name):
            raise ValueError(f"{kind} policy {name!r} ranks whole requests (BlockInfo.request), which the "
                             "controller does not see: it runs in the evaluator only")
    return spec.policies(capacity)


def infer_kind(name: str) -> str:
    """The kind of a registered policy name, when only one kind has it (`lru` → eviction)."""
    kinds = [kind for kind, names in registry.names().items() if name in names]
    if len(kinds) == 1:
        return kinds[0]
    if not kinds:
        raise ValueError(f"no policy named {name!r}; known: {registry.names()}")
    raise ValueError(f"{name!r} is a {' and a '.join(kinds)} policy: say which, e.g. `policy set {kinds[0]} {name}`")
