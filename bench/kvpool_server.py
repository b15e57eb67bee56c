"""Storage-node baseline: GET-hit requests/s and latency percentiles over loopback UDP.

The node runs as its own process (`python -m kvpool.server`), as in the testbed; the load generator packs
requests with `kvpool.wire` (not Scapy) so it measures the node, not the client. Two phases:

* latency: one request outstanding at a time (closed loop), per-request round-trip time;
* throughput: a window of requests outstanding, requests answered per second;
* spans: blocks of 1 KiB chunks read with single GETs (span 1) and with span GETs (span 8, `aux` = 8: one GET
  brings eight replies), a window of chunks outstanding, chunks answered per second: what one chunk costs the
  node when each is asked for alone and when eight share a request.

This is the baseline the switch-hit benchmark compares against (same chunk size, same loopback).

Storage backends (docs/storage-backends.md): `memory` (default), `mooncake` (a local mooncake_master is started
for the run; GETs are served from the node's per-block cache after the first), `mooncake-nocache` (the same
with `--mooncake-cache 0`: every GET is a Mooncake `get` over TCP).

    python -m bench.kvpool_server OUT_DIR [memory|mooncake|mooncake-nocache]
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from kvpool.constants import Opcode, Status
from kvpool.wire import Header, encode

NAME = "kvpool_server"
KEYS = 256
"""Distinct preloaded chunks the GETs cycle through (one chunk each, 128 bytes)."""
WINDOW = 32
"""Requests outstanding in the throughput phase (chunks outstanding in the span phase)."""
SPAN_BLOCKS, SPAN_CHUNKS, SPAN_CHUNK_SHIFT = 64, 8, 10
"""The span phase's blocks: 64 blocks of 8 chunks of 1 KiB (spans are for chunks larger than a slot)."""
SPANS = (1, 8)
"""Spans the span phase compares."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(sock: socket.socket, server: tuple[str, int], deadline: float) -> None:
    probe = Header(Opcode.STAT, req_id=0xFFFFFFFF).pack()
    while time.monotonic() < deadline:
        sock.sendto(probe, server)
        try:
            sock.recv(2048)
            return
        except TimeoutError:
            continue
    raise RuntimeError("storage node did not answer within 10 s")


def _exchange_one(sock: socket.socket, server: tuple[str, int], request: bytes, req_id: int) -> bytes:
    sock.sendto(request, server)
    while True:
        reply = sock.recv(2048)
        if Header.unpack(reply).req_id == req_id:
            return reply


def _put_block(sock: socket.socket, server: tuple[str, int], prefix_hash: int) -> None:
    """Commit one span-phase block: each chunk's STAGED ack, then the OK of every chunk with the last one."""
    for i in range(SPAN_CHUNKS):
        sock.sendto(encode(Header(Opcode.PUT, req_id=i, prefix_hash=prefix_hash, chunk_idx=i, chunk_count=SPAN_CHUNKS,
                                  version=1, chunk_shift=SPAN_CHUNK_SHIFT), bytes([i]) * (1 << SPAN_CHUNK_SHIFT)), server)
        for _ in range(1 if i < SPAN_CHUNKS - 1 else SPAN_CHUNKS):
            sock.recv(2048)


def _throughput(sock: socket.socket, server: tuple[str, int], requests: list[bytes], replies_each: int,
                window: int) -> tuple[int, int, float]:
    """Send `requests` keeping at most `window` replies outstanding; (replies answered, replies lost, seconds)."""
    total = len(requests) * replies_each
    sent = answered = lost = 0
    t0 = time.perf_counter()
    while answered + lost < total:
        while sent < len(requests) and (sent + 1) * replies_each - answered - lost <= window:
            sock.sendto(requests[sent], server)
            sent += 1
        try:
            sock.recv(2048)
        except TimeoutError:  # what is still outstanding after 2 s is lost: count it, refill the window
            lost += sent * replies_each - answered - lost
            continue
        answered += 1
    return answered, lost, time.perf_counter() - t0 - (2.0 if lost else 0.0)


