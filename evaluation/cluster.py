"""The serving cluster a trace is replayed through: N inference nodes, storage nodes, and the switch pool.

    node 0..N-1: HBM ⊂ DRAM (inclusive LRU caches, like vLLM's prefix cache + an LMCache-style CPU offload)
          │ node NIC
    ┌─────┴──────┐
    │   switch   │  switch pool: capacity in blocks, policy under test (admission/eviction/recycling)
    └─────┬──────┘
          │ storage NIC (shared: N-to-1 incast)
    storage nodes: remote DRAM pool (Mooncake store), every computed block is written there; it keeps
                   everything, or evicts by LRU or as Mooncake Store's master does (`evaluation.remote_store`)

A request goes to one node (round-robin, or prefix-aware: the node already holding the longest leading run,
like NVIDIA Dynamo's KV-aware router, with a load penalty). Its blocks are looked up in order: HBM, node
DRAM, switch pool, storage DRAM. The longest leading run found is reused; the rest is prefilled and written
back (into the node's HBM and DRAM, and to storage). Tiers can be switched off to measure what each buys.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from evaluation.remote_store import REMOTE_TIERS, MooncakeEviction, RemoteStats, RemoteTier, build_remote
from evaluation.stream import BlockStream
from policies.base import BlockInfo, Tier
from policies.spec import PolicySpec

NODE_TIER_POLICY = PolicySpec("always", "lru", "drop")
"""Node HBM and DRAM keep every block they see and forget the least recently used (vLLM's prefix cache)."""

SOURCES = (Tier.NODE_HBM, Tier.NODE_DRAM, Tier.SWITCH, Tier.STORAGE_DRAM)
"""Where a reused block can come from, fastest first; anything else is prefilled."""


@dataclass(frozen=True)
class ClusterConfig:
    """Sizes and switches of the modelled cluster; capacities are in blocks."""

    nodes: int = 4
    routing: str = "prefix"
    """`round-robin` or `prefix` (KV-aware: most leading blocks held, minus a load penalty)."""
    hbm_blocks: int = 256
    """Per node: HBM left for cached prefixes (≈ 16 GiB of Llama-3-8B blocks)."""
    dram_blocks: int = 2048
    """Per node: host DRAM for offloaded KV (≈ 128 GiB of Llama-3-8B blocks); 0 disables the tier."""
    storage_blocks: int | None = None
    """Remote DRAM pool capacity; None keeps every block ever computed (Mooncake's design); 0 disables it."""
    remote_tier: str = "lru"
    """How a bounded remote pool evicts: `mooncake` (as Mooncake Store's master, `evaluation.remote_store`), `lru`,
    or `infinite` (ignores the capacity)."""
    mooncake: MooncakeEviction = field(default_factory=MooncakeEviction)
    storage_nodes: int = 1
    """Blocks are spread over storage nodes by key; each has its own NIC."""
    switch_blocks: int = 0
    """Switch pool capacity; 0 disables it."""
    switch_policy: PolicySpec = field(default_factory=PolicySpec)
    switch_block_share: float = 1.0
    """Fraction of each held block's bytes in the switch: 1 = whole blocks, less = its leading chunks
    (`evaluation.memory.plan`); the rest of a switch hit still comes from the storage node."""
    load_penalty_blocks: float = 4.0
    """Prefix routing: a node's cost grows by this many blocks per request it received in the last window."""
    load_window_s: float = 10.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.storage_nodes < 1:
            raise ValueError("nodes and storage_nodes must be ≥ 1")
        if self.routing not in ("round-robin", "prefix"):
            raise ValueError(f"routing must be 'round-robin' or 'prefix', got {self.routing!r}")
        if min(self.hbm_blocks, self.dram_blocks, self.switch_blocks) < 0:
            raise ValueError("capacities must be ≥ 0")
        if self.remote_tier not in REMOTE_TIERS:
            raise ValueError(f"remote_tier must be one of {', '.join(REMOTE_TIERS)}, got {self.remote_tier!r}")
        if not 0 < self.switch_block_share <= 1:
            raise ValueError(f"switch_block_share must be in (0, 1], got {self.switch_block_share}")


@dataclass
class RequestOutcome:
    """What one request found: the source tier of each reused leading block, and what it had to prefill."""

    index: int
    arrival_s: float
    node: int
    blocks: int
    tokens: int
    reused_tokens: int = 0
    from_tier: dict[Tier, int] = field(default_factory=dict)
    """Blocks of the leading run served by each tier."""
    storage_reads: dict[int, int] = field(default_factory=dict)
    """Blocks read from each storage node."""
    storage_keys: list[tuple[int, object, bool]] = field(default_factory=list)
    """(storage node, block key, whole) of every block read from a storage node: whole, or (False) the part
    of a switch hit the switch does not hold. What a coalescing switch could merge with other readers'."""
    block_hits: int = 0
    """Blocks found in some tier, inside the leading run or not."""

    @property
    def prefix_blocks(self) -> int:
        return sum(self.from_tier.values())


@dataclass
class SwitchStats:
    """What managing the switch pool cost: one digest per miss, one table write per admission or eviction."""

    lookups: int = 0
    hits: int = 0
    admissions: int = 0
    evictions: int = 0
    recycled: int = 0
    recycled_reused: int = 0
    """Recycled blocks later read again from the tier they were recycled to."""

    @property
    def digests(self) -> int:
        return self.lookups - self.hits

    @property
    def table_writes(self) -> int:
        return self.admissions + self.evictions


@dataclass
class ClusterResult:
    config: ClusterConfig
    outcomes: list[RequestOutcome]
    switch: SwitchStats
    reuse_gap_s: dict[Tier, list[float]]
    """Per source tier: time since the served block's previous use (how long each tier must hold a block)."""
    remote: RemoteStats = field(default_factory=RemoteStats)
    """Puts, evictions and refused puts of the remote pool."""

    def blocks_from(self, tier: Tier) -> int:
        return sum(o.from_tier.get(tier, 0) for o in self.outcomes)

    @property
    def block_refs(self) -> int:
        return sum(o.blocks for o in self.outcomes)

    @property
    def prefix_hit_ratio(self) -> float:
        return sum(o.prefix_blocks for o in self.outcomes) / max(1, self.block_refs)

    @property
    def block_hit_ratio(self) -> float:
        return sum(o.block_hits for o in self.outcomes) / max(1, self.block_refs)


class Cluster:
    """Replays a block stream through the tiers; one object per configuration."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.hbm = [NODE_TIER_POLICY.build(config.hbm_blocks, Tier.NODE_HBM) if config.hbm_blocks else None
                    for _ in range(config.nodes)]
        self.dram = [NODE_TIER_POLICY.build(config.dram_blocks, Tier.NODE_DRAM) if config.dram_blocks else None
                     for _ in range(config.nodes)]
        self.switch = (config.switch_policy.build(config.switch_blocks, Tier.SWITCH, log=True)
                       if config.switch_blocks else None)
        self.storage: RemoteTier = build_remote(
            config.remote_tier, config.storage_blocks,
            lambda capacity: NODE_TIER_POLICY.build(capacity, Tier.STORAGE_DRAM), config.mooncake)
        self.stats = SwitchStats()
        self._next_node = 0
        self._recent: list[deque[float]] = [deque() for _ in range(config.nodes)]
        self._last_use: dict = {}
        self._recycled: set = set()
        self.reuse_gap_s: dict[Tier, list[float]] = {t: [] for t in SOURCES}

    # -- routing ----------------------------------------------------------------------------------
    def _held(self, node: int, key) -> bool:
        hbm, dram = self.hbm[node], self.dram[node]
        return (hbm is not None and key in hbm) or (dram is not None and key in dram)

    def route(self, blocks: tuple[BlockInfo, ...], now: float) -> int:
        """The node a request goes to."""
        n = self.config.nodes
        if self.config.routing == "round-robin" or n == 1:
            node = self._next_node
            self._next_node = (node + 1) % n
            return node
        best, best_cost = 0, float("inf")
        for offset in range(n):
            node = (self._next_node + offset) % n  # rotate the start so ties spread round-robin
            recent = self._recent[node]
            while recent and recent[0] < now - self.config.load_window_s:
                recent.popleft()
            held = 0
            for block in blocks:
                if not self._held(node, block.key):
                    break
                held += 1
            cost = (len(blocks) - held) + self.config.load_penalty_blocks * len(recent)
            if cost < best_cost:
                best, best_cost = node, cost
        self._next_node = (best + 1) % n
        self._recent[best].append(now)
        return best

    # -- one request ------------------------------------------------------------------------------
    def _switch_access(self, block: BlockInfo, now: float) -> bool:
        pool = self.switch
        if pool is None:
            return False
        self.stats.lookups += 1
        hit = pool.access(block, now)
        if hit:
            self.stats.hits += 1
        elif block.key in pool:
            self.stats.admissions += 1
        events = list(pool.events)  # since the last request; emptied, as a controller reads its log
        pool.events.clear()
        for event in events:
            if event.kind == "evicted":
                self.stats.evictions += 1
            elif event.kind == "demoted" and event.tier == Tier.STORAGE_DRAM and self.storage.enabled:
                self.stats.recycled += 1
                self._recycled.add(event.key)
                self.storage.refresh(BlockInfo(key=event.key, size_bytes=block.size_bytes), now)
        return hit

    def serve(self, index: int, now: float, blocks: tuple[BlockInfo, ...], tokens: int) -> RequestOutcome:
        node = self.route(blocks, now)
        hbm, dram = self.hbm[node], self.dram[node]
        outcome = RequestOutcome(index, now, node, len(blocks), tokens)
        leading = True
        storage_nodes = self.config.storage_nodes
        partial = self.config.switch_block_share < 1.0
        last_use = self._last_use
        for block in blocks:
            key = block.key
            source = None
            in_hbm = hbm is not None and hbm.access(block, now)
            in_dram = dram is not None and dram.access(block, now)
            if in_hbm:
                source = Tier.NODE_HBM
            elif in_dram:
                source = Tier.NODE_DRAM
            elif self._switch_access(block, now):
                source = Tier.SWITCH
            elif self.storage.read_or_write(block, now):
                source = Tier.STORAGE_DRAM
                if key in self._recycled:
                    self.stats.recycled_reused += 1
                    self._recycled.discard(key)
            if source is not None:
                outcome.block_hits += 1
            if leading and source is None:
                leading = False
            if leading:
                assert source is not None
                outcome.from_tier[source] = outcome.from_tier.get(source, 0) + 1
                outcome.reused_tokens += block.tokens
                if source == Tier.STORAGE_DRAM or (source == Tier.SWITCH and partial):
                    home = hash(key) % storage_nodes
                    outcome.storage_reads[home] = outcome.storage_reads.get(home, 0) + 1
                    outcome.storage_keys.append((home, key, source == Tier.STORAGE_DRAM))
                if key in last_use:
                    self.reuse_gap_s[source].append(now - last_use[key])
            last_use[key] = now
        return outcome


def simulate(stream: BlockStream, config: ClusterConfig,
             progress: Callable[[int], None] | None = None) -> ClusterResult:
    """Replay every request of `stream` through a fresh cluster."""
    cluster = Cluster(config)
    outcomes = []
    blocks = stream.blocks
    for i, (now, start, end) in enumerate(stream.request_slices()):
        outcomes.append(cluster.serve(i, now, blocks[start:end], stream.trace.requests[i].input_tokens))
        if progress:
            progress(end - start)
    return ClusterResult(config, outcomes, cluster.stats, cluster.reuse_gap_s, cluster.storage.stats)
