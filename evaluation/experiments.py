"""The standard evaluation: one function per research question, each returning plain data for the report.

Q1 which prefixes deserve the switch pool · Q2 when blocks should move between tiers · Q3 what eviction should
recycle · Q4 at which scale the pool's communication and management overhead pays off.

Every replay is an independent task, so `run_all` runs them on several processes (`evaluation.parallel`):
first the Q1 sweep (its best policy drives the rest), then every cluster replay of Q2–Q4 at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.arrivals import STAMPED, spread_stamps, stamps
from evaluation.bounds import bound_counters
from evaluation.cluster import SOURCES, ClusterConfig, ClusterResult, simulate
from evaluation.costs import GPU, ControlCosts, FetchPlan, Links, fetch_seconds, prefill_seconds
from evaluation.memory import block_bytes, compression_preset, memory_preset, plan
from evaluation.model import ModelConfig
from evaluation.parallel import run_tasks
from evaluation.replay import PoolRun, replay_pool
from evaluation.sharing import MECHANISMS, Sharing
from evaluation.stream import BlockStream
from evaluation.synthetic import SyntheticOptions, generate
from evaluation.ttft import CostModel, estimate
from policies.base import Tier
from policies.spec import PolicySpec

Progress = Callable[[int], None]


def parse_policies(text: str) -> list[PolicySpec]:
    """A comma-separated list of policy specs (each `EVICTION`, `ADMISSION+EVICTION` or
    `ADMISSION+EVICTION+RECYCLING`; a bare eviction name means always-admit and drop), each checked."""
    specs = [PolicySpec.parse(item) for item in text.split(",") if item.strip()]
    if not specs:
        raise ValueError("no policy given")
    for spec in specs:
        spec.check()
    return specs


@dataclass(frozen=True)
class EvalOptions:
    """What the standard report runs; the CLI fills it, defaults give the report in minutes on 2 cores."""

    policies: tuple[PolicySpec, ...]
    fractions: tuple[float, ...] = (0.005, 0.01, 0.05, 0.10)
    """Switch pool sizes as fractions of the trace's unique blocks."""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    cost: CostModel | None = None
    switch_fraction: float = 0.01
    """Pool size used for the tier, recycling and scale experiments."""
    recycling: tuple[str, ...] = ("drop", "demote", "residual")
    """Recycling policies compared in Q3 (registry names)."""
    remote_tier: str = "mooncake"
    """How the remote DRAM pool of Q2 and Q3 evicts (`evaluation.remote_store`): `mooncake` as Mooncake Store's master,
    `lru`, or `infinite` (Q2 keeps every block; Q3, which needs a bound for recycling to matter, uses LRU)."""
    remote_fraction: float = 0.05
    """Remote pool capacity in Q2 and Q3, as a fraction of unique blocks."""
    remote_blocks: int | None = None
    """Remote pool capacity in blocks; overrides `remote_fraction` when given (0 disables the pool)."""
    scale_nodes: tuple[int, ...] = (2, 4, 8, 16, 32)
    link_gbps: tuple[float, ...] = (25.0, 100.0, 400.0)
    scale_requests: int = 3_000
    """Requests of the synthetic workload at each scale point."""
    sessions_per_node_s: float = 0.5
    """Synthetic load grows with the cluster: new conversations per second per node."""
    seed: int = 0
    switch_memory: str | None = None
    """Memory preset (`evaluation.memory`) sizing the switch pool of Q2/Q3 in bytes; None: `switch_fraction`."""
    compression: str = "bf16"

    def remote_plan(self, stream: BlockStream, recycling: bool = False) -> tuple[int | None, str]:
        """(capacity or None for unbounded, eviction) of the remote pool in Q2, or in Q3 when `recycling`."""
        blocks = self.remote_blocks if self.remote_blocks is not None else stream.capacity(self.remote_fraction)
        if self.remote_tier == "infinite":
            return (blocks, "lru") if recycling else (None, "infinite")
        return blocks, self.remote_tier

    def switch_plan(self, stream: BlockStream) -> tuple[int, float]:
        """(blocks, share of each block held) of the Q2/Q3 switch pool."""
        if self.switch_memory is None or self.cost is None:
            return stream.capacity(self.switch_fraction), 1.0
        size = block_bytes(self.cost.model, compression_preset(self.compression), self.cost.block_tokens)
        held = plan(memory_preset(self.switch_memory).bytes, size)
        return held.blocks, held.share


