"""The client side of the veth testbed: a long-lived KVP client run inside the client's network namespace.

    ip netns exec NS python -m kvtesting.kvagent --server 10.0.0.2 [--tenant T] [--timeout S]

It reads one JSON request per line on stdin and writes one JSON answer per line on stdout, so the test and the
benchmark (in the root namespace) drive real `kvpool.client.KVPClient` sockets in the client namespace without
paying Scapy's import time per request. Every answer is `{"ok": true, ...}` or `{"ok": false, "error": MSG}`;
a bad request never ends the agent. Requests (`ph` = prefix hash, `chunks` = chunk count of the block):

| op | fields | answer |
|---|---|---|
| `ping` | — | `{}` once the storage node answers a STAT (retried until `wait` seconds passed) |
| `put` | `ph`, `data` (hex), `version` | `{}` |
| `get` | `ph`, `chunks`, `bypass` | `data` (hex), `version`, `statuses` (names, per chunk), `latencies` (s), `attempts` |
| `stat` | `ph`, `chunks` | `counts`: GETs the storage node served, per chunk |
| `get_loop` | `ph`, `chunks`, `count`, `bypass` | `elapsed` (s), `latencies` (s, one per chunk GET), `statuses` (name → n), `retries` |
| `wire_loop` | `ph`, `count`, `bypass` | like `get_loop` for chunk 0, packed with `kvpool.wire` (no Scapy), plus `lost` |
| `readers` | `ph`, `chunks`, `readers`, `reads`, `bypass` | `elapsed`, `statuses`, `retries`, `block_reads`, `errors` |

`readers` starts that many threads, each with its own socket, released together by a barrier: the N-to-1
read of one hot block (incast) that the switch pool is meant to absorb.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from kvpool.client import ClientOptions, KVPClient, KVPError, parse_address
from kvpool.constants import Flag, Opcode, Status
from kvpool.wire import Header


def _status_name(status: Status | int) -> str:
    return status.name if isinstance(status, Status) else str(status)


class Agent:
    """The request handlers; one default client for sequential ops, fresh clients for concurrent readers."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self.client = KVPClient(options)
        self.bypass_client = KVPClient(replace(options, bypass=True))

    def close(self) -> None:
        self.client.close()
        self.bypass_client.close()

    def _client(self, request: dict) -> KVPClient:
        return self.bypass_client if request.get("bypass") else self.client

    def ping(self, request: dict) -> dict:
        deadline = time.monotonic() + float(request.get("wait", 30.0))
        quick = KVPClient(replace(self.options, timeout=0.3, retries=0))
        try:
            while True:
                try:
                    quick.stat(0)
                    return {}
                except KVPError:
                    if time.monotonic() > deadline:
                        raise
        finally:
            quick.close()

    def put(self, request: dict) -> dict:
        self.client.put_block(int(request["ph"]), bytes.fromhex(request["data"]), int(request["version"]))
        return {}

    def get(self, request: dict) -> dict:
        block = self._client(request).get_block(int(request["ph"]), request.get("chunks"))
        return {"data": block.data.hex(), "version": block.version,
                "statuses": [_status_name(c.status) for c in block.chunks],
                "latencies": [c.latency for c in block.chunks], "attempts": [c.attempts for c in block.chunks]}

    def stat(self, request: dict) -> dict:
        return {"counts": [self.client.stat(int(request["ph"]), i) for i in range(int(request["chunks"]))]}

    def get_loop(self, request: dict) -> dict:
        """`count` block reads back to back (one outstanding at a time): the latency and rate of one client."""
        client, ph, chunks = self._client(request), int(request["ph"]), int(request["chunks"])
        latencies: list[float] = []
        statuses: Counter[str] = Counter()
        retries = 0
        started = time.perf_counter()
        for _ in range(int(request["count"])):
            for chunk in client.get_block(ph, chunks).chunks:
                latencies.append(chunk.latency)
                statuses[_status_name(chunk.status)] += 1
                retries += chunk.attempts - 1
        return {"elapsed": time.perf_counter() - started, "latencies": latencies, "statuses": dict(statuses),
                "retries": retries}

    def wire_loop(self, request: dict) -> dict:
        """`count` GETs (or `opcode`s) of chunk 0 packed with `kvpool.wire`: the data path's rate without the client's
        Scapy cost.

        One GET outstanding; a GET unanswered after the timeout is counted `lost` and the next one is sent.
        """
        flags = Flag.BYPASS if request.get("bypass") else 0
        opcode = Opcode(int(request.get("opcode", Opcode.GET)))  # e.g. LOOKUP_META, STAT (bench/metadata.py)
        header = Header(opcode, flags=flags, tenant=self.options.tenant, prefix_hash=int(request["ph"]))
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.settimeout(self.options.timeout)
        latencies: list[float] = []
        statuses: Counter[str] = Counter()
        lost = 0
        try:
            started = time.perf_counter()
            for req_id in range(int(request["count"])):
                sent = time.perf_counter()
                sock.sendto(header.replace(req_id=req_id).pack(), self.options.server)
                try:
                    while True:
                        reply = Header.unpack(sock.recv(2048))
                        if reply.req_id == req_id:
                            break
                except TimeoutError:
                    lost += 1
                    continue
                latencies.append(time.perf_counter() - sent)
                statuses[_status_name(Status(reply.status) if reply.status in Status._value2member_map_
                                      else reply.status)] += 1
            elapsed = time.perf_counter() - started
        finally:
            sock.close()
        return {"elapsed": elapsed, "latencies": latencies, "statuses": dict(statuses), "retries": 0, "lost": lost}

    def readers(self, request: dict) -> dict:
        """`readers` concurrent clients, each reading the block `reads` times."""
        ph, chunks, reads = int(request["ph"]), int(request["chunks"]), int(request["reads"])
        n = int(request["readers"])
        options = replace(self.options, bypass=bool(request.get("bypass")))
        clients = [KVPClient(options) for _ in range(n)]
        barrier = threading.Barrier(n + 1)
        statuses: Counter[str] = Counter()
        errors: list[str] = []
        totals = {"retries": 0, "block_reads": 0}
        lock = threading.Lock()

        def reader(client: KVPClient) -> None:
            barrier.wait()
            for _ in range(reads):
                try:
                    block = client.get_block(ph, chunks)
                except KVPError as exc:
                    with lock:
                        errors.append(str(exc))
                    continue
                with lock:
                    totals["block_reads"] += 1
                    for chunk in block.chunks:
                        statuses[_status_name(chunk.status)] += 1
                        totals["retries"] += chunk.attempts - 1

        threads = [threading.Thread(target=reader, args=(c,), daemon=True) for c in clients]
        for t in threads:
            t.start()
        barrier.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        for c in clients:
            c.close()
        return {"elapsed": elapsed, "statuses": dict(statuses), "errors": errors[:5], **totals}