def _span_phase(sock: socket.socket, server: tuple[str, int], n_chunks: int) -> dict[str, dict[str, float]]:
    """Chunks/s of 1 KiB chunks read with each span of SPANS, the same chunks in the same order."""
    for b in range(SPAN_BLOCKS):
        _put_block(sock, server, 0x5000 + b)
    rows = {}
    for span in SPANS:
        requests = [Header(Opcode.GET, req_id=g * span, prefix_hash=0x5000 + (g * span // SPAN_CHUNKS) % SPAN_BLOCKS,
                           chunk_idx=g * span % SPAN_CHUNKS, chunk_count=SPAN_CHUNKS, chunk_shift=SPAN_CHUNK_SHIFT,
                           aux=span).pack() for g in range(n_chunks // span)]
        answered, lost, elapsed = _throughput(sock, server, requests, span, WINDOW)
        rows[str(span)] = {"chunks_per_s": answered / elapsed, "us_per_chunk": elapsed / answered * 1e6,
                           "lost": lost}
    return rows


BACKENDS = ("memory", "mooncake", "mooncake-nocache")


def run(out_dir: Path, quick: bool = False, backend: str = "memory") -> dict:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}")
    with contextlib.ExitStack() as stack:
        backend_args: list[str] = []
        if backend.startswith("mooncake"):
            from kvpool.mooncake_master import MooncakeMaster

            master = stack.enter_context(MooncakeMaster.start())
            backend_args = ["--backend", "mooncake", "--mooncake-master", master.master,
                            "--mooncake-metadata", master.metadata]
            if backend == "mooncake-nocache":
                backend_args += ["--mooncake-cache", "0"]
        return _run(out_dir, quick, backend, backend_args)
    raise AssertionError("unreachable")


def _run(out_dir: Path, quick: bool, backend: str, backend_args: list[str]) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    n_latency, n_throughput = (2_000, 5_000) if quick else (20_000, 50_000)
    port = _free_port()
    server = ("127.0.0.1", port)
    proc = subprocess.Popen([sys.executable, "-m", "kvpool.server", "--host", "127.0.0.1", "--port", str(port),
                             "--capacity", str(16 << 20), *backend_args], stderr=subprocess.DEVNULL)
    name = NAME if backend == "memory" else f"{NAME}_{backend.replace('-', '_')}"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            sock.settimeout(0.2)
            _wait_ready(sock, server, time.monotonic() + 10)
            sock.settimeout(2.0)
            for k in range(KEYS):  # preload
                _exchange_one(sock, server, encode(Header(Opcode.PUT, req_id=k, prefix_hash=k, version=1),
                                                   k.to_bytes(8, "big") * 16), k)
            requests = [Header(Opcode.GET, req_id=i, prefix_hash=i % KEYS).pack() for i in range(n_latency)]
            rtt = np.empty(n_latency)
            for i, request in enumerate(requests):
                t0 = time.perf_counter()
                reply = _exchange_one(sock, server, request, i)
                rtt[i] = time.perf_counter() - t0
                assert Header.unpack(reply).status == Status.HIT_SERVER, "preloaded key missed"
            requests = [Header(Opcode.GET, req_id=i, prefix_hash=i % KEYS).pack() for i in range(n_throughput)]
            answered, lost, elapsed = _throughput(sock, server, requests, 1, WINDOW)
            spans = _span_phase(sock, server, n_throughput)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    us = rtt * 1e6
    result: dict[str, Any] = {
        "name": name,
        "backend": backend,
        "quick": quick,
        "chunk_bytes": 128,
        "keys": KEYS,
        "latency_requests": n_latency,
        "latency_us": {"p50": float(np.percentile(us, 50)), "p90": float(np.percentile(us, 90)),
                       "p99": float(np.percentile(us, 99)), "mean": float(us.mean())},
        "throughput_requests": n_throughput,
        "window": WINDOW,
        "requests_per_s": answered / elapsed,
        "lost": lost,
        "span_chunk_bytes": 1 << SPAN_CHUNK_SHIFT,
        "spans": spans,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    lat = result["latency_us"]
    (out_dir / f"{name}.md").write_text(
        f"| metric ({backend} backend) | value |\n|---|---:|\n"
        f"| GET-hit requests/s (window {WINDOW}) | {result['requests_per_s']:,.0f} |\n"
        f"| latency p50 (µs, 1 outstanding) | {lat['p50']:.1f} |\n"
        f"| latency p90 (µs) | {lat['p90']:.1f} |\n"
        f"| latency p99 (µs) | {lat['p99']:.1f} |\n"
        f"| latency mean (µs) | {lat['mean']:.1f} |\n"
        f"| requests lost (throughput phase) | {lost} |\n"
        + "".join(f"| GET-hit chunks/s, {1 << SPAN_CHUNK_SHIFT} B chunks, span {span} (window {WINDOW} chunks) | "
                  f"{row['chunks_per_s']:,.0f} ({row['us_per_chunk']:.1f} µs per chunk, {row['lost']:.0f} lost) |\n"
                  for span, row in spans.items()))
    return result


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/bench"), quick=True,
                         backend=sys.argv[2] if len(sys.argv) > 2 else "memory"), indent=2))