def default_cost(model: ModelConfig, gpu: GPU, links: Links | None = None,
                 control: ControlCosts | None = None) -> CostModel:
    return CostModel(model, gpu, links or Links(), control or ControlCosts())


# -- tasks ------------------------------------------------------------------------------------------
def _replay(streams: dict[str, BlockStream], task: tuple, progress: Progress) -> object:
    """One unit of work, run in this process or a forked worker (see `evaluation.parallel`)."""
    kind = task[0]
    if kind == "pool":
        _, spec, fraction = task
        stream = streams["trace"]
        capacity = stream.capacity(fraction)
        counter, stats = replay_pool(stream, spec, capacity, progress)
        return PoolRun(spec.name, capacity, fraction, counter, stats)
    if kind == "bounds":
        return bound_counters(streams["trace"], task[1], progress)
    if kind == "cluster":
        _, name, config = task
        return simulate(streams[name], config, progress)
    raise ValueError(f"unknown task {kind!r}")


# -- Q1 ---------------------------------------------------------------------------------------------
def q1_tasks(stream: BlockStream, options: EvalOptions) -> list[tuple]:
    """The replays of the Q1 sweep: MIN and the ideal at every size, then every policy at every size."""
    capacities = [stream.capacity(f) for f in options.fractions]
    tasks: list[tuple] = [("bounds", capacities)]
    tasks += [("pool", spec, f) for spec in options.policies for f in options.fractions]
    return tasks


def q1_from(stream: BlockStream, options: EvalOptions, results: list) -> dict:
    """The Q1 section from the results of `q1_tasks`, in their order."""
    capacities = [stream.capacity(f) for f in options.fractions]
    (minimum, ideal), *runs = results
    return {
        "unique_blocks": stream.unique_blocks,
        "block_references": len(stream),
        "capacities": dict(zip([str(f) for f in options.fractions], capacities, strict=True)),
        "runs": [r.as_dict() for r in runs],
        "min": {str(f): minimum[c].as_dict() for f, c in zip(options.fractions, capacities, strict=True)},
        "ideal": ideal.as_dict(),
    }


POLICY_COST = {"lru": (1.0, 0.0), "arc": (10.0, 0.0), "s3fifo": (11.0, 0.0), "tinylfu": (18.0, 0.0),
               "value": (25.0, 330.0), "conversation": (44.0, 1300.0), "adaptive": (82.0, 2000.0)}
"""CPU per block reference of each eviction (or costly admission) policy, relative to LRU, as (a, b): a + b ×
the pool's size as a fraction of the unique blocks (the value-ranking policies re-rank every resident block
now and then), measured on the Mooncake conversation trace. Only used to start the longest replays first
(`evaluation.parallel`); a wrong estimate costs time, never a result."""


def policy_cost(spec: PolicySpec | str, fraction: float = 0.01) -> float:
    """Relative CPU per reference of a pool policy (the costliest of its admission and eviction) at a pool
    of `fraction` × the unique blocks."""
    if isinstance(spec, str):
        spec = PolicySpec.parse(spec)
    a, b = POLICY_COST.get(spec.eviction, (20.0, 0.0))
    c, d = POLICY_COST.get(spec.admission, (0.0, 0.0))
    return max(a + b * fraction, c + d * fraction)


CLUSTER_COST = 25.0
"""Relative CPU per reference of a cluster replay without its switch pool (node tiers, routing, remote pool)."""


def task_cost(streams: dict[str, BlockStream], task: tuple) -> float:
    """Estimated CPU of one `_replay` task (relative units), for `run_tasks(cost=...)`."""
    kind = task[0]
    if kind == "pool":
        return len(streams["trace"]) * policy_cost(task[1], task[2])
    if kind == "bounds":
        return len(streams["trace"]) * 2.5 * len(task[1])
    if kind == "cluster":
        config = task[2]
        stream = streams[task[1]]
        fraction = config.switch_blocks / max(1, stream.unique_blocks)
        switch = policy_cost(config.switch_policy, fraction) if config.switch_blocks else 0.0
        return len(stream) * (CLUSTER_COST + switch)
    return 0.0


