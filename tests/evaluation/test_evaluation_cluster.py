"""The cluster model: prefix semantics across tiers, tier order, routing, recycling."""

from evaluation.cluster import ClusterConfig, simulate
from evaluation.stream import BlockStream
from evaluation.traces import Request, Trace
from policies.base import Tier
from policies.spec import PolicySpec


def stream_of(*requests, times=None):
    times = times or [float(i) for i in range(len(requests))]
    trace = Trace("t", tuple(Request(t, 512 * len(b), 1, tuple(b)) for t, b in zip(times, requests, strict=True)))
    return BlockStream.from_trace(trace)


ONE_NODE = ClusterConfig(nodes=1, hbm_blocks=8, dram_blocks=0, storage_blocks=None)


def test_repeated_prefix_is_served_from_hbm_and_only_the_new_tail_is_prefilled():
    result = simulate(stream_of([0, 1, 2], [0, 1, 2, 3]), ONE_NODE)
    first, second = result.outcomes
    assert first.from_tier == {} and first.reused_tokens == 0
    assert second.from_tier == {Tier.NODE_HBM: 3}
    assert second.reused_tokens == 3 * 512


def test_blocks_after_a_missing_parent_are_block_hits_but_not_reused():
    # Storage off, HBM of 3: request 2 pushes blocks 0,1,2 out; request 3 reads 0..2 again:
    # block 0 is gone everywhere, so blocks that might still be around cannot be used.
    config = ClusterConfig(nodes=1, hbm_blocks=3, dram_blocks=0, storage_blocks=0)
    result = simulate(stream_of([0, 1, 2], [10, 11, 1], [0, 1, 2]), config)
    third = result.outcomes[2]
    assert third.prefix_blocks == 0
    assert third.block_hits >= 1  # block 1 was re-read by request 2, still in HBM
    assert third.reused_tokens == 0


def test_remote_pool_serves_what_node_tiers_lost_and_records_its_storage_node():
    config = ClusterConfig(nodes=1, hbm_blocks=2, dram_blocks=0, storage_blocks=None, storage_nodes=1)
    result = simulate(stream_of([0, 1, 2], [5, 6], [0, 1, 2]), config)
    third = result.outcomes[2]
    assert third.from_tier == {Tier.STORAGE_DRAM: 3}
    assert third.storage_reads == {0: 3}


def test_switch_pool_serves_before_the_remote_pool():
    config = ClusterConfig(nodes=2, routing="round-robin", hbm_blocks=4, dram_blocks=0, storage_blocks=None,
                           switch_blocks=8, switch_policy=PolicySpec.parse("lru"))
    result = simulate(stream_of([0, 1], [0, 1]), config)  # second request lands on the other node
    assert [o.node for o in result.outcomes] == [0, 1]
    assert result.outcomes[1].from_tier == {Tier.SWITCH: 2}
    assert result.switch.hits == 2 and result.switch.admissions == 2


def test_prefix_routing_sends_a_request_to_the_node_holding_its_prefix():
    config = ClusterConfig(nodes=4, routing="prefix", hbm_blocks=16, dram_blocks=0, load_penalty_blocks=0.1)
    result = simulate(stream_of([0, 1, 2, 3], [7, 8], [0, 1, 2, 3, 4]), config)
    assert result.outcomes[2].node == result.outcomes[0].node
    assert result.outcomes[2].from_tier == {Tier.NODE_HBM: 4}


def test_round_robin_ignores_the_prefix():
    config = ClusterConfig(nodes=3, routing="round-robin", hbm_blocks=16, dram_blocks=0, storage_blocks=0)
    result = simulate(stream_of([0, 1], [0, 1], [0, 1], [0, 1]), config)
    assert [o.node for o in result.outcomes] == [0, 1, 2, 0]
    assert result.outcomes[3].from_tier == {Tier.NODE_HBM: 2}


def test_demoted_switch_victims_are_recycled_into_the_remote_pool_and_dropped_ones_are_not():
    requests = [[0, 1], [5, 6], [0, 1], [7, 8], [0, 1]]
    outcomes = {}
    for recycling in ("drop", "demote"):
        config = ClusterConfig(nodes=1, hbm_blocks=1, dram_blocks=0, storage_blocks=2,
                               switch_blocks=2, switch_policy=PolicySpec.parse(f"always+lru+{recycling}"))
        outcomes[recycling] = simulate(stream_of(*requests), config)
    dropped, demoted = outcomes["drop"].switch, outcomes["demote"].switch
    assert dropped.recycled == 0 and dropped.evictions > 0
    assert demoted.recycled == demoted.evictions > 0
