"""What a KV block costs to compute, to move over each link, and to manage in the switch pool.

The model is deliberately first-order: prefill time is FLOPs over an achieved GPU throughput; a transfer is
bytes over the slowest link on its path; a storage node's NIC is shared fairly by every request reading from
it within the same time window (the N-to-1 incast the switch pool relieves); the switch serves a block at its
port line rate; managing the pool costs digests and table updates on the control channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.memory import chunks
from evaluation.model import ModelConfig

GBPS = 1e9 / 8
"""Bytes per second in one gigabit per second."""


@dataclass(frozen=True)
class GPU:
    """An accelerator as the prefill sees it."""

    name: str
    peak_flops: float
    """Dense BF16 tensor throughput, FLOP/s (vendor datasheet, without sparsity)."""
    utilisation: float = 0.5
    """Fraction of peak a prefill achieves (MFU); 0.4–0.6 is typical for long prompts."""
    host_bytes_per_s: float = 25e9
    """Node DRAM → HBM copy rate over PCIe, bytes/s."""

    @property
    def flops(self) -> float:
        return self.peak_flops * self.utilisation


GPUS: dict[str, GPU] = {
    # NVIDIA A100 SXM datasheet: 312 TFLOPS BF16 dense; PCIe Gen4 x16 ≈ 25 GB/s achieved.
    "a100": GPU("a100", 312e12, 0.5, 25e9),
    # NVIDIA H100 SXM datasheet: 989 TFLOPS BF16 dense (1,979 with sparsity); PCIe Gen5 x16 ≈ 50 GB/s achieved.
    "h100": GPU("h100", 989e12, 0.5, 50e9),
}


def gpu_preset(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


@dataclass(frozen=True)
class Links:
    """Line rates of the links a block crosses."""

    node_nic_gbps: float = 100.0
    """Each inference node's NIC (every remote fetch ends here)."""
    storage_nic_gbps: float = 100.0
    """Each storage node's NIC, shared by all concurrent readers (the incast bottleneck)."""
    switch_port_gbps: float = 100.0
    """Rate at which the switch pool serves a block out of its own memory to one port."""
    incast_window_s: float = 1.0
    """Requests reading from the same storage node within one window share its NIC fairly."""

    @property
    def node_bytes_per_s(self) -> float:
        return self.node_nic_gbps * GBPS

    @property
    def storage_bytes_per_s(self) -> float:
        return self.storage_nic_gbps * GBPS

    @property
    def switch_bytes_per_s(self) -> float:
        return self.switch_port_gbps * GBPS


@dataclass(frozen=True)
class ControlCosts:
    """The price of managing the switch pool from the controller: the one overhead model of the report.

    Both the Q2–Q4 cluster replays (`evaluation.ttft.estimate`) and the Q4 boundary (`evaluation.boundary`)
    charge these figures, so the two cannot disagree about what an admission costs."""

    digest_bytes: int = 32
    """One digest (switch → controller) per pool miss: prefix hash, tier, counters."""
    table_update_s: float = 1e-3
    """Latency of one P4Runtime Write (insert or delete of an index entry); a block is usable only after it."""
    updates_per_s: float = 1_500.0
    """Table writes the control channel sustains: the midpoint of the 1,250–1,750 admissions+evictions/s measured
    over P4Runtime on the softswitch (docs/status.md); admissions beyond it are deferred."""
    install_latency_s: float = 0.015
    """Digest to first served hit: p50 10–17 ms measured (`bench controller`, docs/status.md)."""
    lookup_s: float = 1e-6
    """Extra latency of a pool lookup (one more pipeline pass) in the switch per fetch."""
    chunk_index: bool = True
    """True: one `kv_index` entry per 128-byte chunk (the data plane as built); False: one per block (proposal)."""

    def writes_per_block(self, block_bytes: int) -> int:
        """Index entries written to admit (or evict) one block of `block_bytes`."""
        return chunks(block_bytes) if self.chunk_index else 1


def prefill_seconds(model: ModelConfig, gpu: GPU, cached_tokens: int, total_tokens: int) -> float:
    """Time to prefill the tokens after the reused prefix (the attention still spans the whole context)."""
    return model.prefill_flops(cached_tokens, total_tokens) / gpu.flops


def storage_share_bytes_per_s(links: Links, concurrent_readers: int) -> float:
    """What one reader gets from a storage node read by `concurrent_readers` requests in its window."""
    if concurrent_readers < 1:
        raise ValueError("a reader counts itself: concurrent_readers must be ≥ 1")
    return min(links.node_bytes_per_s, links.storage_bytes_per_s / concurrent_readers)


@dataclass(frozen=True)
class FetchPlan:
    """Bytes a request pulls from each tier before it can prefill the rest."""

    hbm_bytes: int = 0
    dram_bytes: int = 0
    switch_bytes: int = 0
    storage_bytes: int = 0
    switch_blocks: int = 0


def fetch_seconds(plan: FetchPlan, gpu: GPU, links: Links, storage_readers: int,
                  control: ControlCosts | None = None) -> float:
    """Time to bring the reused prefix into HBM: transfers are serialised (conservative, no overlap).

    HBM-resident blocks cost nothing; node DRAM crosses PCIe; switch blocks cross the switch port and the node
    NIC; storage blocks cross the shared storage NIC, then the node NIC. Network bytes land in HBM directly
    (GPUDirect RDMA, as Mooncake's transfer engine does), so they do not cross PCIe a second time.
    """
    control = control or ControlCosts()
    seconds = plan.dram_bytes / gpu.host_bytes_per_s
    if plan.switch_bytes:
        seconds += plan.switch_bytes / min(links.node_bytes_per_s, links.switch_bytes_per_s)
        seconds += plan.switch_blocks * control.lookup_s
    if plan.storage_bytes:
        seconds += plan.storage_bytes / storage_share_bytes_per_s(links, max(1, storage_readers))
    return seconds
