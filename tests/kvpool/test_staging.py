"""Writes in progress are bounded: a flood of partial writes cannot exhaust the node, and they expire (docs/protocol.md, *Atomic blocks*)."""

from __future__ import annotations

import pytest

from kvpool.constants import KVP_MAX_CHUNK_LEN, Opcode, Status
from kvpool.server import StorageNode, StorageOptions
from kvpool.staging import StagingOptions, chunk_cost, write_cost
from kvpool.wire import Header, encode

BLOCK_CHUNKS = 255
"""Chunks of the partial blocks the flooders start (the largest v1 block; v2 allows 2^32 - 1)."""
CHUNK_COST = chunk_cost(128)
BLOCK_COST = write_cost(BLOCK_CHUNKS, 128)


def statuses(out) -> list[Status]:
    return [Status(Header.unpack(d.data).status) for d in out]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def partial_put(ph: int, idx: int = 0, count: int = BLOCK_CHUNKS, version: int = 1) -> bytes:
    """One chunk of a block that will never be completed."""
    return encode(Header(Opcode.PUT, req_id=idx, prefix_hash=ph, chunk_idx=idx, chunk_count=count,
                         version=version), bytes([idx % 256]) * 128)


def flood_node(clock: Clock, per_source: int = 2 * BLOCK_COST, total: int = 4 * BLOCK_COST) -> StorageNode:
    return StorageNode(StorageOptions(staging=StagingOptions(total, per_source, idle_timeout=5.0)), clock)


def test_a_flood_of_partial_writes_from_one_host_stays_within_its_budget():
    clock = Clock()
    n = flood_node(clock)
    for i in range(20_000):  # 20,000 blocks started from 200 ports of one host, none finished
        assert statuses(n.receive(partial_put(ph=i), ("10.0.0.66", 1000 + i % 200))) == [Status.STAGED]
        assert n.staging.bytes <= 2 * BLOCK_COST
    assert n.staging.evicted > 19_000 and not n.backend.chunks


def test_a_flooding_host_evicts_its_own_writes_not_another_hosts():
    clock = Clock()
    n = flood_node(clock)
    honest = ("10.0.0.2", 5000)
    puts = [partial_put(ph=0xF00D, idx=i, count=3) for i in range(3)]
    n.receive(puts[0], honest)
    for i in range(5_000):
        n.receive(partial_put(ph=i), ("10.0.0.66", 1000 + i % 50))
    n.receive(puts[1], honest)
    out = n.receive(puts[2], honest)
    assert [Header.unpack(d.data).status for d in out] == [Status.OK] * 3


def test_many_flooding_hosts_stay_within_the_global_budget():
    clock = Clock()
    n = flood_node(clock)
    for i in range(10_000):
        n.receive(partial_put(ph=i), (f"10.0.{i % 250}.{i % 7 + 1}", 1000))
        assert n.staging.bytes <= 4 * BLOCK_COST
    assert len(n.staging) * CHUNK_COST <= 4 * BLOCK_COST


def test_idle_partial_writes_expire_and_a_late_chunk_starts_over():
    clock = Clock()
    n = flood_node(clock)
    writer = ("10.0.0.2", 5000)
    n.receive(partial_put(1, 0, count=2), writer)
    for i in range(100):
        n.receive(partial_put(100 + i), ("10.0.0.66", 7000))
    clock.now += 5.5
    assert n.expire() == 101 and n.staging.bytes == 0 and len(n.staging) == 0
    assert statuses(n.receive(partial_put(1, 1, count=2), writer)) == [Status.STAGED]  # chunk 0 gone: no commit
    out = n.receive(partial_put(1, 0, count=2), writer)  # the writer's resend completes it
    assert [Header.unpack(d.data).status for d in out] == [Status.OK, Status.OK]


def test_expire_sweeps_idle_writes_without_waiting_for_a_put():
    clock = Clock()
    n = flood_node(clock)
    n.receive(partial_put(1), ("10.0.0.2", 5000))
    clock.now += 6
    assert n.summary()["staging"]["writes"] == 1
    n.expire()
    assert n.summary()["staging"] == {"writes": 0, "bytes": 0, "evicted": 0, "expired": 1}


@pytest.mark.parametrize("options", [
    {"max_bytes": chunk_cost(KVP_MAX_CHUNK_LEN), "max_bytes_per_source": chunk_cost(KVP_MAX_CHUNK_LEN) - 1},
    {"max_bytes": BLOCK_COST, "max_bytes_per_source": 2 * BLOCK_COST},
    {"idle_timeout": 0},
])
def test_budgets_that_cannot_hold_one_largest_chunk_are_refused(options):
    with pytest.raises(ValueError):
        StagingOptions(**options)


def test_a_write_larger_than_the_per_source_budget_is_refused_whole_at_once():
    n = flood_node(Clock(), per_source=BLOCK_COST, total=2 * BLOCK_COST)
    out = n.receive(partial_put(1, 0, count=BLOCK_CHUNKS + 1), ("10.0.0.2", 5000))
    assert statuses(out) == [Status.ERR_FULL] and n.staging.bytes == 0


def test_default_budgets_stage_a_64_mib_block_in_the_smallest_chunks():
    options = StagingOptions()
    assert write_cost((64 << 20) // 128, 128) <= options.max_bytes_per_source <= options.max_bytes


def test_each_staged_chunk_is_acknowledged_staged_with_the_writes_progress():
    n = StorageNode(StorageOptions())
    writer = ("10.0.0.2", 5000)
    acks = [Header.unpack(n.receive(partial_put(9, i, count=4), writer)[0].data) for i in range(3)]
    assert [(a.status, a.aux, a.chunk_idx) for a in acks] == [(Status.STAGED, i + 1, i) for i in range(3)]
    resend = Header.unpack(n.receive(partial_put(9, 1, count=4), writer)[0].data)
    assert (resend.status, resend.aux) == (Status.STAGED, 3), "a resend is kept once"
    assert not n.backend.chunks, "staged is not committed: nothing is readable yet"
    assert statuses(n.receive(partial_put(9, 3, count=4), writer)) == [Status.OK] * 4
