"""Capacity in bytes, coalescing at the storage NICs, lookahead toward MIN, the Q4 boundary, incast workloads."""

from __future__ import annotations

import dataclasses

import pytest

from evaluation import boundary
from evaluation.bounds import belady_hits
from evaluation.cluster import ClusterConfig, simulate
from evaluation.costs import GPU, Links
from evaluation.lookahead import lookahead_curve
from evaluation.memory import COMPRESSIONS, MEMORIES, block_bytes, plan
from evaluation.model import MODELS
from evaluation.sharing import Sharing
from evaluation.stream import BlockStream
from evaluation.synthetic import INCAST_KINDS, IncastOptions, generate_incast
from evaluation.traces import Request, Trace, load_trace
from evaluation.ttft import CostModel, estimate
from kvpool.constants import KVP_VALUE_LEN
from policies.spec import PolicySpec

MIB = 1 << 20


@pytest.mark.parametrize(("model", "mib"), [("llama-3-8b", 64), ("llama-3-70b", 160), ("deepseek-v3", 34.3)])
def test_model_block_bytes_match_the_published_shapes(model: str, mib: float) -> None:
    assert block_bytes(MODELS[model], COMPRESSIONS["bf16"]) / MIB == pytest.approx(mib, rel=0.01)


@pytest.mark.parametrize("memory", list(MEMORIES))
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_plan_never_holds_more_bytes_than_the_memory(memory: str, compression: str) -> None:
    size = block_bytes(MODELS["llama-3-8b"], COMPRESSIONS[compression])
    p = plan(MEMORIES[memory].bytes, size)
    assert p.blocks * p.chunks_per_block * KVP_VALUE_LEN <= MEMORIES[memory].bytes
    assert p.whole == (MEMORIES[memory].bytes >= size)


def test_plan_holds_leading_chunks_when_no_whole_block_fits() -> None:
    p = plan(8 * MIB, 64 * MIB)
    assert not p.whole and p.blocks == 64 and p.share == pytest.approx(8 / 64 / 64)
    assert "leading" in p.mode


def readers_of_one_block(readers: int) -> BlockStream:
    """`readers` requests of the same 2-block prefix within one second, on `readers` nodes."""
    trace = Trace("incast", tuple(Request(0.01 * i, 1024, 1, (7, 8)) for i in range(readers)))
    return BlockStream.from_trace(trace)


COST = CostModel(MODELS["llama-3-8b"], GPU("g", 1e15), Links())


def test_coalescing_counts_concurrent_reads_of_one_block_once_at_the_storage_nic() -> None:
    stream = readers_of_one_block(4)
    config = ClusterConfig(nodes=4, hbm_blocks=1, dram_blocks=0, routing="round-robin")
    result = simulate(stream, config)
    window = dataclasses.replace(COST, sharing=Sharing("incast-window"))
    plain, merged = estimate(result, window), estimate(result, window, coalesce=True)
    block = COST.block_bytes
    # The first reader computes and writes the prefix; the other three read it from storage.
    assert plain.link_bytes["storage_nic_sent"] == 3 * 2 * block
    assert merged.link_bytes["storage_nic_sent"] == 2 * block
    assert max(n for _, n in plain.fan_in) == 3 and max(n for _, n in merged.fan_in) == 1
    assert merged.mean_ttft_s < plain.mean_ttft_s


