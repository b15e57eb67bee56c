"""`python -m controller serve`: one controller process wiring P4Runtime, the pool's decisions, the API and metrics.

Threads: the switch's stream supervisor (packet-ins, digests, reconnects), a tick thread (counter polls, pin
expiry, sketch epochs, pipeline checks), a fast first-hit poller, the HTTP API and the Prometheus endpoint.
All share one `PoolManager` behind its lock.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.api import ApiServer
from controller.client_ops import ClientService
from controller.coalescing import CONFIG_TABLE as COALESCE_CONFIG_TABLE
from controller.coalescing import CoalescingOptions, configure_coalescing
from controller.codes import FABRIC_INVALIDATE_SESSION, PortRole
from controller.hosts import HostPlan, load_plan
from controller.metrics import Metrics, serve_prometheus
from controller.p4dataplane import DetectorOptions, P4RuntimeDataPlane, PipelineNames
from controller.policy import PolicyFactory, PolicySpec, build_policies, infer_kind
from controller.pool import PoolManager, PoolOptions
from controller.state import StateStore
from controller.steering import BUCKET_TABLE, Steering, SteeringOptions, stat_probe
from controller.storage import StorageClientOptions, UdpStorageNode
from controller.storagework import StorageWorker
from controller.streaming import CONFIG_TABLE as STREAM_CONFIG_TABLE
from controller.streaming import StreamingOptions, configure_streaming
from controller.tiers import TierMap, TierMover
from kvpool.client import parse_address
from kvpool.keys import ChunkKey
from p4rt.connection import DigestList, PacketIn, SwitchConnection, SwitchOptions
from p4rt.entities import Replica
from p4rt.errors import P4RuntimeError
from p4rt.p4info import P4Info
from policies.base import Tier

log = logging.getLogger(__name__)


DEFAULT_API_PORT = 9090
"""Where the JSON API listens when `--api` names no port (0 there: any free port)."""


@dataclass(frozen=True)
class ServeOptions:
    """Everything `serve` is started with (its command-line flags)."""

    switch: str
    """P4Runtime address of the switch, host:port."""
    p4info: Path
    device_config: Path
    """softswitch's device config, or BMv2's JSON from p4c."""
    state: Path
    """SQLite file with the slot map and pins."""
    device_id: int = 0
    storage: str | None = None
    """Storage node host:port for TIER_MOVE / STAT."""
    api: str = f"127.0.0.1:{DEFAULT_API_PORT}"
    """host:port of the local JSON API the CLI talks to."""
    hosts_file: Path | None = None
    metrics_port: int | None = None
    admission: str = "value"
    eviction: str = "value"
    recycling: str = "residual"
    policy_params: dict[str, dict[str, str]] = field(default_factory=dict)
    election_id: int = 1
    tick_seconds: float = 0.5
    """Period of pin expiry and sketch-epoch checks."""
    poll_seconds: float = 1.0
    """Period of the full slot-counter poll (hits for the policies, hit ratio); on softswitch a Read costs
    about half a millisecond per counter cell, so a full pool's poll takes a few hundred ms."""
    check_seconds: float = 5.0
    """Period of the check that the switch still has our pipeline and index entries."""
    first_hit_poll_seconds: float = 0.002
    """Shortest period of the fast poll of newly admitted slots' counters (times the first switch hit); it backs
    off as the newest admission ages (`controller.ledger.PendingFirstHits.poll_interval`)."""
    detector: DetectorOptions = field(default_factory=DetectorOptions)
    pool: PoolOptions = field(default_factory=PoolOptions)
    storage_queue: int = 1024
    """Storage-node calls (recycling, fills) queued at most for the storage worker; beyond, they are dropped
    and counted (a demotion not made leaves the chunk where the storage node keeps it)."""
    coalesce_timeout_us: int = 200_000
    """Lifetime of a coalesced GET in the data plane (0 = coalescing off); below the clients' retry timeout."""
    stream_idle_us: int = 500_000
    """Idle lifetime of a stream (docs/dataplane.md, "Stream join"; 0 = streams off). Streams are on only with
    coalescing; about the clients' retry timeout, after which a subscriber GETs what was not pushed."""
    steering: SteeringOptions | None = None
    """One pool address over several storage nodes (controller/steering.py); None: no pool."""


