"""Metrics: the CLI's snapshot and the Prometheus endpoint read the same numbers."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from controller.dataplane import HitCounts
from controller.metrics import Metrics, serve_prometheus


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