def q1_pool_sweep(stream: BlockStream, options: EvalOptions, progress: Progress | None = None,
                  jobs: int = 1) -> dict:
    """Hit ratios (block and prefix) per policy and pool size, with MIN and the ideal beside them."""
    shared = {"trace": stream}
    tasks = q1_tasks(stream, options)
    results = run_tasks(_replay, shared, tasks, jobs, progress, lambda t: task_cost(shared, t))
    return q1_from(stream, options, results)


def best_policy(q1: dict, options: EvalOptions) -> PolicySpec:
    """The policy with the highest prefix-level hit ratio at the reference pool size (ties: first listed).

    Q2–Q4 use it; the report's default policy is `adaptive` (`evaluation.studies.DEFAULT_POLICY`)."""
    target = min(options.fractions, key=lambda f: abs(f - options.switch_fraction))
    scores = {r["policy"]: r["prefix_hit_ratio"] for r in q1["runs"] if r["fraction"] == target}
    return max(options.policies, key=lambda s: scores.get(s.name, -1.0))


def _cluster_row(name: str, result: ClusterResult, cost: CostModel, per_request: bool = False) -> dict:
    summary = estimate(result, cost, per_request)
    refs = max(1, result.block_refs)
    row = {
        "config": name,
        "prefix_hit_ratio": result.prefix_hit_ratio,
        "block_hit_ratio": result.block_hit_ratio,
        "from_tier": {t.name: result.blocks_from(t) / refs for t in SOURCES},
        "computed": 1.0 - result.prefix_hit_ratio,
        "switch": dataclasses.asdict(result.switch),
        "remote": dataclasses.asdict(result.remote),
        **summary.as_dict(),
        "fan_in_series": summary.fan_in,
        "storage_load_series": summary.storage_load,
    }
    if per_request:
        row["per_request"] = summary.per_request
    return row


# -- Q2 ---------------------------------------------------------------------------------------------
def q2_configs(stream: BlockStream, options: EvalOptions, spec: PolicySpec) -> dict[str, ClusterConfig]:
    """The cluster with every tier, then with each tier removed in turn."""
    blocks, share = options.switch_plan(stream)
    remote_blocks, remote_tier = options.remote_plan(stream)
    base = dataclasses.replace(options.cluster, switch_blocks=blocks, switch_block_share=share,
                               switch_policy=spec, storage_blocks=remote_blocks, remote_tier=remote_tier)
    return {
        "all tiers": base,
        "without switch pool": dataclasses.replace(base, switch_blocks=0),
        "without node DRAM": dataclasses.replace(base, dram_blocks=0),
        "without remote pool": dataclasses.replace(base, storage_blocks=0),
        "HBM only": dataclasses.replace(base, dram_blocks=0, storage_blocks=0, switch_blocks=0),
    }


def block_move_costs(cost: CostModel) -> dict:
    """Seconds to bring one block into HBM from each tier, against recomputing it at a few prompt depths."""
    block = cost.block_bytes

    def fetch(plan: FetchPlan, readers: int = 1) -> float:
        return fetch_seconds(plan, cost.gpu, cost.links, readers, cost.control)

    one = {
        "NODE_DRAM": fetch(FetchPlan(dram_bytes=block)),
        "SWITCH": fetch(FetchPlan(switch_bytes=block, switch_blocks=1)),
        "STORAGE_DRAM (alone)": fetch(FetchPlan(storage_bytes=block)),
        "STORAGE_DRAM (8 readers)": fetch(FetchPlan(storage_bytes=block), 8),
    }
    recompute = {}
    for depth in (0, 8, 32):
        start = depth * cost.block_tokens
        recompute[f"recompute at depth {depth}"] = prefill_seconds(cost.model, cost.gpu, start,
                                                                   start + cost.block_tokens)
    return {"block_bytes": block, "fetch_s": one, "recompute_s": recompute}


