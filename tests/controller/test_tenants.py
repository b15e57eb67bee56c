"""Trust (docs/protocol.md): per-tenant policy of the client paths: who may INSERT, who may pin, slot quotas; ERR_DENIED, counted."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.__main__ import build_parser
from controller.client_ops import ClientService
from controller.pool import Denied, PinError, PoolManager, PoolOptions
from controller.tenants import TenantPolicy
from controller.tiers import TierMap, TierMover
from kvpool.constants import Flag, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies


def make_pool(tenants: TenantPolicy, capacity=4) -> tuple[PoolManager, FakeDataPlane]:
    dp = FakeDataPlane(capacity)
    pool = PoolManager(dp, make_policies(threshold=1), mover=TierMover(TierMap(), FakeStorage()), clock=Clock(),
                       options=PoolOptions(tenants=tenants))
    return pool, dp


def insert(svc: ClientService, tenant: int, prefix_hash: int, flags: int = 0) -> KVP:
    frame = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.100") / UDP(sport=40000, dport=7420)
                  / KVP(opcode="INSERT", tenant=tenant, prefix_hash=prefix_hash, flags=flags))
    reply = svc.handle(frame)
    assert reply is not None
    return Ether(reply)[KVP]


def test_insert_from_a_tenant_not_allowed_is_denied_and_counted():
    pool, dp = make_pool(TenantPolicy(insert=frozenset({1})))
    svc = ClientService(pool)
    assert insert(svc, 1, 0x10).status == Status.OK
    assert insert(svc, 2, 0x20).status == Status.ERR_DENIED
    assert set(dp.index) == {ChunkKey(1, 0x10, 0)}
    assert pool.metrics.snapshot()["denied"] == {"insert": 1}


def test_pin_flag_from_a_tenant_not_allowed_to_pin_is_denied():
    pool, _dp = make_pool(TenantPolicy(pin=frozenset()))
    reply = insert(ClientService(pool), 3, 0x30, Flag.PIN)
    assert reply.status == Status.ERR_DENIED and pool.pins.all() == []
    assert pool.metrics.denied["pin"] == 1


def test_a_tenant_at_its_quota_cannot_take_more_slots_others_can():
    pool, dp = make_pool(TenantPolicy(quota={1: 2}), capacity=8)
    for i in range(4):
        pool.on_hot_key(ChunkKey(1, 0x100 + i, 0))
    pool.on_hot_key(ChunkKey(2, 0x200, 0))
    assert sum(1 for k in dp.index if k.tenant == 1) == 2 and ChunkKey(2, 0x200, 0) in dp.index
    assert pool.metrics.denied["quota"] == 2
    with pytest.raises(PinError, match="quota"):
        pool.offer(ChunkKey(1, 0x1FF, 0), pin=True)
    pool.pin(ChunkKey(1, 0x1FE, 0))  # the operator is not bound by tenant quotas
    assert ChunkKey(1, 0x1FE, 0) in dp.index


def test_offer_raises_denied_for_the_service_to_answer():
    pool, _ = make_pool(TenantPolicy(insert=frozenset()))
    with pytest.raises(Denied):
        pool.offer(ChunkKey(1, 1, 0))


def test_serve_flags_build_the_tenant_policy():
    policy = TenantPolicy.from_options("1,2", "none", ["1=10", "3=0"], 5)
    assert policy.may_insert(2) and not policy.may_insert(3) and not policy.may_pin(1)
    assert (policy.quota_of(1), policy.quota_of(3), policy.quota_of(9)) == (10, 0, 5)
    args = build_parser().parse_args(["serve", "--switch", "h:1", "--p4info", __file__, "--device-config", __file__,
                                      "--state", "s", "--insert-tenants", "1", "--tenant-quota", "1=4"])
    assert (args.insert_tenants, args.tenant_quota) == ("1", ["1=4"])


@pytest.mark.parametrize("bad", [["x=1"], ["1"], ["1=-1"], ["70000=1"]])
def test_bad_quota_text_is_explained(bad):
    with pytest.raises(ValueError, match="tenant"):
        TenantPolicy.from_options(quotas=bad)