def test_the_data_plane_as_built_merges_only_reads_that_overlap_a_live_stream() -> None:
    # The three storage readers start 10 ms apart: more than a round trip (4 ms) and, at 100 Gb/s, more than
    # the 5.4 ms a 64 MiB block streams, so the built stream join merges none of them; at 25 Gb/s the block
    # streams for 21.5 ms, so the stream join takes the next two; the part they missed (10 / 21.5 and 20 / 21.5
    # of a block) nests, and the patch pass sends the longer once; coalescing alone with a 25 ms round trip
    # would merge them whole.
    result = simulate(readers_of_one_block(4), ClusterConfig(nodes=4, hbm_blocks=1, dram_blocks=0,
                                                              routing="round-robin"))
    block = COST.block_bytes
    as_built = estimate(result, COST, coalesce=True)
    assert as_built.link_bytes["storage_nic_sent"] == 3 * 2 * block
    slow = Links(node_nic_gbps=25.0, storage_nic_gbps=25.0, switch_port_gbps=25.0)
    join = dataclasses.replace(COST, links=slow, sharing=Sharing("stream-join"))
    transfer = join.block_transfer_s
    assert transfer == pytest.approx(block * 8 / 25e9)
    sent = estimate(result, join, coalesce=True).link_bytes["storage_nic_sent"]
    assert sent == pytest.approx(2 * block * (1 + 0.02 / transfer), rel=1e-6)
    immediate = dataclasses.replace(join, sharing=Sharing("stream-join", patch_pass=False))
    sent = estimate(result, immediate, coalesce=True).link_bytes["storage_nic_sent"]
    assert sent == pytest.approx(2 * block * (1 + 0.01 / transfer + 0.02 / transfer), rel=1e-6)
    within = dataclasses.replace(COST, sharing=Sharing("round-trip", round_trip_s=0.025))
    assert estimate(result, within, coalesce=True).link_bytes["storage_nic_sent"] == 2 * block


def test_a_switch_holding_leading_chunks_leaves_the_rest_to_storage() -> None:
    stream = readers_of_one_block(3)
    base = ClusterConfig(nodes=3, hbm_blocks=1, dram_blocks=0, routing="round-robin", switch_blocks=4,
                         switch_policy=PolicySpec.parse("lru"))
    whole = estimate(simulate(stream, base), COST).link_bytes
    half = estimate(simulate(stream, ClusterConfig(**{**base.__dict__, "switch_block_share": 0.5})), COST).link_bytes
    assert whole["storage_nic"] < half["storage_nic"]
    assert half["switch_port"] == whole["switch_port"] // 2


def test_lookahead_is_monotone_toward_min_on_the_excerpt() -> None:
    trace = load_trace(__import__("pathlib").Path(__file__).parents[2] / "data" / "traces"
                       / "mooncake_conversation_excerpt.jsonl", 600)
    stream = BlockStream.from_trace(trace)
    keys = [b.key for b in stream.blocks]
    for capacity in (50, 200):
        curve = lookahead_curve(stream, capacity, (0.0, 5.0, 60.0, 1e9))
        ratios = [c.block_hits for c in curve.values()]
        assert ratios == sorted(ratios)
        # Unlimited lookahead is MIN up to ties: blocks of one request share a time, MIN orders by index.
        assert sum(belady_hits(keys, capacity)) * 0.995 <= ratios[-1] <= sum(belady_hits(keys, capacity))


def test_boundary_has_regions_where_the_pool_does_and_does_not_pay() -> None:
    size = block_bytes(MODELS["llama-3-8b"], COMPRESSIONS["fp8"])
    # As built, 16 readers spread over 1 s (62.5 ms apart) share nothing: a block streams for 5.4 ms at 100 Gb/s.
    spread = boundary.evaluate(boundary.Scenario(size, MEMORIES["switch+dram"], concurrency=16))
    assert spread.sends_per_reader == 1.0 and spread.net_benefit_s <= 0
    # Readers within one round trip of each other share every send, and then it pays off.
    lockstep = boundary.evaluate(boundary.Scenario(size, MEMORIES["switch+dram"], concurrency=16, window_s=0.001))
    assert lockstep.sends_per_reader == pytest.approx(1 / 16) and lockstep.net_benefit_s > 0
    # What the evaluator used to credit: every read in the same second merged.
    credited = boundary.evaluate(boundary.Scenario(size, MEMORIES["switch+dram"], concurrency=16,
                                                   sharing=Sharing("incast-window")))
    assert credited.net_benefit_s == pytest.approx(lockstep.net_benefit_s)
    alone = boundary.evaluate(boundary.Scenario(size, MEMORIES["switch+dram"], concurrency=1))
    software = boundary.evaluate(boundary.Scenario(size, MEMORIES["softswitch"], software_target=True,
                                                   window_s=0.001))
    assert alone.net_benefit_s <= 0
    assert software.net_benefit_s < 0
    # As built (one table entry per 128-byte chunk) the controller cannot install a block in time.
    assert spread.installed_share == 0.0
    per_block = boundary.evaluate(boundary.Scenario(size, MEMORIES["switch+dram"], chunk_index=False))
    assert per_block.installed_share > 0.5