def serve(agent: Agent, lines, write: Callable[[str], None]) -> None:
    """Answer each JSON line until end of input."""
    handlers = {"ping": agent.ping, "put": agent.put, "get": agent.get, "stat": agent.stat,
                "get_loop": agent.get_loop, "wire_loop": agent.wire_loop, "readers": agent.readers}
    for line in lines:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            handler = handlers.get(request.get("op"))
            if handler is None:
                raise ValueError(f"unknown op {request.get('op')!r}; known: {', '.join(handlers)}")
            answer = {"ok": True, **handler(request)}
        except (KVPError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        write(json.dumps(answer) + "\n")


def serve_stdio(agent: Any, serve_lines: Callable[[Any, Iterable[str], Callable[[str], None]], None]) -> int:
    """The agent protocol on stdin/stdout: say ready, answer one JSON line per request line, close the agent."""

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        write(json.dumps({"ok": True, "ready": True}) + "\n")
        serve_lines(agent, sys.stdin, write)
    finally:
        agent.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvtesting.kvagent", description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="storage node HOST[:PORT]")
    parser.add_argument("--tenant", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per try (the softswitch is slow)")
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        server = parse_address(args.server)
    except ValueError as exc:
        parser.error(str(exc))
    agent = Agent(ClientOptions(server=server, tenant=args.tenant, timeout=args.timeout, retries=args.retries))

    return serve_stdio(agent, serve)


if __name__ == "__main__":
    sys.exit(main())
