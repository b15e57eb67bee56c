"""A client of the pool address that writes and reads blocks and logs every outcome, for the steering test.

    python -m tests.topo.pool_workload --server 10.0.0.200 --log out.jsonl --stop STOPFILE [--blocks 12]

Runs (inside a Mininet host) until STOPFILE exists: round robin over the blocks, PUT a new version of one, then
GET another. Block bytes are a function of (prefix hash, version) (`block_bytes`), so a checker knows the right
bytes of every version without the log carrying them. Each line of the log is one operation:

    {"op": "put", "ph": .., "version": .., "t0": .., "t1": .., "ok": true|false, "error": ".."}
    {"op": "get", "ph": .., "t0": .., "t1": .., "result": "hit"|"miss"|"error", "version": .., "bytes_ok": ..}

`check` (used by the test) replays a log against a model of acknowledged writes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BASE_PREFIX = 0x9001_0000_0000_0000
BLOCK_LEN = 300
"""Three chunks per block: every read crosses chunks (a torn block would show)."""


def block_bytes(prefix_hash: int, version: int) -> bytes:
    """The bytes version `version` of block `prefix_hash` is written with."""
    head = f"{prefix_hash:016x}:v{version}:".encode()
    return (head * (BLOCK_LEN // len(head) + 1))[:BLOCK_LEN]


def run(server: str, log: Path, stop: Path, blocks: int, timeout: float) -> int:
    from kvpool.client import ClientOptions, KVPClient
    from kvpool.errors import BlockNotFound, KVPError

    hashes = [BASE_PREFIX + i for i in range(blocks)]
    versions = dict.fromkeys(hashes, 0)
    with KVPClient(ClientOptions(server=(server, 7420), timeout=timeout, retries=2)) as client, \
            log.open("a") as out:
        i = 0
        while not stop.exists():
            ph = hashes[i % blocks]
            versions[ph] += 1
            t0 = time.monotonic()
            try:
                client.put_block(ph, block_bytes(ph, versions[ph]), versions[ph])
                line = {"op": "put", "ph": ph, "version": versions[ph], "ok": True}
            except KVPError as exc:
                line = {"op": "put", "ph": ph, "version": versions[ph], "ok": False, "error": str(exc)[:120]}
            line |= {"t0": t0, "t1": time.monotonic()}
            out.write(json.dumps(line) + "\n")
            ph = hashes[(i * 7 + 3) % blocks]
            t0 = time.monotonic()
            try:
                read = client.get_block(ph)
                line = {"op": "get", "ph": ph, "result": "hit", "version": read.version,
                        "bytes_ok": read.data == block_bytes(ph, read.version),
                        "switch": read.switch_hits}
            except BlockNotFound:
                line = {"op": "get", "ph": ph, "result": "miss"}
            except KVPError as exc:
                line = {"op": "get", "ph": ph, "result": "error", "error": str(exc)[:120]}
            line |= {"t0": t0, "t1": time.monotonic()}
            out.write(json.dumps(line) + "\n")
            out.flush()
            i += 1
    return 0


@dataclass
class Verdict:
    puts_ok: int = 0
    puts_failed: int = 0
    hits: int = 0
    misses: int = 0
    errors: int = 0
    wrong: list[str] | None = None


def check(lines: list[dict]) -> Verdict:
    """Every hit carries the right bytes of its version, and no version older than the newest write
    acknowledged before the read began (MISS and errors are allowed: never a wrong value)."""
    verdict = Verdict(wrong=[])
    acked: list[tuple[float, int, int]] = [(x["t1"], x["ph"], x["version"]) for x in lines
                                           if x["op"] == "put" and x["ok"]]
    for x in lines:
        if x["op"] == "put":
            if x["ok"]:
                verdict.puts_ok += 1
            else:
                verdict.puts_failed += 1
            continue
        if x["result"] == "miss":
            verdict.misses += 1
        elif x["result"] == "error":
            verdict.errors += 1
        else:
            verdict.hits += 1
            newest = max((v for t1, ph, v in acked if ph == x["ph"] and t1 < x["t0"]), default=0)
            if not x["bytes_ok"]:
                verdict.wrong.append(f"wrong bytes: {x}")
            elif x["version"] < newest:
                verdict.wrong.append(f"stale: read v{x['version']} after v{newest} was acknowledged: {x}")
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.topo.pool_workload")
    parser.add_argument("--server", required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--stop", type=Path, required=True)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=0.5)
    args = parser.parse_args(argv)
    return run(args.server, args.log, args.stop, args.blocks, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
