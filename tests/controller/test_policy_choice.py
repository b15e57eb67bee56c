"""Which registered policies the controller accepts: the evaluator-only ones are refused with a reason."""

from __future__ import annotations

import pytest

from controller.policy import PolicySpec, build_policies


@pytest.mark.parametrize("spec", [
    PolicySpec(admission="conversation"),
    PolicySpec(eviction="conversation"),
])
def test_request_level_policies_are_refused_with_the_reason(spec):
    with pytest.raises(ValueError, match="evaluator only"):
        build_policies(spec, capacity=8)


@pytest.mark.parametrize("spec", [
    PolicySpec(),
    PolicySpec(admission="tinylfu", eviction="lru", recycling="drop"),
    PolicySpec(admission="always", eviction="kvcache_wild"),
])
def test_block_level_policies_are_built(spec):
    policies = build_policies(spec, capacity=8)
    assert (policies.admission.name, policies.eviction.name) == (spec.admission, spec.eviction)
