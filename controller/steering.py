"""Steering: one pool address in front of several storage nodes (p4src/steer.p4, docs/dataplane.md "Steering").

The data plane places a block (tenant, prefix_hash) in bucket `crc32(STEER_SALT ‖ tenant ‖ prefix_hash) mod
STEER_BUCKETS` (`bucket_of`); this module decides which storage node serves each bucket and keeps the switch's
`steer_bucket` table saying so, while probing every node (STAT over the management network, once a second):

* every bucket has a **home** node, `nodes[bucket mod N]`, which serves it while it answers probes;
* a node that misses `failures_to_down` probes in a row is **down**. With a shared store (`mooncake`: every node
  reads and writes the same Mooncake Store) its buckets go to the next live node in ring order; with private
  stores (`memory`) they become **unavailable**: the switch answers MISS (PUT: ERR_FULL) itself, because another
  node would answer MISS at best and, worse, accept writes the home node never sees (after its return a reader
  would get the home node's older value). A reader therefore gets MISS or the right bytes, never a wrong value;
* a node that answers again gets its home buckets back.

Why the shared store may fail over and back safely: storage nodes started with `--mooncake-shared` read a block's
newest-version record from Mooncake on every request instead of keeping it, so a node that serves a bucket again
after another node wrote it sees those writes (docs/storage-backends.md).
"""

from __future__ import annotations

import ipaddress
import logging
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller.hosts import Host
from kvpool.client import ClientOptions, KVPClient, KVPError, parse_address
from kvpool.constants import KVP_UDP_PORT
from p4rt.entities import Exact, Lpm, TableEntry
from p4rt.errors import P4RuntimeError

log = logging.getLogger(__name__)

STEER_BUCKETS = 256
"""`STEER_BUCKETS` (1 << STEER_BUCKET_WIDTH) in p4src/include/constants.p4."""
STEER_SALT = 0x6B43A9B5
"""`STEER_SALT` in p4src/include/constants.p4."""
META_NODE_SHIFT = 24
"""LOOKUP_META_REPLY's `aux` bits 31..24 carry the node id (`META_NODE_SHIFT`)."""
TENANT_BITS, PREFIX_HASH_BITS = 16, 64
"""Widths of `kvp_h.tenant` and `kvp_h.prefix_hash`, which the bucket hash concatenates (docs/protocol.md)."""

CONFIG_TABLE = "MyIngress.steer_config"
BUCKET_TABLE = "MyIngress.steer_bucket"
MEMBER_TABLE = "MyIngress.pool_member"
ROUTE_TABLE = "MyIngress.ipv4_lpm"


def bucket_of(tenant: int, prefix_hash: int, buckets: int = STEER_BUCKETS) -> int:
    """The bucket the data plane puts a block in: v1model crc32 over salt ‖ tenant ‖ prefix_hash, big-endian."""
    assert TENANT_BITS == 16 and PREFIX_HASH_BITS == 64, "the packing below follows the header's widths"
    return zlib.crc32(struct.pack("!IHQ", STEER_SALT, tenant, prefix_hash)) % buckets


def node_of_meta_aux(aux: int) -> int:
    """The storage node id a LOOKUP_META_REPLY names (0: not said)."""
    return (aux >> META_NODE_SHIFT) & 0xFF


@dataclass(frozen=True, slots=True)
class PoolNode:
    """One storage node of the pool."""

    node_id: int
    """1..255: what LOOKUP_META_REPLY reports (0 means "not said")."""
    address: str
    """Its own IPv4 address in the data plane (where the switch steers to)."""
    probe_port: int = KVP_UDP_PORT
    """UDP port the controller STATs it on (at `address`, over the management network in the testbed)."""

    def __post_init__(self) -> None:
        if not 1 <= self.node_id <= 255:
            raise ValueError(f"pool node {self.address}: id {self.node_id} outside 1..255")
        ipaddress.IPv4Address(self.address)


