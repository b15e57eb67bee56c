"""One inference host's share of a trace replay, run inside its Mininet namespace by `topo.demo`.

    python -m topo.host_replay --server 10.0.0.100 --work WORK.json --out RESULTS.jsonl

Each request looks up its prompt's blocks in prefix order, as a prefix cache does: GET block 0, 1, ... until
the first miss; the blocks from there on are "computed" and stored (PUT, version 1; a concurrent writer's
ERR_STALE means someone else stored it first) and, when the work says so, announced with INSERT so the
controller can admit them. Block contents are derived from the prefix hash, so every read is checked against
what was written. One JSON line per request goes to --out as soon as it is done (the demo's progress bar
counts them).

WORK.json: {"start_at": UNIX_TIME, "block_bytes": 256, "announce": false, "tenant": 0,
            "requests": [{"i": 0, "t": 0.0, "blocks": [PREFIX_HASH, ...], "tokens": [512, ...]}, ...]}
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kvpool.blocks import chunk_count
from kvpool.client import BlockNotFound, ClientOptions, KVPClient, KVPError, parse_address
from kvpool.constants import Status


def block_data(prefix_hash: int, size: int) -> bytes:
    """The demo's content of a block: its prefix hash repeated (so a wrong block is detected on read)."""
    return (prefix_hash.to_bytes(8, "big") * (size // 8 + 1))[:size]


def replay_request(client: KVPClient, request: dict, block_bytes: int, announce: bool) -> dict:
    """Look up, then store, one request's blocks; returns its result record."""
    chunks = chunk_count(block_bytes)
    gets = []
    hit_depth = 0
    for depth, ph in enumerate(request["blocks"]):
        t0 = time.perf_counter()
        try:
            block = client.get_block(ph, chunks=chunks)
        except BlockNotFound:
            gets.append({"depth": depth, "ph": ph, "outcome": "MISS", "us": (time.perf_counter() - t0) * 1e6})
            break
        except KVPError as exc:
            gets.append({"depth": depth, "ph": ph, "outcome": "ERROR", "error": str(exc),
                         "us": (time.perf_counter() - t0) * 1e6})
            break
        statuses = {c.status for c in block.chunks}
        outcome = "HIT_SWITCH" if statuses == {Status.HIT_SWITCH} else (
            "HIT_SERVER" if statuses == {Status.HIT_SERVER} else "MIXED")
        gets.append({"depth": depth, "ph": ph, "outcome": outcome, "us": (time.perf_counter() - t0) * 1e6,
                     "correct": block.data == block_data(ph, block_bytes),
                     "chunks": [[c.status.name, c.latency * 1e6] for c in block.chunks]})
        hit_depth = depth + 1
    puts = inserts = errors = 0
    for depth in range(hit_depth, len(request["blocks"])):
        ph = request["blocks"][depth]
        try:
            client.put_block(ph, block_data(ph, block_bytes), version=1)
            puts += 1
        except KVPError as exc:
            if exc.status != Status.ERR_STALE:
                errors += 1
        if announce:
            try:
                for idx in range(chunks):
                    client.insert(ph, idx, chunks, depth=depth, tokens=request["tokens"][depth])
                inserts += 1
            except KVPError:
                errors += 1
    return {"i": request["i"], "gets": gets, "puts": puts, "inserts": inserts, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topo.host_replay", description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="storage node HOST[:PORT]")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--host", default="", help="name recorded with each result")
    args = parser.parse_args(argv)
    work = json.loads(args.work.read_text())
    options = ClientOptions(server=parse_address(args.server), tenant=work.get("tenant", 0), timeout=1.0, retries=3)
    with KVPClient(options) as client, args.out.open("w") as out:
        for request in work["requests"]:
            delay = work["start_at"] + request["t"] - time.time()
            if delay > 0:
                time.sleep(delay)
            record = replay_request(client, request, work["block_bytes"], work.get("announce", False))
            record["host"] = args.host
            out.write(json.dumps(record) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