def q2_tiers(configs: dict[str, ClusterConfig], results: list[ClusterResult], options: EvalOptions,
             spec: PolicySpec) -> dict:
    """Where reused blocks come from and what each tier buys."""
    assert options.cost is not None
    rows = []
    gaps: dict[str, dict[str, float]] = {}
    for name, result in zip(configs, results, strict=True):
        rows.append(_cluster_row(name, result, options.cost, per_request=name == "all tiers"))
        if name == "all tiers":
            for tier, values in result.reuse_gap_s.items():
                if values:
                    gaps[tier.name] = {"blocks": len(values), "median_s": float(np.median(values)),
                                       "p90_s": float(np.percentile(values, 90))}
    functions = []
    named = dict(zip(configs, results, strict=True))
    for label, name, coalesce in (("no switch function", "without switch pool", False),
                                  ("store only", "all tiers", False),
                                  ("coalesce only", "without switch pool", True),
                                  ("store + coalesce", "all tiers", True)):
        summary = estimate(named[name], options.cost, coalesce=coalesce).as_dict()
        functions.append({"function": label, "fan_in_max": summary["fan_in_max"],
                          "fan_in_mean": summary["fan_in_mean"],
                          "storage_bytes_sent": summary["link_bytes"].get("storage_nic_sent", 0),
                          "ttft_mean_s": summary["ttft_mean_s"], "ttft_p99_s": summary["ttft_p99_s"]})
    everything = configs["all tiers"]
    return {"policy": spec.name, "switch_blocks": everything.switch_blocks,
            "remote_tier": everything.remote_tier, "remote_blocks": everything.storage_blocks,
            "switch_block_share": configs["all tiers"].switch_block_share, "switch_functions": functions,
            "sharing": options.cost.sharing.label(),
            "configs": rows,
            "reuse_gap": gaps, "block_move": block_move_costs(options.cost),
            "incast_window_s": options.cost.links.incast_window_s}


# -- Q3 ---------------------------------------------------------------------------------------------
def q3_configs(stream: BlockStream, options: EvalOptions, spec: PolicySpec) -> dict[str, ClusterConfig]:
    """The switch pool with each recycling policy, in front of a bounded remote pool."""
    storage, remote_tier = options.remote_plan(stream, recycling=True)
    blocks, share = options.switch_plan(stream)
    configs = {}
    for name in options.recycling:
        policy = spec.with_policy("recycling", name, {})
        configs[policy.name] = dataclasses.replace(
            options.cluster, switch_blocks=blocks, switch_block_share=share, switch_policy=policy,
            storage_blocks=storage, remote_tier=remote_tier)
    return configs


def q3_recycling(configs: dict[str, ClusterConfig], results: list[ClusterResult], options: EvalOptions) -> dict:
    """What recycling the switch pool's victims into the remote pool buys, per recycling policy."""
    assert options.cost is not None
    rows = []
    for name, result in zip(configs, results, strict=True):
        row = _cluster_row(name, result, options.cost)
        row.pop("fan_in_series")
        row.pop("storage_load_series")
        stats = result.switch
        row["recycled"] = stats.recycled
        row["recycled_reused"] = stats.recycled_reused
        row["reuse_per_recycled"] = stats.recycled_reused / stats.recycled if stats.recycled else 0.0
        row["recycle_bytes"] = stats.recycled * options.cost.block_bytes
        rows.append(row)
    first = next(iter(configs.values()), None)
    return {"storage_blocks": first.storage_blocks if first else 0,
            "remote_tier": first.remote_tier if first else "", "rows": rows}


# -- Q4 ---------------------------------------------------------------------------------------------
def scale_streams(options: EvalOptions) -> list[tuple[int, BlockStream]]:
    """The synthetic workload of each cluster size: conversation starts grow with the number of nodes."""
    streams = []
    for nodes in options.scale_nodes:
        trace = generate(SyntheticOptions(requests=options.scale_requests,
                                          sessions_per_s=options.sessions_per_node_s * nodes), options.seed)
        streams.append((nodes, BlockStream.from_trace(trace)))
    return streams