@dataclass(frozen=True, slots=True)
class SteeringOptions:
    """The pool: its address, its nodes, and how failures are handled."""

    pool_address: str
    """The virtual IPv4 address clients send to; no host owns it."""
    nodes: tuple[PoolNode, ...]
    shared_store: bool = False
    """Every node reads and writes one shared store (mooncake): a down node's buckets go to a live node."""
    probe_seconds: float = 1.0
    """Period of the health probes."""
    probe_timeout: float = 0.3
    """Seconds a node has to answer one STAT."""
    failures_to_down: int = 2
    """Probes missed in a row that make a node down (one lost datagram is not a failure)."""
    buckets: int = STEER_BUCKETS

    def __post_init__(self) -> None:
        ipaddress.IPv4Address(self.pool_address)
        if not self.nodes:
            raise ValueError("a pool needs at least one storage node")
        ids = [n.node_id for n in self.nodes]
        if len(set(ids)) != len(ids) or len({n.address for n in self.nodes}) != len(ids):
            raise ValueError(f"pool nodes need distinct ids and addresses: {self.nodes}")
        if self.failures_to_down < 1:
            raise ValueError("failures_to_down must be >= 1")

    @classmethod
    def parse_node(cls, text: str, node_id: int) -> PoolNode:
        """`ADDR` or `ADDR:PORT` (the `--pool-node` flag), numbered by its position."""
        host, port = parse_address(text)
        return PoolNode(node_id, host, port)


def placement(options: SteeringOptions, live: frozenset[int]) -> dict[int, int | None]:
    """bucket → id of the node serving it (None: unavailable), given the ids of the live nodes.

    Home = nodes[bucket mod N]; if it is down: with a shared store the next live node after it in ring order,
    else None."""
    nodes = options.nodes
    out: dict[int, int | None] = {}
    for bucket in range(options.buckets):
        home = bucket % len(nodes)
        owner: int | None = None
        if nodes[home].node_id in live:
            owner = nodes[home].node_id
        elif options.shared_store:
            for step in range(1, len(nodes)):
                candidate = nodes[(home + step) % len(nodes)]
                if candidate.node_id in live:
                    owner = candidate.node_id
                    break
        out[bucket] = owner
    return out


@dataclass
class Health:
    """Consecutive missed probes per node; a node is down after `failures_to_down` of them, up at the next answer."""

    failures_to_down: int
    missed: dict[int, int] = field(default_factory=dict)

    def record(self, node_id: int, answered: bool) -> None:
        self.missed[node_id] = 0 if answered else self.missed.get(node_id, 0) + 1

    def live(self, node_ids: Sequence[int]) -> frozenset[int]:
        return frozenset(n for n in node_ids if self.missed.get(n, 0) < self.failures_to_down)


class TableWriter(Protocol):
    """What steering needs of a switch connection (`p4rt.connection.SwitchConnection` has it)."""

    def insert(self, entry: TableEntry) -> None: ...
    def modify(self, entry: TableEntry) -> None: ...
    def set_default(self, table: str, action: str, params: Mapping[str, int] | None = None) -> None: ...


Probe = Callable[[PoolNode], bool]
"""Whether a node answers now (one STAT, `stat_probe`)."""


def stat_probe(timeout: float) -> Probe:
    """A probe that STATs the node at its own address (the management network's route in the testbed)."""
    def probe(node: PoolNode) -> bool:
        with KVPClient(ClientOptions(server=(node.address, node.probe_port), timeout=timeout, retries=0)) as c:
            try:
                c.stat(0)
                return True
            except KVPError:
                return False

    return probe