def test_boundary_group_sends_follow_the_mechanism() -> None:
    rt = Sharing("round-trip", round_trip_s=0.004)
    # 16 readers over 50 ms (3.125 ms apart): as built they pair up, each pair one send.
    assert boundary.group_sends(16, 0.05, rt, 0.0054) == (8.0, 8)
    gap, block_s = 0.003125, 0.0054
    immediate = Sharing("stream-join", round_trip_s=0.001, patch_pass=False)  # a joiner patches what it missed
    sends, merged = boundary.group_sends(16, 0.05, immediate, block_s)
    assert merged == 8 and sends == pytest.approx(8 * (1 + gap / block_s))
    # As built, the stream lives on in its patch pass, and a reader that comes during a pass makes that pass
    # cover the whole block and the next one what it had passed before the reader came: with a reader every
    # 3.125 ms on a 5.4 ms stream the passes follow each other, every later reader joins, and the node sends
    # the block as one carousel: each later reader adds the share of the block that passed since the one before
    join = Sharing("stream-join", round_trip_s=0.001)
    sends, merged = boundary.group_sends(16, 0.05, join, block_s)
    assert merged == 15 and sends == pytest.approx(1 + 15 * gap / block_s)


@pytest.mark.parametrize("kind", INCAST_KINDS)
def test_incast_workloads_have_many_readers_of_one_block_per_second(kind: str) -> None:
    trace = generate_incast(kind, IncastOptions(requests=600))
    assert len(trace.requests) == 600
    assert [r.arrival_s for r in trace.requests] == sorted(r.arrival_s for r in trace.requests)
    per_second: dict = {}
    for r in trace.requests:
        key = (int(r.arrival_s), r.blocks[0])
        per_second[key] = per_second.get(key, 0) + 1
    assert max(per_second.values()) >= 8
    assert generate_incast(kind, IncastOptions(requests=600)) == trace


def test_studies_take_the_main_streams_runs_from_q1_instead_of_replaying_them() -> None:
    from evaluation.experiments import EvalOptions, parse_policies, q1_pool_sweep
    from evaluation.studies import CROSS_POLICIES, run_studies

    stream = BlockStream.from_trace(generate_incast("agent-fanout", IncastOptions(requests=300), seed=0))
    fractions = (0.05, 0.1)
    q1 = q1_pool_sweep(stream, EvalOptions(policies=tuple(parse_policies(",".join(CROSS_POLICIES))),
                                           fractions=fractions))
    with_q1: list[int] = []
    without: list[int] = []
    reused = run_studies({"main": stream}, "main", fractions, 0.05, with_q1.append, q1=q1)["traces"]["main"]
    fresh = run_studies({"main": stream}, "main", fractions, 0.05, without.append)["traces"]["main"]
    assert reused["runs"] == fresh["runs"] and reused["ideal"] == fresh["ideal"]
    assert sum(without) - sum(with_q1) >= len(stream) * len(CROSS_POLICIES) * len(fractions)


