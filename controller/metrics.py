"""Controller metrics: kept as plain numbers (for the CLI's `stats`) and exported to Prometheus by a collector.

Counting happens in one place (`Metrics`); `MetricsCollector` only reads it at scrape time, so the CLI and
Prometheus can never disagree. The registry is per controller (never prometheus_client's global one).
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from controller.dataplane import HitCounts

log = logging.getLogger(__name__)

HIT_TOTALS_MAX_AGE_S = 1.0
"""A reader of the metrics (the API's /stats, a Prometheus scrape) gets the switch's GET totals read at most this
long ago; they are read when asked, not polled: an idle controller makes no RPC for them."""


@dataclass(frozen=True, slots=True)
class LatencySummary:
    count: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


def _summary(samples: list[float]) -> LatencySummary:
    if not samples:
        return LatencySummary(0, None, None, None)
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return LatencySummary(len(ordered), statistics.median(ordered) * 1e3, p99 * 1e3, ordered[-1] * 1e3)


class Metrics:
    """Everything the controller counts; thread-safe."""

    def __init__(self, window: float = 10.0) -> None:
        self._lock = threading.Lock()
        self.window = window
        """Seconds over which rates (digests/s) are computed."""
        self.admissions: Counter[str] = Counter()
        """Admissions by reason."""
        self.evictions: Counter[str] = Counter()
        """Evictions by reason."""
        self.recycled: Counter[str] = Counter()
        """Evicted chunks by outcome tier name (STORAGE_DRAM = demoted, ABSENT = dropped)."""
        self.refusals: Counter[str] = Counter()
        """Candidates not admitted, by reason."""
        self.client_requests: Counter[str] = Counter()
        """INSERT / LOOKUP_META punted to us, by opcode name."""
        self.denied: Counter[str] = Counter()
        """Requests the tenant policy refused (ERR_DENIED, or an admission over quota), by reason: insert, pin,
        quota."""
        self.ignored: Counter[str] = Counter()
        """Signals the controller counted and did not act on, by reason (e.g. a digest of a chunk larger than a
        slot: the pool can never serve it, so admitting it would only churn)."""
        self.over_slot: Counter[str] = Counter()
        """Over-slot digests (the switch saw an admitted chunk larger than a slot), by what came of them: undone
        (entry deleted, slot freed), not resident, earlier admission, pinned."""
        self.over_slot_blocks = 0
        """Blocks remembered as having chunks larger than a slot (controller.overslot): never admitted."""
        self.storage_jobs: Counter[str] = Counter()
        """Storage-node calls (recycling, fills) handed to the storage worker, by outcome: queued, done, failed,
        dropped (the bounded queue was full)."""
        self.storage_ports: int | None = None
        """Switch ports with the storage role (None until the port roles are installed); 0 means no port may
        fill the pool: the topology is misconfigured."""
        self.digests = 0
        self._digest_times: deque[float] = deque(maxlen=100_000)
        self.hot_to_installed: deque[float] = deque(maxlen=10_000)
        """Seconds from a key's first digest to its index entry being written."""
        self.hot_to_first_hit: deque[float] = deque(maxlen=10_000)
        """Seconds from a key's first digest to the first switch hit the counters showed."""
        self.admission_traces: deque[dict[str, object]] = deque(maxlen=1_000)
        """Per hot-digest admission, the time.monotonic() of each stage in the controller (see `trace`):
        received (the digest list off the stream), locked (pool lock held), write_sent / write_done (the Write
        RPC that indexes the key), done (durable state and bookkeeping). CLOCK_MONOTONIC is system-wide, so a
        benchmark on the same host can line these up with its own stamps."""
        self.occupancy = 0
        self.capacity = 0
        self.hits = HitCounts()
        self.hit_source: Callable[[], HitCounts] | None = None
        """Reads the switch's GET totals (an RPC); None: `hits` is only what was set."""
        self._hits_read_at: float | None = None
        self.switch_connections = 0

    def warnings_locked(self) -> list[str]:
        """What an operator must fix, as sentences (call holding `_lock`)."""
        if self.storage_ports == 0:
            return ["no switch port has the storage role: no storage reply may fill the pool (give the storage "
                    "host \"role\": \"storage\" in the hosts file)"]
        return []

    def count(self, family: str, label: str, n: int = 1) -> None:
        with self._lock:
            getattr(self, family)[label] += n

    def trace(self, record: dict[str, object]) -> None:
        with self._lock:
            self.admission_traces.append(record)

    def traces(self) -> list[dict[str, object]]:
        with self._lock:
            return list(self.admission_traces)

    def digest(self, now: float) -> None:
        with self._lock:
            self.digests += 1
            self._digest_times.append(now)

    def latency(self, family: str, seconds: float) -> None:
        with self._lock:
            getattr(self, family).append(seconds)

    def digest_rate(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        with self._lock:
            recent = sum(1 for t in self._digest_times if now - t <= self.window)
        return recent / self.window

    def refresh_hits(self, now: float | None = None) -> None:
        """Read the switch's GET totals through `hit_source` unless they were read within
        `HIT_TOTALS_MAX_AGE_S` (no lock held during the read; a failed read keeps the last totals)."""
        source = self.hit_source
        now = time.time() if now is None else now
        if source is None or (self._hits_read_at is not None and now - self._hits_read_at < HIT_TOTALS_MAX_AGE_S):
            return
        self._hits_read_at = now
        try:
            hits = source()
        except Exception as exc:  # a switch away: the last totals stand
            log.debug("GET totals not read: %s", exc)
            return
        with self._lock:
            self.hits = hits

    def hit_ratio(self) -> dict[str, float | None]:
        hits = self.hits
        total = hits.switch + hits.server
        if total == 0:
            return {"switch": None, "server": None}
        return {"switch": hits.switch / total, "server": hits.server / total}

    def snapshot(self, now: float | None = None) -> dict:
        """Everything as plain JSON-ready values, for the API and the CLI (the GET totals read if stale)."""
        self.refresh_hits(now)
        with self._lock:
            data = {
                "occupancy": self.occupancy,
                "capacity": self.capacity,
                "admissions": dict(self.admissions),
                "admissions_total": sum(self.admissions.values()),
                "evictions": dict(self.evictions),
                "evictions_total": sum(self.evictions.values()),
                "demotions": sum(v for k, v in self.recycled.items() if k != "ABSENT"),
                "drops": self.recycled.get("ABSENT", 0),
                "refusals": dict(self.refusals),
                "client_requests": dict(self.client_requests),
                "denied": dict(self.denied),
                "ignored": dict(self.ignored),
                "over_slot": dict(self.over_slot),
                "over_slot_blocks": self.over_slot_blocks,
                "storage_jobs": dict(self.storage_jobs),
                "storage_ports": self.storage_ports,
                "warnings": self.warnings_locked(),
                "digests": self.digests,
                "gets": {"switch": self.hits.switch, "server": self.hits.server, "fills": self.hits.fills},
                "switch_connections": self.switch_connections,
                "hot_to_installed": vars_of(_summary(list(self.hot_to_installed))),
                "hot_to_first_hit": vars_of(_summary(list(self.hot_to_first_hit))),
            }
        data["digest_rate"] = self.digest_rate(now)
        data["hit_ratio"] = self.hit_ratio()
        return data


def vars_of(summary: LatencySummary) -> dict:
    return {"count": summary.count, "p50_ms": summary.p50_ms, "p99_ms": summary.p99_ms, "max_ms": summary.max_ms}


class MetricsCollector:
    """A prometheus_client collector reading a `Metrics` at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self):
        snap = self.metrics.snapshot()
        yield GaugeMetricFamily("kvswitch_pool_occupancy_slots", "Occupied switch-pool slots", value=snap["occupancy"])
        yield GaugeMetricFamily("kvswitch_pool_capacity_slots", "Switch-pool slots", value=snap["capacity"])
        for name, help_text, values, label in (
            ("kvswitch_admissions", "Chunks admitted to the switch pool", snap["admissions"], "reason"),
            ("kvswitch_evictions", "Chunks evicted from the switch pool", snap["evictions"], "reason"),
            ("kvswitch_refusals", "Candidates not admitted", snap["refusals"], "reason"),
            ("kvswitch_client_requests", "INSERT/LOOKUP_META requests answered", snap["client_requests"], "op"),
            ("kvswitch_denied", "Requests the tenant policy refused", snap["denied"], "reason"),
            ("kvswitch_ignored", "Signals counted and not acted on", snap["ignored"], "reason"),
            ("kvswitch_over_slot", "Over-slot digests by outcome", snap["over_slot"], "outcome"),
            ("kvswitch_storage_jobs", "Storage-node calls by outcome", snap["storage_jobs"], "outcome"),
        ):
            family = CounterMetricFamily(name, help_text, labels=[label])
            for key, value in values.items():
                family.add_metric([key], value)
            yield family
        yield GaugeMetricFamily("kvswitch_over_slot_blocks", "Blocks remembered as larger than a slot",
                                value=snap["over_slot_blocks"])
        yield CounterMetricFamily("kvswitch_demotions", "Evicted chunks demoted to storage DRAM", value=snap["demotions"])
        yield CounterMetricFamily("kvswitch_dropped", "Evicted chunks dropped", value=snap["drops"])
        yield CounterMetricFamily("kvswitch_digests", "Hot-key digests received", value=snap["digests"])
        yield GaugeMetricFamily("kvswitch_digest_rate", "Hot-key digests per second", value=snap["digest_rate"])
        gets = CounterMetricFamily("kvswitch_gets", "GETs by who answered (switch counters)", labels=["outcome"])
        for outcome, value in snap["gets"].items():
            gets.add_metric([outcome], value)
        yield gets
        for family_name, samples in (("kvswitch_hot_to_first_hit_seconds", self.metrics.hot_to_first_hit),
                                     ("kvswitch_hot_to_installed_seconds", self.metrics.hot_to_installed)):
            values = list(samples)
            yield SummaryMetricFamily(family_name, "Latency from a key's first hot digest",
                                      count_value=len(values), sum_value=sum(values))


def serve_prometheus(metrics: Metrics, port: int, addr: str = "127.0.0.1"):
    """Expose `metrics` at http://addr:port/metrics with a registry of its own; returns the server (shutdown())."""
    registry = CollectorRegistry()
    registry.register(MetricsCollector(metrics))
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server
