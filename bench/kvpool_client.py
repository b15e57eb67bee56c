"""One client's block read and write rate over loopback UDP against a storage node process.

    python -m bench kvpool_client [--quick]        (or: python -m bench.kvpool_client OUT_DIR)

The node runs as its own process (`python -m kvpool.server`), as in the testbed; the client is
`kvpool.client.KVPClient`, what an inference node uses. A block of v1's largest size (255 chunks of 128 bytes,
32,640 bytes: the client's default chunk size for blocks that small) is written and read back whole, one block
operation at a time, every read verified against the written bytes. The figure that matters is the read rate of
one client (the read window of docs/protocol.md, "Transport"): before windowing a read fetched its chunks one
round at a time.

A second phase measures CPU, not wall time (`cpu_per_chunk`): one reader with the client's defaults reads a
16 MiB block from the node, in 1 KiB chunks (MTU 1500's) and in 8 KiB chunks (MTU 9000's); the figures are
microseconds of CPU per chunk of the reader process and of the node process. On a 2-core testbed the switch,
the node and the reader share the cores, so what these two spend per chunk the switch cannot.

    python -m bench.kvpool_client --cpu [--reads N] [--profile DIR]   (DIR: cProfile output of both)
"""

from __future__ import annotations

import argparse
import cProfile
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
CPU_BLOCK_LEN = 16 << 20
"""Bytes of the block the CPU phase reads (16 MiB: 16,384 chunks of 1 KiB, 2,048 of 8 KiB)."""
CPU_CHUNK_LENS = (1024, 8192)
"""Chunk sizes the CPU phase compares: what a 1,500-byte and a 9,000-byte MTU carry."""


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


def _start_node(port: int, capacity: int, profile: Path | None = None) -> subprocess.Popen[bytes]:
    """`python -m kvpool.server` on loopback (under cProfile, writing `profile` when it stops, if given)."""
    profiled = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    return subprocess.Popen([sys.executable, *profiled, "-m", "kvpool.server", "--host", "127.0.0.1", "--port",
                             str(port), "--capacity", str(capacity)], stderr=subprocess.DEVNULL)


def _stop_node(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (/proc/PID/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_chunk(reads: int = 4, profile: Path | None = None) -> dict[str, dict[str, float]]:
    """CPU microseconds per chunk of one reader (client defaults) and of the node, reading a CPU_BLOCK_LEN block
    per chunk size of CPU_CHUNK_LENS, `reads` times in 1 KiB chunks and as many chunks' worth in larger ones (8 KiB:
    8 x `reads` reads; the node's CPU time is read in clock ticks, 10 ms: a figure over fewer chunks would be
    coarse). Each read is verified. `profile`: a folder for cProfile output of the reader (reader_<chunk>.prof) and
    of the node (node.prof, all sizes); profiling inflates the figures."""
    data = random.Random(7421).randbytes(CPU_BLOCK_LEN)
    port = _free_port()
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
    proc = _start_node(port, 2 * len(CPU_CHUNK_LENS) * CPU_BLOCK_LEN,
                       profile / "node.prof" if profile is not None else None)
    rows: dict[str, dict[str, float]] = {}
    try:
        with KVPClient(ClientOptions(server=("127.0.0.1", port))) as client:
            _wait_ready(client, time.monotonic() + 10)
            for n, chunk_len in enumerate(CPU_CHUNK_LENS):
                client.put_block(0xC0 + n, data, version=1, chunk_size=chunk_len)
                assert client.get_block(0xC0 + n).data == data, "a read returned wrong bytes"  # warm-up
                profiler = cProfile.Profile() if profile is not None else None
                node0, reader0, wall0 = _cpu_seconds(proc.pid), time.process_time(), time.perf_counter()
                if profiler is not None:
                    profiler.enable()
                times = reads * chunk_len // CPU_CHUNK_LENS[0]
                for _ in range(times):
                    block = client.get_block(0xC0 + n)
                    if len(block.data) != len(data):
                        raise AssertionError("a read returned a block of the wrong size")
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(profile / f"reader_{chunk_len}.prof")
                reader, wall = time.process_time() - reader0, time.perf_counter() - wall0
                node = _cpu_seconds(proc.pid) - node0
                assert block.data == data, "a read returned wrong bytes"
                chunks = times * (CPU_BLOCK_LEN // chunk_len)
                rows[str(chunk_len)] = {"reader_us_per_chunk": reader / chunks * 1e6,
                                        "node_us_per_chunk": node / chunks * 1e6,
                                        "wall_us_per_chunk": wall / chunks * 1e6,
                                        "resent": float(client.resent), "busy": float(client.busy)}
    finally:
        _stop_node(proc)
    return rows


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    blocks = 20 if quick else 200
    port = _free_port()
    proc = _start_node(port, 64 << 20)
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
        _stop_node(proc)
    cpu = cpu_per_chunk(reads=1 if quick else 4)
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
        "cpu": cpu,
    }
    (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / f"{NAME}.md").write_text(
        f"| metric (one client, loopback, {len(data):,} B blocks) | value |\n|---|---:|\n"
        f"| block read MB/s | {result['read_mb_per_s']:.2f} |\n"
        f"| block read p50 / p99 (ms) | {result['read_ms']['p50']:.1f} / {result['read_ms']['p99']:.1f} |\n"
        f"| block write MB/s | {result['write_mb_per_s']:.2f} |\n"
        f"| block write p50 / p99 (ms) | {result['write_ms']['p50']:.1f} / {result['write_ms']['p99']:.1f} |\n"
        + "".join(f"| CPU per chunk, 16 MiB block in {size} B chunks: reader / node (µs) | "
                  f"{row['reader_us_per_chunk']:.1f} / {row['node_us_per_chunk']:.1f} |\n" for size, row in cpu.items()))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kvpool_client", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path("out/bench"))
    parser.add_argument("--cpu", action="store_true", help="only the CPU phase (µs of CPU per chunk)")
    parser.add_argument("--reads", type=int, default=4,
                        help="CPU phase: reads of the 16 MiB block in 1 KiB chunks (8 KiB: 8 x as many)")
    parser.add_argument("--profile", type=Path, default=None, help="CPU phase: folder for cProfile output")
    args = parser.parse_args(argv)
    if args.cpu:
        print(json.dumps(cpu_per_chunk(args.reads, args.profile), indent=2))
    else:
        print(json.dumps(run(args.out, quick=True), indent=2))


if __name__ == "__main__":
    main()