def q4_configs(streams: list[tuple[int, BlockStream]], options: EvalOptions,
               spec: PolicySpec) -> list[tuple[str, ClusterConfig]]:
    """(stream name, config) pairs: with and without the switch pool at every cluster size."""
    pairs = []
    for nodes, stream in streams:
        base = dataclasses.replace(options.cluster, nodes=nodes, switch_policy=spec,
                                   switch_blocks=stream.capacity(options.switch_fraction))
        pairs += [(f"scale-{nodes}", base), (f"scale-{nodes}", dataclasses.replace(base, switch_blocks=0))]
    return pairs


def q4_scale(streams: list[tuple[int, BlockStream]], results: list[ClusterResult], options: EvalOptions,
             spec: PolicySpec) -> dict:
    """Net TTFT benefit of the switch pool on synthetic load that grows with the cluster, per link speed."""
    assert options.cost is not None
    rows = []
    for i, (nodes, _) in enumerate(streams):
        with_pool, without = results[2 * i], results[2 * i + 1]
        for gbps in options.link_gbps:
            links = dataclasses.replace(options.cost.links, node_nic_gbps=gbps, storage_nic_gbps=gbps,
                                        switch_port_gbps=gbps)
            cost = dataclasses.replace(options.cost, links=links)
            a, b = estimate(with_pool, cost), estimate(without, cost)
            control = a.control
            load = control["controller_utilisation"]
            # A controller that cannot keep up installs only 1/load of the admissions: scale the gain.
            saved = (b.mean_ttft_s - a.mean_ttft_s) * (min(1.0, 1.0 / load) if load else 1.0)
            lookups = with_pool.switch.lookups * cost.control.lookup_s / max(1, len(with_pool.outcomes))
            rows.append({
                "nodes": nodes, "link_gbps": gbps, "requests": len(with_pool.outcomes),
                "switch_hit_ratio": with_pool.blocks_from(Tier.SWITCH) / max(1, with_pool.block_refs),
                "ttft_without_s": b.mean_ttft_s, "ttft_with_s": a.mean_ttft_s,
                "saved_s": saved, "overhead_s": lookups, "net_benefit_s": saved - lookups,
                "fan_in_max_without": max((n for _, n in b.fan_in), default=0),
                "fan_in_max_with": max((n for _, n in a.fan_in), default=0),
                "fan_in_mean_without": b.as_dict()["fan_in_mean"],
                "fan_in_mean_with": a.as_dict()["fan_in_mean"],
                "table_writes_per_s": control["table_writes_per_s"],
                "controller_utilisation": load,
                "pays_off": saved - lookups > 0,
            })
    return {"policy": spec.name, "rows": rows}


# -- where coalescing pays off, by workload -------------------------------------------------------------
SHARING_CONFIGS = ("all tiers", "without switch pool")
"""The two cluster replays each workload needs for its switch-functions table (Q2's, with the pool and without)."""


def sharings(cost: CostModel) -> dict[str, Sharing]:
    """Every mechanism, the report's own (`cost.sharing`) with its parameters."""
    own = cost.sharing
    return {m: own if m == own.mechanism else Sharing(m, own.round_trip_s, cost.links.incast_window_s)
            for m in MECHANISMS}


def switch_functions(without: ClusterResult, everything: ClusterResult, cost: CostModel) -> list[dict]:
    """Q2's switch-functions rows of one workload: storing off/on, and coalescing under every mechanism."""
    rows = []
    plain = ((("no switch function", without), ("store only", everything)))
    for label, result in plain:
        rows.append(_function_row(label, "-", estimate(result, cost).as_dict()))
    for mechanism, sharing in sharings(cost).items():
        priced = dataclasses.replace(cost, sharing=sharing)
        for label, result in (("coalesce only", without), ("store + coalesce", everything)):
            rows.append(_function_row(label, mechanism, estimate(result, priced, coalesce=True).as_dict()))
    return rows


