"""One client's block read and write rate over loopback UDP against a storage node process.

    python -m bench kvpool_client [--quick]        (or: python -m bench.kvpool_client OUT_DIR)

The node runs as its own process (`python -m kvpool.server`), as in the testbed; the client is
`kvpool.client.KVPClient`, what an inference node uses. A block of v1's largest size (255 chunks of 128 bytes,
32,640 bytes: the client's default chunk size for blocks that small) is written and read back whole, one block
operation at a time, every read verified against the written bytes. The figure that matters is the read rate of
one client (the read window of docs/protocol.md, "Transport"): before windowing a read fetched its chunks one
round at a time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kvpool.blocks import SMALL_BLOCK_LEN
from kvpool.client import ClientOptions, KVPClient, KVPError

NAME = "kvpool_client"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(client: KVPClient, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            client.stat(1)
            return
        except (OSError, KVPError):  # the node is still starting
            time.sleep(0.05)
    raise RuntimeError("storage node did not answer within 10 s")


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = 20 if quick else 200
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kvpool.server", "--host", "127.0.0.1", "--port", str(port),
                             "--capacity", str(64 << 20)], stderr=subprocess.DEVNULL)
    data = random.Random(7420).randbytes(SMALL_BLOCK_LEN)
    try:
        with KVPClient(ClientOptions(server=("127.0.0.1", port), timeout=0.5, retries=5)) as client:
            _wait_ready(client, time.monotonic() + 10)
            write = np.empty(blocks)
            for i in range(blocks):
                t0 = time.perf_counter()
                client.put_block(i + 1, data, version=1)
                write[i] = time.perf_counter() - t0
            read = np.empty(blocks)
            for i in range(blocks):
                t0 = time.perf_counter()
                block = client.get_block(i + 1)
                read[i] = time.perf_counter() - t0
                assert block.data == data, "a read returned wrong bytes"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    mb = len(data) / 1e6
    result = {
        "name": NAME,
        "quick": quick,
        "block_bytes": len(data),
        "blocks": blocks,
        "read_ms": {"p50": float(np.percentile(read, 50) * 1e3), "p99": float(np.percentile(read, 99) * 1e3)},
        "write_ms": {"p50": float(np.percentile(write, 50) * 1e3), "p99": float(np.percentile(write, 99) * 1e3)},
        "read_mb_per_s": mb * blocks / float(read.sum()),
        "write_mb_per_s": mb * blocks / float(write.sum()),
    }
    (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / f"{NAME}.md").write_text(
        f"| metric (one client, loopback, {len(data):,} B blocks) | value |\n|---|---:|\n"
        f"| block read MB/s | {result['read_mb_per_s']:.2f} |\n"
        f"| block read p50 / p99 (ms) | {result['read_ms']['p50']:.1f} / {result['read_ms']['p99']:.1f} |\n"
        f"| block write MB/s | {result['write_mb_per_s']:.2f} |\n"
        f"| block write p50 / p99 (ms) | {result['write_ms']['p50']:.1f} / {result['write_ms']['p99']:.1f} |\n")
    return result


if __name__ == "__main__":
    print(json.dumps(run(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/bench"), quick=True), indent=2))
