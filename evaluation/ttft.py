"""Per-request time to first token from a cluster replay: fan-in at the storage NICs, bytes per link, TTFT.

Two passes, because a request's share of a storage NIC depends on every request reading from the same
storage node in its window: the replay records where each block came from, this module then counts readers
per (storage node, window) and prices each request.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from evaluation.cluster import SOURCES, ClusterResult
from evaluation.costs import GPU, ControlCosts, FetchPlan, Links, fetch_seconds, prefill_seconds
from evaluation.model import ModelConfig
from evaluation.sharing import SharedReads, Sharing
from evaluation.traces import BLOCK_TOKENS
from policies.base import Tier


@dataclass(frozen=True)
class CostModel:
    """Everything that turns blocks into seconds."""

    model: ModelConfig
    gpu: GPU
    links: Links = field(default_factory=Links)
    control: ControlCosts = field(default_factory=ControlCosts)
    block_tokens: int = BLOCK_TOKENS
    sharing: Sharing = field(default_factory=Sharing)
    """Which concurrent reads of one block the switch merges when it coalesces (`evaluation.sharing`); default:
    the data plane as built, stream join (a reader joining a live stream pays what its missed part adds to the
    stream's patch pass)."""
    request_overhead_s: float = 0.0
    """Fixed seconds every request pays besides fetch and prefill (scheduling, sampling, the API round trip);
    0 for the cluster studies, measured on the testbed by `evaluation.calibration`."""

    @property
    def block_bytes(self) -> int:
        return self.model.block_bytes(self.block_tokens)

    @property
    def block_transfer_s(self) -> float:
        """One block streamed from a storage node to one reader, uncontended."""
        return self.block_bytes / min(self.links.node_bytes_per_s, self.links.storage_bytes_per_s)


@dataclass
class TTFTSummary:
    """Latency and traffic of one replay under one cost model."""

    ttft_s: np.ndarray
    """Estimated TTFT per request (fetch of the reused prefix + prefill of the rest)."""
    no_reuse_s: np.ndarray
    """TTFT per request if nothing were reused (full prefill)."""
    link_bytes: dict[str, int]
    """Bytes moved per link: pcie (node DRAM → HBM), switch_port, storage_nic, node_nic."""
    fan_in: list[tuple[float, int]]
    """(window start s, most concurrent readers of any storage node in that window)."""
    storage_load: list[tuple[float, int]]
    """(window start s, most bytes any one storage node sent in that window)."""
    control: dict[str, float]
    per_request: list[dict] = field(default_factory=list)
    """With `estimate(..., per_request=True)`: each request's sources, bytes per link and TTFT."""

    @property
    def mean_ttft_s(self) -> float:
        return float(self.ttft_s.mean()) if self.ttft_s.size else 0.0

    def as_dict(self) -> dict:
        t = self.ttft_s
        return {
            "requests": int(t.size),
            "ttft_mean_s": self.mean_ttft_s,
            "ttft_p50_s": float(np.percentile(t, 50)) if t.size else 0.0,
            "ttft_p99_s": float(np.percentile(t, 99)) if t.size else 0.0,
            "no_reuse_mean_s": float(self.no_reuse_s.mean()) if t.size else 0.0,
            "saved_mean_s": float((self.no_reuse_s - t).mean()) if t.size else 0.0,
            "link_bytes": dict(self.link_bytes),
            "fan_in_max": max((n for _, n in self.fan_in), default=0),
            "fan_in_mean": float(np.mean([n for _, n in self.fan_in])) if self.fan_in else 0.0,
            "control": dict(self.control),
        }


def request_ttft(cost: CostModel, plan: FetchPlan, storage_readers: int, reused_tokens: int, tokens: int) -> float:
    """One request's TTFT: fetch its reused prefix (`plan`), prefill the rest, plus the fixed overhead. Even a
    full hit recomputes the last token: its logits give the first output token (as vLLM does)."""
    cached = min(reused_tokens, tokens - 1)
    return (fetch_seconds(plan, cost.gpu, cost.links, storage_readers, cost.control)
            + prefill_seconds(cost.model, cost.gpu, cached, tokens) + cost.request_overhead_s)


def readers_per_window(result: ClusterResult, window_s: float) -> Counter:
    """Requests reading from each storage node in each window: {(storage node, window index): readers}."""
    readers: Counter = Counter()
    for outcome in result.outcomes:
        window = int(outcome.arrival_s // window_s)
        for home in outcome.storage_reads:
            readers[home, window] += 1
    return readers


def storage_sends(result: ClusterResult, window_s: float, partial_share: float,
                  sharing: Sharing | bool | None = None,
                  transfer_s: float = 0.0) -> tuple[Counter, list[dict[int, float]]]:
    """Readers per (storage node, window) and, per request, the blocks' worth each storage node sends for it.

    A read of the part of a switch hit the switch does not hold counts `partial_share` of a block. With a
    `sharing` mechanism, reads of one block from one storage node that the mechanism merges cost only what it
    says (`SharedReads`: nothing, or what a joiner's missed part adds to the patch pass); the switch fans the reply out to
    the others, so only readers that add bytes of their own count towards the node's fan-in. `transfer_s`: one
    block's transfer, how long a `stream-join` stream's pass over it lasts (the cluster's switch copies at line
    rate, so members do not slow it). `sharing` True (the former `coalesce` flag):
    the data plane as built; False or None: no merging.
    """
    readers: Counter = Counter()
    if sharing is True:
        sharing = Sharing()
    shared = SharedReads(sharing, transfer_s) if isinstance(sharing, Sharing) else None
    sends: list[dict[int, float]] = []
    for outcome in result.outcomes:
        window = int(outcome.arrival_s // window_s)
        own: dict[int, float] = {}
        for home, key, whole in outcome.storage_keys:
            cost = 1.0 if shared is None else shared.read(home, key, outcome.arrival_s)
            if cost > 0:
                own[home] = own.get(home, 0.0) + cost * (1.0 if whole else partial_share)
        for home in own:
            readers[home, window] += 1
        sends.append(own)
    return readers, sends


def estimate(result: ClusterResult, cost: CostModel, per_request: bool = False,
             coalesce: bool = False) -> TTFTSummary:
    """Price every request of `result` under `cost`; `per_request` also keeps one row per request;
    `coalesce`: the switch merges the reads of one block its mechanism can (`cost.sharing`, `storage_sends`)."""
    window_s = cost.links.incast_window_s
    block = cost.block_bytes
    share = result.config.switch_block_share
    readers, node_sends = storage_sends(result, window_s, 1.0 - share, cost.sharing if coalesce else None,
                                        cost.block_transfer_s)
    ttft = np.empty(len(result.outcomes))
    no_reuse = np.empty(len(result.outcomes))
    link: Counter[str] = Counter()
    sent: Counter = Counter()
    rows: list[dict] = []
    for i, outcome in enumerate(result.outcomes):
        tiers = outcome.from_tier
        window = int(outcome.arrival_s // window_s)
        contention = max((readers[home, window] for home in node_sends[i]), default=1)
        switch_blocks = tiers.get(Tier.SWITCH, 0)
        plan = FetchPlan(
            hbm_bytes=tiers.get(Tier.NODE_HBM, 0) * block,
            dram_bytes=tiers.get(Tier.NODE_DRAM, 0) * block,
            switch_bytes=int(switch_blocks * block * share),
            storage_bytes=tiers.get(Tier.STORAGE_DRAM, 0) * block + switch_blocks * block - int(
                switch_blocks * block * share),
            switch_blocks=switch_blocks,
        )
        for home, count in node_sends[i].items():
            sent[home, window] += int(count * block)
        link["storage_nic_sent"] += int(sum(node_sends[i].values()) * block)
        link["pcie"] += plan.dram_bytes
        link["switch_port"] += plan.switch_bytes
        link["storage_nic"] += plan.storage_bytes  # bytes readers received that left a storage node
        link["node_nic"] += plan.switch_bytes + plan.storage_bytes
        fetch = fetch_seconds(plan, cost.gpu, cost.links, contention, cost.control)
        ttft[i] = request_ttft(cost, plan, contention, outcome.reused_tokens, outcome.tokens)
        no_reuse[i] = request_ttft(cost, FetchPlan(), 1, 0, outcome.tokens)
        if per_request:
            rows.append({
                "request": outcome.index, "arrival_s": outcome.arrival_s, "node": outcome.node,
                "blocks": outcome.blocks, **{f"from_{t.name.lower()}": tiers.get(t, 0) for t in SOURCES},
                "prefilled_blocks": outcome.blocks - outcome.prefix_blocks,
                "pcie_bytes": plan.dram_bytes, "switch_port_bytes": plan.switch_bytes,
                "storage_nic_bytes": plan.storage_bytes, "node_nic_bytes": plan.switch_bytes + plan.storage_bytes,
                "storage_readers_in_window": contention if node_sends[i] else 0,
                "fetch_s": fetch, "ttft_s": ttft[i], "ttft_no_reuse_s": no_reuse[i],
            })
    per_window: dict[int, int] = {}
    for (_, window), n in readers.items():
        per_window[window] = max(per_window.get(window, 0), n)
    fan_in = [(w * window_s, per_window[w]) for w in sorted(per_window)]
    heaviest: dict[int, int] = {}
    for (_, window), n in sent.items():
        heaviest[window] = max(heaviest.get(window, 0), n)
    storage_load = [(w * window_s, heaviest[w]) for w in sorted(heaviest)]
    stats = result.switch
    duration = max(1e-9, result.outcomes[-1].arrival_s - result.outcomes[0].arrival_s) if result.outcomes else 1.0
    writes = stats.table_writes * cost.control.writes_per_block(cost.block_bytes)  # admissions/evictions → entries
    control: dict[str, float] = {
        "digests": stats.digests,
        "digest_bytes": stats.digests * cost.control.digest_bytes,
        "table_writes": writes,
        "table_writes_per_s": writes / duration,
        "controller_utilisation": writes * (1.0 / cost.control.updates_per_s) / duration,
        "lookup_s_total": stats.lookups * cost.control.lookup_s,
    }
    link["control"] = int(control["digest_bytes"])
    return TTFTSummary(ttft, no_reuse, dict(link), fan_in, storage_load, control, rows)