def pipeline_cookie(p4info: bytes, device_config: bytes) -> int:
    """A 64-bit fingerprint of the pipeline, so a reconnect can tell 'same program still loaded' from 'fresh switch'."""
    digest = hashlib.blake2b(p4info + b"\0" + device_config, digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


class Controller:
    """The control plane of one switch."""

    def __init__(self, options: ServeOptions, policy_factory: PolicyFactory | None = None) -> None:
        self.options = options
        self.metrics = Metrics()
        self.p4info = P4Info.load(options.p4info)
        self.device_config = Path(options.device_config).read_bytes()
        self.cookie = pipeline_cookie(self.p4info.message.SerializeToString(), self.device_config)
        self.plan = load_plan(options.hosts_file) if options.hosts_file else HostPlan([], {})
        self.hosts = self.plan.hosts
        self.metrics.storage_ports = len(self.plan.storage_ports())
        if not self.metrics.storage_ports:
            log.warning("no switch port has the storage role (%s): storage replies arrive on host ports, which "
                        "may not fill the pool, so it stays empty and readers parked on a coalescing entry wait "
                        "for their retries; give the storage host \"role\": \"storage\" (or a `ports` list) in the "
                        "hosts file", options.hosts_file or "no --hosts-file")
        self.switch = SwitchConnection(
            SwitchOptions(options.switch, options.device_id, options.election_id),
            self.p4info, on_packet_in=self._on_packet_in, on_digest=self._on_digest, on_connect=self._on_connect,
        )
        self.dataplane = P4RuntimeDataPlane(self.switch, PipelineNames())
        self.metrics.hit_source = self.dataplane.hit_counts  # read when the API or a scrape asks, not polled
        self.storage = None
        if options.storage:
            host, port = parse_address(options.storage)
            self.storage = UdpStorageNode(StorageClientOptions(host, port))
        self.state = StateStore(options.state)
        self.policy_factory = policy_factory
        self.policy_spec = PolicySpec(options.admission, options.eviction, options.recycling, options.policy_params)
        policies = build_policies(self.policy_spec, self.dataplane.capacity, policy_factory)
        self.storage_worker = StorageWorker(self.metrics, options.storage_queue)
        """Storage-node calls (recycling, fills) off the pool lock and off the P4Runtime stream thread."""
        self.pool = PoolManager(self.dataplane, policies, state=self.state,
                                mover=TierMover(TierMap(), self.storage), metrics=self.metrics, options=options.pool,
                                storage_work=self.storage_worker)
        self.clients = ClientService(self.pool)
        self.steering = None
        if options.steering is not None:
            self.steering = Steering(options.steering, self.hosts, stat_probe(options.steering.probe_timeout))
        self.started_at = time.time()
        self.epoch = int(self.state.meta("epoch", "0") or 0)
        self._epoch_started = 0.0
        self._restored = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.api_server: ApiServer | None = None
        self.metrics_server: Any = None
        """The Prometheus endpoint's server (prometheus_client's type), once started."""
        self.last_reconcile: dict[str, int] = {}

    # ---- lifecycle ---------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        """Connect (pipeline, routes, reconcile), then start the periodic work, the API and metrics."""
        host, port = parse_address(self.options.api, DEFAULT_API_PORT, listening=True)
        self.api_server = ApiServer(self, host, port)  # its port bound before our own connections take one
        self.storage_worker.start()
        self.switch.open(timeout)
        loops = [(self._tick_loop, "ctl-tick"), (self._first_hit_loop, "ctl-first-hit")]
        if self.steering is not None:
            loops.append((self._steer_loop, "ctl-steer"))
        for target, name in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self.api_server.start()
        if self.options.metrics_port:
            self.metrics_server = serve_prometheus(self.metrics, self.options.metrics_port)

    def stop(self) -> None:
        """Stop the periodic work and the API first, then close the switch connection they use, so that no poll
        or pipeline check of theirs is still calling an RPC when the channel closes (gRPC's "Cannot invoke RPC
        on closed channel", once a traceback in the log at shutdown)."""
        self._stop.set()
        self.pool.pending_first_hit.wake()  # the periodic loops asleep on it
        for thread in self._threads:
            thread.join(timeout=2)
        if self.api_server is not None:
            self.api_server.stop()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
        self.switch.close()
        self.storage_worker.close()
        if self.storage is not None:
            self.storage.close()
        self.state.close()

    def wait(self) -> None:
        """Block until stop() (or Ctrl-C in the caller)."""
        while not self._stop.wait(1.0):
            pass

    # ---- (re)connection ----------------------------------------------------------------------------------

    def _on_connect(self, switch: SwitchConnection) -> None:
        """Runs after every arbitration win: make sure the pipeline and our entries are on the switch."""
        try:
            self._populate(switch)
        except P4RuntimeError as exc:
            if not self._stop.is_set():
                raise  # the connection retries the whole session after its backoff
            # stop() closed the channel under a reconnect's RPCs (SIGTERM while the switch came back): nothing
            # is left to populate, and a traceback here would only say that we were asked to stop
            log.debug("populating %s abandoned at shutdown: %s", self.options.switch, exc)

    def _populate(self, switch: SwitchConnection) -> None:
        self.metrics.switch_connections = switch.connections
        fresh = switch.pipeline_cookie() != self.cookie
        if fresh:
            log.info("switch %s has no (or another) pipeline: installing ours", self.options.switch)
            switch.set_pipeline(self.device_config, self.cookie)
        self._configure(fresh)
        if not self._restored:
            self.last_reconcile = self.pool.restore()
            self._restored = True
            log.info("reconciled with the switch: %s", self.last_reconcile)
        else:
            self.last_reconcile = self.pool.resync()
            log.info("switch reconnected (%s pipeline): %s", "new" if fresh else "same", self.last_reconcile)

    def _configure(self, fresh: bool) -> None:
        names = PipelineNames()
        self.switch.configure_digest(names.hot_digest, max_timeout_ns=0, max_list_size=1, ack_timeout_ns=1_000_000)
        if self.p4info.has_digest(names.over_slot_digest):  # a program without it never admits what it reports
            self.switch.configure_digest(names.over_slot_digest, max_timeout_ns=0, max_list_size=1,
                                         ack_timeout_ns=1_000_000)
        self._new_epoch()
        if self.hosts:
            self.dataplane.install_routes(self.hosts)
        roles = self.dataplane.install_port_roles(self.plan.ports)
        if roles:
            log.info("port roles installed: %s", {port: role.name for port, role in sorted(self.plan.ports.items())})
        self._configure_replication()
        if self.steering is not None and self.p4info.has_table(BUCKET_TABLE):
            self.steering.install(self.switch)
            log.info("pool %s steered over %s", self.steering.options.pool_address, self.steering.status())

    def _configure_replication(self) -> None:
        """The packet replication the data plane relies on: the fabric-invalidation clone session (FABRIC ports
        only, never a host port) and request coalescing's multicast group (every port the plan names)."""
        fabric = sorted(port for port, role in self.plan.ports.items() if role is PortRole.FABRIC)
        if fabric:
            self.switch.set_clone_session(FABRIC_INVALIDATE_SESSION, [Replica(port) for port in fabric])
            log.info("fabric invalidations cloned to ports %s", fabric)
        if not self.p4info.has_table(COALESCE_CONFIG_TABLE):
            return
        ports = sorted({host.port for host in self.hosts} | set(self.plan.ports))
        options = CoalescingOptions(timeout_us=self.options.coalesce_timeout_us or 1, epoch=self.epoch,
                                    enabled=self.options.coalesce_timeout_us > 0)
        configure_coalescing(self.switch, options, ports)
        log.info("request coalescing %s on ports %s", "on" if options.enabled else "off", ports)
        if self.p4info.has_table(STREAM_CONFIG_TABLE):
            streams = StreamingOptions(idle_us=self.options.stream_idle_us or 1, epoch=self.epoch,
                                       enabled=options.enabled and self.options.stream_idle_us > 0)
            configure_streaming(self.switch, streams, ports, self.plan.storage_ports())
            log.info("stream join %s (storage ports %s)", "on" if streams.enabled else "off",
                     self.plan.storage_ports())

    def _new_epoch(self) -> None:
        self.epoch = (self.epoch + 1) & 0xFFFFFFFF or 1
        self.state.set_meta("epoch", str(self.epoch))
        self.dataplane.configure_detector(self.options.detector, self.epoch)
        self._epoch_started = time.monotonic()

    # ---- stream events -----------------------------------------------------------------------------------

    def _on_packet_in(self, packet: PacketIn) -> None:
        reason = packet.metadata.get("reason")
        if reason == self.dataplane.punt_reasons.get("SLOT_REPLY"):
            from scapy.layers.inet import UDP
            from scapy.layers.l2 import Ether

            frame = Ether(packet.payload)
            if UDP in frame:
                self.dataplane.on_slot_reply(bytes(frame[UDP].payload))
            return
        if reason == self.dataplane.punt_reasons.get("CLIENT_OP"):
            reply = self.clients.handle(packet.payload)
            if reply is not None:
                self.switch.packet_out(reply, {"egress_port": packet.metadata.get("ingress_port", 0)})
            return
        log.warning("packet-in with unknown reason %r ignored", reason)

    def _on_digest(self, digests: DigestList) -> None:
        received = time.monotonic()
        over_slot = digests.name.rpartition(".")[2] == PipelineNames().over_slot_digest
        for member in digests.members:
            try:
                key = ChunkKey(member["tenant"], member["prefix_hash"], member["chunk_idx"])
                if over_slot:
                    shift = member["chunk_shift"]
            except (KeyError, ValueError) as exc:
                log.warning("malformed %s %s: %s", digests.name, member, exc)
                continue
            if over_slot:
                self.pool.on_over_slot(key, shift, member.get("generation"))
                continue
            self.pool.on_hot_key(key, member.get("estimate", 1), received=received,
                                 chunk_shift=member.get("chunk_shift"))  # when the digest carries it

    # ---- periodic work -----------------------------------------------------------------------------------

    def _guarded(self, what: str, action: Callable[[], object]) -> None:
        try:
            action()
        except P4RuntimeError as exc:
            log.debug("%s skipped: %s", what, exc)
        except Exception:
            log.exception("%s failed", what)

    def _tick_loop(self) -> None:
        """Pin expiry and the slot-counter poll every `tick_seconds` while the pool holds anything; the sketch's
        epochs and the pipeline check on their own periods. An empty pool (no slot, no pin) has nothing to expire
        or poll: the loop then sleeps until the next epoch or check, woken at once by an admission."""
        last_check = last_poll = time.monotonic()
        pending = self.pool.pending_first_hit
        while True:
            if self.pool.idle() and not len(pending):
                now = time.monotonic()
                due = min(self._epoch_started + self.options.detector.epoch_seconds,
                          last_check + self.options.check_seconds)
                pending.wait(max(self.options.tick_seconds, due - now))
            else:
                self._stop.wait(self.options.tick_seconds)
            if self._stop.is_set():
                return
            if not self.switch.wait_ready(0):
                continue
            poll = time.monotonic() - last_poll >= self.options.poll_seconds
            if poll:
                last_poll = time.monotonic()
            self._guarded("tick", functools.partial(self.pool.tick, poll=poll))
            if time.monotonic() - self._epoch_started >= self.options.detector.epoch_seconds:
                self._guarded("new epoch", self._new_epoch)
            if time.monotonic() - last_check >= self.options.check_seconds:
                last_check = time.monotonic()
                self._guarded("pipeline check", self._check_pipeline)

    def _check_pipeline(self) -> None:
        """Pipeline replaced or entries deleted behind our back (the stream survived): re-populate."""
        if self.switch.pipeline_cookie() != self.cookie:
            log.warning("switch lost its pipeline: re-installing")
            self._on_connect(self.switch)
            return
        self.pool.resync()

    def move_tier(self, key, tier_name: str) -> dict:
        """Promote/demote a chunk between the storage node's DRAM and disk (TIER_MOVE)."""
        tiers = {"dram": Tier.STORAGE_DRAM, "disk": Tier.STORAGE_DISK}
        if tier_name not in tiers:
            raise ValueError(f"tier must be one of {', '.join(tiers)}, got {tier_name!r}")
        moved = self.pool.mover.ask(key, tiers[tier_name])  # a network round trip: not under the pool lock
        if moved:
            with self.pool.locked():
                self.pool.tiers.add(key, tiers[tier_name])
        if not moved:
            raise ValueError(f"the storage node did not move {key} to {tier_name} (unknown chunk, no disk tier, "
                             f"full, or no --storage)")
        return {"key": str(key), "tiers": sorted(t.name for t in self.pool.tiers.tiers(key))}

    def _steer_loop(self) -> None:
        """Health probes of the pool's storage nodes; a node found down (or back) re-steers its buckets."""
        assert self.steering is not None
        steering = self.steering
        while not self._stop.wait(steering.options.probe_seconds):
            if self.switch.wait_ready(0):
                self._guarded("steering", lambda: steering.check(self.switch))

    def _first_hit_loop(self) -> None:
        """The fast poll of newly admitted slots while any is pending: every `first_hit_poll_seconds` at first,
        backing off as the newest admission ages (`PendingFirstHits.poll_interval`); asleep while none is pending
        (woken at once by an admission, or by `stop`)."""
        pending = self.pool.pending_first_hit
        while not self._stop.is_set():
            if not pending.wait(None):
                continue
            if self._stop.wait(pending.poll_interval(self.pool.clock(), self.options.first_hit_poll_seconds)):
                return
            if self.switch.is_primary:
                self._guarded("first-hit poll", lambda: self.pool.poll_hits(only_pending=True))

    # ---- what the API offers -----------------------------------------------------------------------------

    def status(self) -> dict:
        return {
            "switch": self.options.switch,
            "device_id": self.options.device_id,
            "primary": self.switch.is_primary,
            "connections": self.switch.connections,
            "uptime_s": time.time() - self.started_at,
            "capacity": self.pool.slots.capacity,
            "occupancy": len(self.pool.slots),
            "tracked": len(self.pool.tracked),
            "pins": len(self.pool.pins.all()),
            "epoch": self.epoch,
            "storage": self.options.storage,
            "state": str(self.options.state),
            "policies": self.policy_view(),
            "last_reconcile": self.last_reconcile,
            "steering": None if self.steering is None else self.steering.status(),
            "storage_ports": self.plan.storage_ports(),
            "over_slot_blocks": len(self.pool.over_slot_blocks),
            "warnings": self.metrics.snapshot()["warnings"],
        }

    def read_slot(self, slot: int) -> dict:
        """Read a slot back from the switch (SLOT_READ packet-out → SLOT_READ_REPLY packet-in)."""
        contents = self.dataplane.read_slot(slot)
        owner = self.pool.slots.key_at(slot)
        return {"slot": slot, "key": str(contents.key), "valid": contents.valid, "version": contents.version,
                "value_hex": contents.value.hex(), "value_len": len(contents.value),
                "owner": None if owner is None else str(owner)}

    def policy_view(self) -> dict:
        p = self.pool.policies
        return {"admission": p.admission.name, "eviction": p.eviction.name, "recycling": p.recycling.name,
                "params": p.params}

    def set_policy(self, kind: str, name: str, params: dict[str, str]) -> dict:
        if not kind:
            kind = infer_kind(name)
        spec = self.policy_spec.with_policy(kind, name, params)
        with self.pool.locked():
            self.pool.set_policies(build_policies(spec, self.pool.slots.capacity, self.policy_factory))
            self.policy_spec = spec
        return self.policy_view()
