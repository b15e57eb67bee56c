"""Question 4 as a boundary: where the switch pool's net TTFT benefit changes sign.

A closed-form model of one incast group: `concurrency` requests read the same shared prefix of
`prefix_blocks` blocks within one window, from `nodes` inference nodes; every link runs at `link_gbps`.
It prices the prefix fetch for one reader in three set-ups and charges every overhead the system really has:

* no switch function: the distinct fetchers (at most one per node; a node's second reader waits for the
  first) share the storage NIC;
* coalesce only: the storage node sends each block what the switch's sharing mechanism (`evaluation.sharing`)
  leaves it, and the switch replicates the reply to the readers it merged (on a software target each copy is
  one more packet through the switch, so a stream moves no faster than the switch copies it to its members, the
  same model as `evaluation.testbed`'s; on a Tofino-class target the replication engine does it at line rate).
  The group's readers start evenly spread over `window_s`; as built (stream join), a reader that starts while
  the block's stream is under way joins it and costs the node what its missed part adds to the stream's later
  passes;
* store + coalesce: the part of the prefix the memory holds (`evaluation.memory.plan`) comes out of the
  switch at its serve rate, the rest is coalesced; but only after the controller has installed it: one
  `kv_index` entry per 128-byte chunk, at the controller's measured table-write rate (docs/status.md:
  1,250–1,750 admissions+evictions/s over P4Runtime), after a digest, while new groups keep arriving
  (`groups_per_s`, each needing its own prefix installed and an old one evicted);
* every switch function adds the extra pipeline pass (`hop_s`) per request.

Net benefit = fetch time without the switch − with it (ms per reader); positive means it pays off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from evaluation.costs import GBPS, ControlCosts
from evaluation.memory import SwitchMemory, chunks, plan
from evaluation.sharing import SharedReads, Sharing

_CONTROL = ControlCosts()  # the report's one overhead model, shared with the cluster replays
CONTROLLER_WRITES_PER_S = _CONTROL.updates_per_s
"""Midpoint of the measured 1,250–1,750 admissions+evictions/s over P4Runtime on the softswitch."""
INSTALL_LATENCY_S = _CONTROL.install_latency_s
"""Digest to first served hit: p50 10–17 ms measured (`bench controller`, docs/status.md)."""


@dataclass(frozen=True)
class Scenario:
    """One cell of the boundary."""

    block_bytes: int
    memory: SwitchMemory
    concurrency: int = 16
    link_gbps: float = 100.0
    nodes: int = 16
    prefix_blocks: int = 24
    """Blocks of the shared prefix (24 × 512 = 12K tokens, the incast workloads' default)."""
    groups_per_s: float = 2.0
    """New shared prefixes per second that the controller must install."""
    window_s: float = 1.0
    """The group's readers start evenly spread over this window."""
    sharing: Sharing = field(default_factory=Sharing)
    """Which of the group's reads the switch merges (default: the data plane as built, stream join)."""
    writes_per_s: float = CONTROLLER_WRITES_PER_S
    chunk_index: bool = _CONTROL.chunk_index
    """True: one table entry per 128-byte chunk (the data plane as built); False: one per block (proposal)."""
    software_target: bool = False
    """Replication and serving go through the switch's packet rate (softswitch/BMv2) instead of line rate."""
    hop_s: float = _CONTROL.lookup_s
    storage_load: float = 0.5
    """Share of each storage NIC already taken by other reads (the steady traffic a cache competes with)."""


@dataclass(frozen=True)
class Outcome:
    without_s: float
    coalesce_s: float
    store_s: float
    installed_share: float
    """Share of the held prefix the controller gets installed in time for the group."""
    table_writes_per_s: float
    sends_per_reader: float = 1.0
    """Blocks' worth the storage node sends per reader with coalescing (1.0: the mechanism merged nothing)."""

    @property
    def net_benefit_s(self) -> float:
        return self.without_s - self.store_s

    @property
    def store_adds_s(self) -> float:
        """What the memory adds on top of coalescing (negative: storing costs more than it saves)."""
        return self.coalesce_s - self.store_s


def evaluate(s: Scenario) -> Outcome:
    link = s.link_gbps * GBPS
    storage = link * (1.0 - s.storage_load)
    prefix = s.prefix_blocks * s.block_bytes
    fetchers = max(1, min(s.concurrency, s.nodes))
    without = fetchers * prefix / storage
    packet_rate_bytes = s.memory.serve_bytes_per_s  # what the switch can send out of itself or replicate
    # a software switch copies a stream's replies to its members at its packet rate: the stream slows as members
    # join (as on the testbed, `evaluation.testbed`); a Tofino-class replication engine copies at line rate
    copies = packet_rate_bytes / s.block_bytes
    sends, merged = group_sends(fetchers, s.window_s, s.sharing, s.block_bytes / storage,
                                (lambda members: copies) if s.software_target else None)
    replicate = merged * prefix / packet_rate_bytes if s.software_target else 0.0
    coalesce = sends * prefix / storage + replicate + s.hop_s
    pool = plan(s.memory.bytes, s.block_bytes)
    held_blocks = min(pool.blocks, s.prefix_blocks)
    held = held_blocks * pool.share * s.block_bytes
    # Installing the held part: one write per chunk (or per block), plus as many evictions once full.
    writes = 2 * (chunks(int(held)) if s.chunk_index else held_blocks)
    demand = writes * s.groups_per_s
    rate_share = min(1.0, s.writes_per_s / demand) if demand else 1.0
    install_s = INSTALL_LATENCY_S + writes / 2 / s.writes_per_s
    in_time = max(0.0, 1.0 - install_s / s.window_s)
    installed = held * rate_share * in_time
    rest = prefix - installed
    if s.software_target:
        serve = fetchers * installed / packet_rate_bytes
    else:
        serve = installed / min(link, packet_rate_bytes)
    store = serve + sends * rest / storage + merged * rest / packet_rate_bytes * s.software_target + s.hop_s
    return Outcome(without, coalesce, store, installed / held if held else 0.0, demand, sends / fetchers)


def group_sends(readers: int, window_s: float, sharing: Sharing, transfer_s: float,
                delivery: Callable[[int], float] | None = None) -> tuple[float, int]:
    """(blocks' worth the storage node sends per block of the prefix, readers the switch merged) for `readers`
    starting evenly spread over `window_s`; `transfer_s`: one block's transfer (a stream's pass at best);
    `delivery`: blocks/s the switch copies to a stream's members in all (None: line rate)."""
    shared = SharedReads(sharing, transfer_s, delivery)
    costs = [shared.read(0, 0, window_s * i / readers) for i in range(readers)]
    return sum(costs), sum(1 for c in costs if c < 1.0)


def grid(base: Scenario, axis_x: str, xs: list, axis_y: str, ys: list) -> list[list[Outcome]]:
    """Outcomes over two fields of `Scenario` (rows: ys, columns: xs)."""
    return [[evaluate(replace(base, **{axis_x: x, axis_y: y})) for x in xs] for y in ys]
