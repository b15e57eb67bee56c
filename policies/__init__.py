"""Admission, eviction and recycling policies for the kvswitch pool, shared by controller and evaluator.

`policies.base` is the interface, `policies.registry` builds policies by name, `policies.pool` is the
one cache-bookkeeping driver, `policies.reference` wraps libCacheSim as the yardstick.
"""