class Steering:
    """Keeps `steer_bucket` / `pool_member` / `steer_config` right for the pool, given the nodes' health."""

    def __init__(self, options: SteeringOptions, routes: Sequence[Host], probe: Probe) -> None:
        self.options = options
        self.probe = probe
        by_ip = {h.ip: h for h in routes}
        missing = [n.address for n in options.nodes if n.address not in by_ip]
        if missing:
            raise ValueError(f"pool nodes {missing} have no route in the host plan: cannot steer to them")
        self.routes = {n.node_id: by_ip[n.address] for n in options.nodes}
        self.health = Health(options.failures_to_down)
        self.live: frozenset[int] = frozenset(n.node_id for n in options.nodes)
        """Nodes taken as live; all at start (a node that is down is found within failures_to_down probes)."""
        self.buckets: dict[int, int | None] = {}
        """What the switch holds now: bucket → node id (None: unavailable)."""

    # ---- the switch ---------------------------------------------------------------------------------------

    def install(self, switch: TableWriter) -> None:
        """Every member, every bucket (as the current health says), a fallback route for the pool address (plain
        IPv4, e.g. ping, goes to the first node), then the pool address itself: steering is on only once its
        tables are full."""
        for node in self.options.nodes:
            _upsert(switch, TableEntry(MEMBER_TABLE, {"node_addr": Exact(_ip(node.address))},
                                       "MyIngress.set_pool_member", {"node": node.node_id}))
        first = self.routes[self.options.nodes[0].node_id]
        _upsert(switch, TableEntry(ROUTE_TABLE, {"hdr.ipv4.dst_addr": Lpm(_ip(self.options.pool_address), 32)},
                                   "MyIngress.ipv4_forward", {"dst_mac": _mac(first.mac), "port": first.port}))
        self.buckets = {}
        self._write_buckets(switch, placement(self.options, self.live), force=True)
        switch.set_default(CONFIG_TABLE, "MyIngress.set_pool", {"pool_addr": _ip(self.options.pool_address)})

    def check(self, switch: TableWriter) -> dict[int, int | None]:
        """Probe every node once, then re-steer the buckets whose owner changed; returns those (bucket → node)."""
        for node in self.options.nodes:
            self.health.record(node.node_id, self.probe(node))
        live = self.health.live([n.node_id for n in self.options.nodes])
        if live != self.live:
            gone, back = sorted(self.live - live), sorted(live - self.live)
            log.warning("pool nodes down: %s, back: %s; re-steering", gone or "-", back or "-")
            self.live = live
        return self._write_buckets(switch, placement(self.options, self.live))

    def _write_buckets(self, switch: TableWriter, wanted: dict[int, int | None], force: bool = False
                       ) -> dict[int, int | None]:
        changed = {b: n for b, n in wanted.items() if force or self.buckets.get(b, -1) != n}
        for bucket, node_id in sorted(changed.items()):
            if node_id is None:
                entry = TableEntry(BUCKET_TABLE, {"bucket": Exact(bucket)}, "MyIngress.bucket_unavailable", {})
            else:
                route = self.routes[node_id]
                node = next(n for n in self.options.nodes if n.node_id == node_id)
                entry = TableEntry(BUCKET_TABLE, {"bucket": Exact(bucket)}, "MyIngress.steer_to",
                                   {"node": node_id, "addr": _ip(node.address), "mac": _mac(route.mac),
                                    "port": route.port})
            _upsert(switch, entry)
            self.buckets[bucket] = node_id
        return changed

    # ---- questions -----------------------------------------------------------------------------------------

    def node_for(self, tenant: int, prefix_hash: int) -> int | None:
        """The node serving a block now (None: unavailable), as the switch steers it."""
        return self.buckets.get(bucket_of(tenant, prefix_hash, self.options.buckets))

    def status(self) -> dict:
        counts: dict[str, int] = {}
        for node_id in self.buckets.values():
            key = "unavailable" if node_id is None else str(node_id)
            counts[key] = counts.get(key, 0) + 1
        return {"pool_address": self.options.pool_address, "shared_store": self.options.shared_store,
                "nodes": {n.node_id: {"address": n.address, "live": n.node_id in self.live}
                          for n in self.options.nodes},
                "buckets_per_node": counts}


def _upsert(switch: TableWriter, entry: TableEntry) -> None:
    try:
        switch.insert(entry)
    except P4RuntimeError as exc:
        if not exc.only("ALREADY_EXISTS"):
            raise
        switch.modify(entry)


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)