def _function_row(label: str, mechanism: str, summary: dict) -> dict:
    return {"function": label, "mechanism": mechanism, "fan_in_max": summary["fan_in_max"],
            "fan_in_mean": summary["fan_in_mean"],
            "storage_bytes_sent": summary["link_bytes"].get("storage_nic_sent", 0),
            "ttft_mean_s": summary["ttft_mean_s"], "ttft_p99_s": summary["ttft_p99_s"]}


def pays_off(without: ClusterResult, everything: ClusterResult, options: EvalOptions) -> list[dict]:
    """Q4's question on one workload: at each link speed and under each mechanism, the mean TTFT a switch
    function saves against none, net of its extra lookups: coalescing alone (one lookup per storage read; no
    controller work) and store + coalesce (scaled down by the controller's load as in Q4)."""
    assert options.cost is not None
    rows = []
    requests = max(1, len(without.outcomes))
    for gbps in options.link_gbps:
        links = dataclasses.replace(options.cost.links, node_nic_gbps=gbps, storage_nic_gbps=gbps,
                                    switch_port_gbps=gbps)
        cost = dataclasses.replace(options.cost, links=links)
        base = estimate(without, cost)
        base_sent = max(1, base.link_bytes.get("storage_nic_sent", 0))
        for mechanism, sharing in sharings(cost).items():
            priced = dataclasses.replace(cost, sharing=sharing)
            alone = estimate(without, priced, coalesce=True)
            reads = sum(len(o.storage_keys) for o in without.outcomes) * cost.control.lookup_s / requests
            both = estimate(everything, priced, coalesce=True)
            load = both.control["controller_utilisation"]
            saved = (base.mean_ttft_s - both.mean_ttft_s) * (min(1.0, 1.0 / load) if load else 1.0)
            lookups = everything.switch.lookups * cost.control.lookup_s / max(1, len(everything.outcomes))
            for function, net, summary in (("coalesce only", base.mean_ttft_s - alone.mean_ttft_s - reads, alone),
                                           ("store + coalesce", saved - lookups, both)):
                rows.append({"link_gbps": gbps, "mechanism": mechanism, "function": function,
                             "ttft_without_s": base.mean_ttft_s, "ttft_with_s": summary.mean_ttft_s,
                             "net_benefit_s": net,
                             "storage_sent_ratio": summary.link_bytes.get("storage_nic_sent", 0) / base_sent,
                             "pays_off": net > 0})
    return rows


def retimed(result: ClusterResult, times: np.ndarray) -> ClusterResult:
    """`result` with each request arriving at `times[request index]` instead (same tiers, same reads)."""
    outcomes = [dataclasses.replace(o, arrival_s=float(times[o.index])) for o in result.outcomes]
    return dataclasses.replace(result, outcomes=outcomes)


def sharing_study(named: dict[str, tuple[ClusterResult, ClusterResult]], options: EvalOptions) -> dict:
    """Per workload ((without switch pool, all tiers) replays): measured fan-in, switch functions, pays off."""
    assert options.cost is not None
    out = {}
    for name, (without, everything) in named.items():
        fan = estimate(without, options.cost).as_dict()
        out[name] = {"requests": len(without.outcomes), "fan_in_max": fan["fan_in_max"],
                     "fan_in_mean": fan["fan_in_mean"],
                     "switch_functions": switch_functions(without, everything, options.cost),
                     "pays_off": pays_off(without, everything, options)}
    return {"mechanisms": {m: s.label() for m, s in sharings(options.cost).items()},
            "block_transfer_s": options.cost.block_transfer_s, "workloads": out}


# -- everything ---------------------------------------------------------------------------------------
@dataclass
class SideTasks:
    """Replays independent of Q1's outcome (the studies) that `run_all` runs beside the Q1 sweep, so that both
    workers stay busy until the cluster replays can start: `fn(shared, task, progress)` per task, `cost` as in
    `run_tasks`; `results` is filled in task order."""

    fn: Callable[[Any, tuple, Progress], object]
    shared: Any
    tasks: list[tuple]
    cost: Callable[[tuple], float] | None = None
    results: list = field(default_factory=list)


