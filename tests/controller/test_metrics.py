"""Metrics: the CLI's snapshot and the Prometheus endpoint read the same numbers."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from controller.dataplane import HitCounts
from controller.metrics import HIT_TOTALS_MAX_AGE_S, Metrics, serve_prometheus


def test_snapshot_counts_and_ratios():
    metrics = Metrics(window=10)
    metrics.count("admissions", "hot digest", 3)
    metrics.count("evictions", "capacity")
    metrics.count("recycled", "STORAGE_DRAM")
    metrics.count("recycled", "ABSENT", 2)
    for t in (100.0, 105.0, 120.0):
        metrics.digest(t)
    metrics.latency("hot_to_first_hit", 0.010)
    metrics.latency("hot_to_first_hit", 0.030)
    metrics.hits = HitCounts(switch=30, server=10)
    snap = metrics.snapshot(now=121.0)
    assert snap["admissions_total"] == 3 and snap["evictions"] == {"capacity": 1}
    assert (snap["demotions"], snap["drops"]) == (1, 2)
    assert snap["digest_rate"] == pytest.approx(0.1)  # one digest in the last 10 s
    assert snap["hit_ratio"] == {"switch": 0.75, "server": 0.25}
    assert snap["hot_to_first_hit"]["p50_ms"] == pytest.approx(20) and snap["hot_to_first_hit"]["max_ms"] == pytest.approx(30)


def test_hit_ratio_is_unknown_before_any_get():
    assert Metrics().hit_ratio() == {"switch": None, "server": None}


def test_prometheus_endpoint_exposes_the_same_numbers():
    metrics = Metrics()
    metrics.count("admissions", "pin", 2)
    metrics.occupancy, metrics.capacity = 5, 1024
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve_prometheus(metrics, port)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'kvswitch_admissions_total{reason="pin"} 2.0' in text
    assert "kvswitch_pool_occupancy_slots 5.0" in text
    assert "python_gc" not in text  # our own registry, not the process-global default one


def test_get_totals_are_read_when_asked_at_most_once_per_max_age_and_a_failed_read_keeps_the_last():
    reads: list[HitCounts | Exception] = [HitCounts(switch=3, server=1), RuntimeError("switch away"),
                                          HitCounts(switch=9, server=3)]
    asked = []

    def source() -> HitCounts:
        asked.append(1)
        got = reads.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    metrics = Metrics()
    assert metrics.hits == HitCounts() and not asked, "nothing read before anyone asks"
    metrics.hit_source = source
    metrics.refresh_hits(now=100.0)
    assert metrics.hits == HitCounts(switch=3, server=1)
    metrics.refresh_hits(now=100.0 + HIT_TOTALS_MAX_AGE_S / 2)
    assert len(asked) == 1, "read within the max age: not read again"
    metrics.refresh_hits(now=100.0 + HIT_TOTALS_MAX_AGE_S)
    assert len(asked) == 2 and metrics.hits == HitCounts(switch=3, server=1), "the failed read kept the last"
    metrics.refresh_hits(now=100.0 + 2 * HIT_TOTALS_MAX_AGE_S)
    assert metrics.snapshot(now=100.0 + 2 * HIT_TOTALS_MAX_AGE_S)["hit_ratio"] == {"switch": 0.75, "server": 0.25}
    assert len(asked) == 3, "the snapshot found them fresh"