def test_the_cluster_replays_and_the_boundary_charge_the_same_table_writes() -> None:
    from evaluation.costs import ControlCosts

    control = ControlCosts()
    assert control.updates_per_s == boundary.CONTROLLER_WRITES_PER_S
    assert control.install_latency_s == boundary.INSTALL_LATENCY_S
    assert boundary.Scenario(block_bytes=1, memory=MEMORIES["switch+dram"]).hop_s == control.lookup_s
    result = simulate(readers_of_one_block(4), ClusterConfig(nodes=4, switch_blocks=4, routing="round-robin",
                                                             switch_policy=PolicySpec.parse("lru")))
    per_block = estimate(result, COST).control["table_writes"] / max(1, result.switch.table_writes)
    assert per_block == control.writes_per_block(COST.block_bytes) == -(-COST.block_bytes // KVP_VALUE_LEN)


def test_the_every_trace_verdict_names_the_cells_whose_lead_needs_prefetch() -> None:
    from evaluation.report import every_trace_section

    def run(ratio: float, prefetched: int = 0) -> dict:
        return {"block_hit_ratio": ratio, "block_refs": 1000, "prefetched": prefetched}

    studies = {"default_policy": "adaptive+adaptive", "traces": {
        "a": {"capacities": {"0.01": 10}, "runs": {"lru": {"0.01": run(0.10)}, "arc": {"0.01": run(0.12)},
                                                   "adaptive+adaptive": {"0.01": run(0.15, prefetched=50)},
                                                   "MIN": {"0.01": run(0.30)}}},
        "b": {"capacities": {"0.01": 10}, "runs": {"lru": {"0.01": run(0.10)}, "arc": {"0.01": run(0.12)},
                                                   "adaptive+adaptive": {"0.01": run(0.15, prefetched=10)},
                                                   "MIN": {"0.01": run(0.30)}}},
    }}
    text = every_trace_section(studies, block_bytes=2**20)
    assert "in 1 of 2 cells" in text and "(a at 1%)" in text  # a: 15% − 5% net < 12%; b: 14% net ≥ 12%
    assert "50 extra block reads" in text


def test_a_coarsely_stamped_trace_is_priced_as_stamped_and_with_its_stamps_spread() -> None:
    from evaluation.arrivals import spread_stamps
    from evaluation.experiments import retimed

    # Four requests of one 2-block prefix stamped together at 0 s, the next stamp at 3 s: as stamped, the
    # three storage readers look simultaneous and coalescing as built merges them; spread over the 3 s step
    # (0.75 s apart) it merges none.
    trace = Trace("stamped", (*(Request(0.0, 1024, 1, (7, 8)) for _ in range(4)), Request(3.0, 1024, 1, (9, 10))))
    stream = BlockStream.from_trace(trace)
    result = simulate(stream, ClusterConfig(nodes=4, hbm_blocks=1, dram_blocks=0, routing="round-robin"))
    block = COST.block_bytes
    assert estimate(result, COST, coalesce=True).link_bytes["storage_nic_sent"] == 2 * block
    spread = retimed(result, spread_stamps(stream.times))
    assert [o.arrival_s for o in spread.outcomes] == [0.0, 0.75, 1.5, 2.25, 3.0]
    assert estimate(spread, COST, coalesce=True).link_bytes["storage_nic_sent"] == 3 * 2 * block


def test_the_arrival_table_says_where_mooncakes_replication_could_be_enough() -> None:
    from evaluation.report import arrivals_section

    def row(trace: str, late: float) -> dict:
        return {"trace": trace, "min_reads": 8, "blocks": 1, "reads": 9, "gap_p50_s": 0.1, "gap_p90_s": 0.2,
                "gap_p99_s": 0.3, "overlap": {"100 Gb/s": 0.5}, "merged": {"stream-join": 0.5},
                "sends_per_read": {"stream-join": 0.6}, "late_share": late}

    arr = {"transfer_s": {"100 Gb/s": 0.005}, "mechanisms": {"stream-join": "stream-join (as built)"},
           "block_bytes": 16 << 20, "stream_gbps": 100.0,
           "rows": [row("agent fan-out", 0.02), row("popular RAG documents", 0.8)]}
    text = arrivals_section(arr)
    assert "late (> 1 s)" in text and "| 80.00% |" in text
    sentence = text.split("**Where Mooncake's own replication could be enough.**")[1]
    assert "agent fan-out 98.00%, popular RAG documents 20.00%" in sentence
    crowded, quiet = sentence.split("Where that burst is large")[1].split("where it is under 1%")
    assert "agent fan-out" in crowded and "popular RAG documents" in crowded and "(none)" in quiet


def test_boundary_a_software_switch_slows_the_stream_so_more_readers_join_it() -> None:
    # 16 readers 62.5 ms apart, a block's transfer 50 ms: at line rate each stream has ended before the next
    # reader comes (a block each); a switch copying 1 block/s in all keeps the first stream under way for all
    join = Sharing("stream-join", round_trip_s=0.001)
    assert boundary.group_sends(16, 1.0, join, 0.05) == (16.0, 0)
    sends, merged = boundary.group_sends(16, 1.0, join, 0.05, delivery=lambda members: 1.0)
    assert merged == 15 and sends < 2.0