def run_all(stream: BlockStream, options: EvalOptions, progress: Progress | None = None,
            stage: Callable[[str], None] | None = None,
            streams: list[tuple[int, BlockStream]] | None = None, jobs: int = 1,
            side: SideTasks | None = None, workloads: dict[str, BlockStream] | None = None) -> dict:
    """All four questions on `jobs` processes; `stage` is told which phase starts (for the progress display).

    `side` tasks, if any, run in the same batch as the Q1 sweep (their results land in `side.results`).
    `workloads` (e.g. the incast workloads) get Q2's switch-functions replays too, in the cluster batch; the
    main trace's are Q2's own."""
    if stage:
        stage("Q1 pool policies")
    trace = {"trace": stream}
    q1_list = q1_tasks(stream, options)
    if side is None:
        q1_results = run_tasks(_replay, trace, q1_list, jobs, progress, lambda t: task_cost(trace, t))
    else:
        extra = side

        def both(shared: tuple, task: tuple, report: Progress) -> object:
            which, inner = task
            return _replay(shared[0], inner, report) if which == 0 else extra.fn(shared[1], inner, report)

        def cost(task: tuple) -> float:
            which, inner = task
            if which == 0:
                return task_cost(trace, inner)
            return extra.cost(inner) if extra.cost is not None else 0.0

        batch = [(0, t) for t in q1_list] + [(1, t) for t in side.tasks]
        everything = run_tasks(both, (trace, side.shared), batch, jobs, progress, cost)
        q1_results, side.results = everything[:len(q1_list)], everything[len(q1_list):]
    q1 = q1_from(stream, options, q1_results)
    spec = best_policy(q1, options)
    streams = scale_streams(options) if streams is None else streams
    if stage:
        stage("Q2-Q4 cluster")
    workloads = workloads or {}
    shared = {"trace": stream, **{f"scale-{n}": s for n, s in streams},
              **{f"workload-{n}": s for n, s in workloads.items()}}
    c2 = q2_configs(stream, options, spec)
    c3 = q3_configs(stream, options, spec)
    c4 = q4_configs(streams, options, spec)
    cw = [(f"workload-{n}", q2_configs(s, options, spec)[c]) for n, s in workloads.items() for c in SHARING_CONFIGS]
    tasks = ([("cluster", "trace", c) for c in c2.values()] + [("cluster", "trace", c) for c in c3.values()]
             + [("cluster", name, c) for name, c in c4] + [("cluster", name, c) for name, c in cw])
    results = run_tasks(_replay, shared, tasks, jobs, progress, lambda t: task_cost(shared, t))
    at = len(c2) + len(c3)
    r2, r3, r4, rw = results[:len(c2)], results[len(c2):at], results[at:at + len(c4)], results[at + len(c4):]
    named = dict(zip(c2, r2, strict=True))
    pairs = {"main trace": (named["without switch pool"], named["all tiers"])}
    per_stamp, step = stamps(stream.times)
    if per_stamp >= STAMPED:  # its requests stamped together look simultaneous: price the other reading too
        spread = spread_stamps(stream.times)
        pairs[f"main trace, stamps spread over {step:g} s"] = (retimed(named["without switch pool"], spread),
                                                               retimed(named["all tiers"], spread))
    for i, name in enumerate(workloads):
        everything, without = rw[2 * i], rw[2 * i + 1]
        pairs[name] = (without, everything)
    return {"best_policy": spec.name, "q1": q1, "q2": q2_tiers(c2, r2, options, spec),
            "q3": q3_recycling(c3, r3, options), "q4": q4_scale(streams, r4, options, spec),
            "sharing": sharing_study(pairs, options)}


def work_units(stream: BlockStream, options: EvalOptions, streams: list[tuple[int, BlockStream]],
               workloads: dict[str, BlockStream] | None = None) -> int:
    """Block references the whole run replays (the progress bar's total)."""
    n = len(stream)
    q1 = n * len(options.policies) * len(options.fractions) + n * len(options.fractions)
    q2 = n * 5
    q3 = n * len(options.recycling)
    q4 = 2 * sum(len(s) for _, s in streams)
    shared = len(SHARING_CONFIGS) * sum(len(s) for s in (workloads or {}).values())
    return q1 + q2 + q3 + q4 + shared
