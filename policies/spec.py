"""One policy spec for every driver: which admission, eviction and recycling policy, with which parameters.

Text syntax (command lines, reports): `ADMISSION+EVICTION+RECYCLING`, each part `NAME[:key=value;key=value]`;
`EVICTION` alone or `ADMISSION+EVICTION` take the parse defaults for the missing parts. Parameters of the shared
reuse model (the `value` policies) are the group "model". The controller (`--admission/--eviction/--param
KIND.NAME=VALUE`, `policy set KIND NAME k=v`) and the evaluator (`--policies always+lru,value+value+residual`)
build the same `PolicySpec` and get their policies from `policies.registry` through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policies import registry
from policies.base import AdmissionPolicy, EvictionPolicy, RecyclingPolicy, Tier
from policies.pool import Pool

KINDS = ("admission", "eviction", "recycling")
MODEL = "model"
"""Parameter group of the shared reuse model."""


@dataclass
class PolicySet:
    """The three policies one pool runs, and the parameters they were built with (by kind, for display)."""

    admission: AdmissionPolicy
    eviction: EvictionPolicy
    recycling: RecyclingPolicy
    params: dict[str, dict[str, str]] = field(default_factory=dict)


def _split_params(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, rest.split(";")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"policy parameter {item!r} is not key=value")
        params[key.strip()] = value.strip()
    return name.strip(), params


@dataclass(frozen=True)
class PolicySpec:
    """Names and parameters (strings, as typed) of a pool's three policies; the default is the project's."""

    admission: str = "value"
    eviction: str = "value"
    recycling: str = "residual"
    params: Mapping[str, Mapping[str, str]] = field(default_factory=dict, hash=False)
    """Parameters by kind: "admission", "eviction", "recycling", and "model" for the shared reuse model."""
    label: str = ""
    """A display name (the text it was parsed from); "" = derived from the names."""

    @classmethod
    def parse(cls, text: str, default_admission: str = "always", default_recycling: str = "drop") -> PolicySpec:
        """`lru`, `tinylfu+lru`, `always+lru+demote`, `freq:threshold=2+lru` → a spec; bad text → ValueError."""
        parts = text.split("+")
        if not text.strip() or any(not p.strip() for p in parts) or len(parts) > 3:
            raise ValueError(f"policy {text!r}: expected EVICTION, ADMISSION+EVICTION or ADMISSION+EVICTION+RECYCLING")
        if len(parts) == 1:
            parts = [default_admission, parts[0], default_recycling]
        elif len(parts) == 2:
            parts = [*parts, default_recycling]
        (a, ap), (e, ep), (r, rp) = (_split_params(p) for p in parts)
        params = {kind: p for kind, p in zip(KINDS, (ap, ep, rp), strict=True) if p}
        return cls(a, e, r, params, text.strip())

    @property
    def name(self) -> str:
        return self.label or f"{self.admission}+{self.eviction}+{self.recycling}"

    def params_of(self, kind: str) -> dict[str, str]:
        return dict(self.params.get(kind, {}))

    @property
    def admission_params(self) -> dict[str, str]:
        return self.params_of("admission")

    @property
    def eviction_params(self) -> dict[str, str]:
        return self.params_of("eviction")

    @property
    def recycling_params(self) -> dict[str, str]:
        return self.params_of("recycling")

    def with_policy(self, kind: str, name: str, params: Mapping[str, str]) -> PolicySpec:
        """This spec with one policy replaced (its parameters too); the label is dropped."""
        if kind not in KINDS:
            raise ValueError(f"unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
        merged = {k: dict(v) for k, v in self.params.items()}
        merged[kind] = dict(params)
        changes: dict[str, Any] = {kind: name, "params": merged, "label": ""}
        return replace(self, **changes)

    def policies(self, capacity_blocks: int) -> PolicySet:
        """The three policies for a pool of `capacity_blocks`, built as `registry.make_pool` builds them (the
        `value` admission and eviction share one reuse model)."""
        params = {kind: self.params_of(kind) for kind in (*KINDS, MODEL)}
        admission, eviction, recycling = registry.make_policies(
            capacity_blocks, self.admission, self.eviction, self.recycling, admission_params=params["admission"],
            eviction_params=params["eviction"], recycling_params=params["recycling"],
            model_params=params[MODEL] or None)
        return PolicySet(admission, eviction, recycling, params)

    def build(self, capacity_blocks: int, tier: Tier = Tier.SWITCH, log: bool = False) -> Pool:
        """A fresh `Pool` running this spec (the evaluator's driver); `log` keeps its events."""
        return registry.make_pool(
            capacity_blocks, self.admission, self.eviction, self.recycling,
            admission_params=self.admission_params, eviction_params=self.eviction_params,
            recycling_params=self.recycling_params, model_params=self.params_of(MODEL) or None, tier=tier,
            log_limit=None if log else 0,
        )

    def check(self) -> None:
        """Build a one-slot pool so unknown names or parameters fail before a long run starts."""
        self.build(1)
