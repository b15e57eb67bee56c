"""N-to-1 incast at real block sizes through the softswitch: readers that arrive apart, then as a user meets it,
then the coalescing study.

**Spread table (first).** N ∈ {8, 16, 32} readers of one cold 16 MiB block, reader i starting at i × spread /
(N - 1) for spreads 0, 50 ms, 500 ms and one lone reader's block time, each reader a process in its own
namespace on its own switch port, on four systems in one run: no switch function, kvswitch (request coalescing
plus stream join where the data plane has it), Mooncake Store and Mooncake with dynamic replication
(`bench mooncake_fanout`'s bed). Per row: the busiest storage node's bytes for the N readers, p50 / p99, every
reader's bytes verified, GETs per chunk, pushed chunks, the switch's coalescing and stream events, and the
controller's CPU (`bench._incast_spread`). `--spread-only`, `--no-spread`, `--spread-ns`, `--spreads`,
`--spread-mtus`, `--spread-mib`, `--no-mooncake`, `--no-stream-join`, `--no-immediate-patch` choose rows (with the
stream join, every kvswitch row is followed by the same row with the readers' `ClientOptions.immediate_patch`,
the client before the stream's patch pass, unless `--no-immediate-patch`).

    sudo .venv/bin/python -m bench.incast --spread-only --out out/bench       (the spread table alone)

**Realistic mode.** One process per reader with the client's DEFAULT options (congestion
control, RTO from the measured round trip, nothing tuned), released at one instant, every reader verifying its
block's SHA-256; at MTU 1500 and 9000 (blocks written in the chunk size the client's default picks for that
path MTU: 1 KiB and 8 KiB); N = 1, 8, 16, 32 on 16 MiB cold blocks; two cases: every reader on one block
(`one-block`, coalescing can help), and each reader on its own block on the one storage node (`own-blocks`:
the general incast, coalescing cannot help); without loss and with 5% loss on each hop both ways (emulated
in each reader's transport: this kernel has no netem). Per row: completion p50/p99, Jain's fairness index of
the per-reader goodputs, aggregate goodput against the lone reader's (N = 1, same MTU, case and loss, in the
same run), GETs resent (timer or RACK; and % of the chunks read), duplicate replies (a resend whose first
try was answered after all: spurious), BUSY replies, F_CONGESTED marks seen,
failed readers, and the controller's CPU seconds. `--quick`: N = 1, 4 on 1 MiB blocks; `--ns`, `--mib`,
`--mtus`, `--losses`, `--cases` choose rows.

The switch and the storage node run at SCHED_FIFO once they are up, the readers and the controller under the
fair scheduler (`kvtesting.realtime`): N reader processes stand for N machines, the switch and the node for one
each, and on two shared cores the fair scheduler would let every reader's wake-up preempt them and give them one
share among N + 2 (with 32 readers of their own blocks at MTU 1500 that, not the pool, set the aggregate:
0.66–0.75 × the lone reader fairly scheduled in eight runs, 0.93–0.95 × with the devices first, in one sitting). `--fair`
schedules every process fairly, as rounds before this one measured; the table's heading says which.

Every bed runs the real controller (`python -m controller serve`, `bench._running_controller`) as the switch's
primary, configured for the row's switch functions (a restart when they change); its CPU seconds per row come
from /proc.

    sudo .venv/bin/python -m bench incast --out out/bench                        (spread table and realistic rows)
    sudo .venv/bin/python -m bench.incast --no-spread --ns 1,8,16 --mib 4 --out out/bench    (reduced)

**Coalescing study (`--coalescing-study`, or `--rows`).** N readers of one cold block, coalescing on and off,
tuned readers (8 KiB chunks, MTU 9000, fixed timers):

The bed is `kvtesting.vethnet.VethNet` (client and storage node in their own namespaces, `python -m softswitch`
running kvswitch.p4 between them over veth, MTU raised to 9000 here so 8 KiB chunks fit). For every block size
and N, a fresh block is written from the storage node's own namespace (not through the switch), then N
readers read it whole once, each verifying its bytes against the block's SHA-256, in two ways:

* `processes`: one process per reader (one UDP socket and one `KVPClient` each), released at one instant;
* `in-step`: the N readers in one process and one selector loop, each its own socket, request ids, window and
  retry timers (`_read_in_step`): N readers that start together and never queue for a CPU behind each other.

Measured per run:

* the storage node's GETs for the block (the sum of its STAT counts over the block's chunks, asked from its own
  namespace) and the bytes it sent for them (GETs x message size);
* every reader's completion time (p50, p99 over readers), and whether every reader's bytes were verified;
* the switch's `coalesce_events` during the run (PENDING, COALESCED, REPLIED, EXPIRED, OVERFLOW, COLLISION,
  RETRY, CARRIED, ...), the readers' start spread, and per chunk how far apart the readers sent their first GET
  for it ("chunk spread", p50/p90): a GET joins a pending entry only if it reaches the switch within one storage
  round trip of the first (a few ms here), so readers further apart each cost a GET (docs/dataplane.md,
  "What it takes for readers to share a GET");
* the baseline in the same run: coalescing OFF is the controller's configuration with coalescing disabled
  (`coalesce_config` default action `coalesce_off`, the switch's initial state); ON is `set_coalesce_config`
  with a fresh epoch per run and the multicast groups the controller builds (`controller.coalescing`).

Chunks of 8 KiB are larger than a switch slot, so the switch never stores them: every block is cold for the
switch, and what relieves the storage node is coalescing alone. A pending entry holds up to COALESCE_WAITERS
(64) parked readers beside the one whose GET went on, served 8 per multicast (the rest by recirculated copies).

Also: the same with 1% loss (each reader's transport drops 1% of its datagrams both ways,
`kvpool.transport.LossyTransport`: this machine's kernel has no netem), every reader must still complete with
verified bytes; and one client's block read rate (the N = 1 rows), the goal being >= 100 MB/s.

    sudo .venv/bin/python -m bench.incast --coalescing-study --out out/bench   (realistic rows, then the study)
    sudo .venv/bin/python -m bench.incast --rows '1:8,32' --modes in-step --trace-dir out/trace   (a quick look)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._incast_bed import (
    CHUNK,
    COALESCE_TIMEOUT_US,
    MTU,
    TENANT,
    Bed,
    block_data,
    percentile,
    stream_join_available,
)

if TYPE_CHECKING:
    from bench._incast_spread import SpreadPlan

NAME = "incast"
READER_TIMEOUT = 0.5
READER_RETRIES = 40
READER_WINDOW = 64
"""GETs in flight per reader: a deeper window keeps each GET pending at the switch longer, so readers a few
ms apart (2 shared cores, Python readers) still find the entry open."""


@dataclass(frozen=True)
class Sizes:
    block_mib: tuple[int, ...]
    readers: dict[int, tuple[int, ...]]
    """Block size in MiB -> the Ns measured for it."""
    loss_readers: int
    loss_mib: int
    modes: tuple[bool, ...] = (False, True)
    """Reader modes per row: False = one process per reader (`_read_together`), True = in step (`_read_in_step`)."""


TRACE_DIR: Path | None = None
"""When set (`--trace-dir`), every row writes its readers' GET and reply times there."""

FULL = Sizes((1, 16, 64), {1: (1, 2, 4, 8, 16, 32), 16: (1, 2, 4, 8, 16, 32), 64: (1, 8, 32)},
             loss_readers=8, loss_mib=1)
QUICK = Sizes((1,), {1: (1, 4, 8)}, loss_readers=4, loss_mib=1)


# ---- agents: run inside a namespace as `python -m bench.incast --agent ...` -----------------------------

def _agent(argv: list[str]) -> int:
    from kvpool.client import ClientOptions, KVPClient

    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", choices=("write", "stat", "readers", "realistic"), required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--ph", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--loss", type=float, default=0.0, help="fraction of datagrams each reader drops")
    parser.add_argument("--in-step", action="store_true", help="the N readers in one event loop (see _read_in_step)")
    parser.add_argument("--trace", type=Path, help="write every reader's GET and reply times here (JSON)")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="chunk size of the written block")
    parser.add_argument("--phs", default="", help="realistic readers: reader i reads block phs[i % len]")
    args = parser.parse_args(argv)
    if args.agent == "realistic":
        return _realistic_readers(args)
    options = ClientOptions(server=(args.server, 7420), tenant=TENANT, timeout=READER_TIMEOUT,
                            retries=READER_RETRIES, window=READER_WINDOW, chunk_size=args.chunk)
    data = block_data(args.seed, args.size)
    chunks = max(1, -(-args.size // args.chunk))
    if args.agent == "write":
        with KVPClient(options) as client:
            client.put_block(args.ph, data, version=1)
        print(json.dumps({"ok": True}))
        return 0
    if args.agent == "stat":
        with KVPClient(options) as client:
            gets = sum(client.stat(args.ph, i) for i in range(chunks))
        print(json.dumps({"gets": gets}))
        return 0
    digest = hashlib.sha256(data).hexdigest()
    del data
    read = _read_in_step if args.in_step else _read_together
    print(json.dumps(read(options, args, chunks, digest)))
    return 0


def _realistic_readers(args: argparse.Namespace) -> int:
    """N reader processes with the client's DEFAULT options, released at one instant; reader i reads the block
    `phs[i % len(phs)]` (one block for all, or one block each), whose bytes come from seed `ph & 0xFFFF`.
    `--loss` is dropped by each reader's transport in each direction. Prints one JSON line of per-reader
    results: completion time, verified, requests sent, resent after a timeout, BUSY replies, error."""
    import multiprocessing as mp

    from kvpool.client import ClientOptions, KVPClient
    from kvpool.transport import LossyTransport, UdpTransport

    phs = [int(p) for p in args.phs.split(",")]
    digests = {ph: hashlib.sha256(block_data(ph & 0xFFFF, args.size)).hexdigest() for ph in set(phs)}
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    start_at = time.monotonic() + 0.5 + 0.02 * args.readers  # one CLOCK_MONOTONIC for every process

    def read(i: int) -> None:
        ph = phs[i % len(phs)]
        options = ClientOptions(server=(args.server, 7420), tenant=TENANT)  # the defaults, nothing tuned
        client = KVPClient(options, LossyTransport(UdpTransport(options.server), args.loss, random.Random(i)))
        out: dict[str, Any] = {"i": i, "time": None, "verified": False, "error": None}
        cpu = time.process_time()
        time.sleep(max(0.0, start_at - time.monotonic()))
        began = time.monotonic()
        try:
            block = client.get_block(ph)
            out["time"] = time.monotonic() - began
            out["verified"] = hashlib.sha256(block.data).hexdigest() == digests[ph]
            out["chunks"] = len(block.chunks)
        except Exception as exc:  # a reader's failure is a result to report, not a crash of the run
            out["error"] = f"reader {i}: {exc}"
        out.update(sent=client.sent, resent=client.resent, busy=client.busy, cpu_s=time.process_time() - cpu,
                   strays=client.stray_replies,
                   cwnd=client.path.congestion.cwnd, marks=client.path.congestion.marks,
                   srtt_ms=(client.path.rto.srtt or 0.0) * 1e3)
        client.close()
        results.put(out)

    procs = [ctx.Process(target=read, args=(i,), daemon=True) for i in range(args.readers)]
    for p in procs:
        p.start()
    got = [results.get(timeout=900) for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps(sorted(got, key=lambda r: r["i"])))
    return 0


def _read_together(options, args: argparse.Namespace, chunks: int, digest: str) -> dict:
    """N readers, one PROCESS each (an inference node has its own), released at one instant.

    Readers as threads of one interpreter do not overlap: under the GIL the thread that runs first sends its
    whole window and takes every reply while the others wait for the lock, so the others' GETs reach the
    switch after the reply freed the pending entry, and the storage node still answers N GETs per chunk
    (measured: 1.99 GETs per chunk for N = 2). Processes are scheduled by the kernel, each woken by its own
    replies, so readers that started together stay together: the copies of one reply reach them at once and
    they ask for the same next chunk."""
    import multiprocessing as mp

    from kvpool.client import KVPClient
    from kvpool.transport import LossyTransport, UdpTransport
    from kvpool.wire import HEADER, Header

    ctx = mp.get_context("fork")  # the agent imported everything already: a child is ready at once
    results = ctx.Queue()
    start_at = time.monotonic() + 0.3 + 0.01 * args.readers  # CLOCK_MONOTONIC is one clock for every process

    class Traced:
        """The reader's transport, noting (monotonic time, chunk) of every GET sent and reply received."""

        def __init__(self, inner) -> None:
            self.inner, self.peer = inner, inner.peer
            self.sends: list[tuple[float, int]] = []
            self.replies: list[tuple[float, int]] = []

        def send(self, data: bytes) -> None:
            self.sends.append((time.monotonic() - start_at, Header.unpack(data).chunk_idx))
            self.inner.send(data)

        def recv(self, timeout: float):
            data = self.inner.recv(timeout)
            if data is not None and len(data) >= HEADER.size:
                self.replies.append((time.monotonic() - start_at, Header.unpack(data).chunk_idx))
            return data

        def close(self) -> None:
            self.inner.close()

    def read(i: int) -> None:
        transport = Traced(LossyTransport(UdpTransport(options.server), args.loss, random.Random(i)))
        client = KVPClient(options, transport)
        out: dict = {"i": i, "time": None, "verified": False, "error": None}
        time.sleep(max(0.0, start_at - time.monotonic()))
        out["woke"] = time.monotonic() - start_at  # this reader's start, late by its wake-up
        try:
            block = client.get_block(args.ph, chunks)
            out["time"] = time.monotonic() - start_at
            out["verified"] = hashlib.sha256(block.data).hexdigest() == digest
        except Exception as exc:  # a reader's failure is a result to report, not a crash of the run
            out["error"] = f"reader {i}: {exc}"
        out["sent"] = client.sent
        first: dict[int, float] = {}
        for t, c in transport.sends:
            first.setdefault(c, t)
        out["first_sends"] = [first.get(c) for c in range(chunks)]
        if args.trace:
            out["trace"] = {"sends": transport.sends, "replies": transport.replies}
        client.close()
        results.put(out)

    procs = [ctx.Process(target=read, args=(i,), daemon=True) for i in range(args.readers)]
    for p in procs:
        p.start()
    got = [results.get(timeout=READER_TIMEOUT * (READER_RETRIES + 1) * 4 + 60) for _ in procs]
    for p in procs:
        p.join()
    got.sort(key=lambda r: r["i"])
    if args.trace:
        args.trace.write_text(json.dumps([r.pop("trace", None) for r in got]))
    return {"times": [r["time"] for r in got], "verified": [r["verified"] for r in got],
            "woke": [r["woke"] for r in got], "chunk_spread_s": _chunk_spread([r["first_sends"] for r in got]),
            "errors": [r["error"] for r in got if r["error"]][:5], "client_sends": sum(r["sent"] for r in got)}


def _read_in_step(options, args: argparse.Namespace, chunks: int, digest: str) -> dict:
    """N readers in ONE process: each its own UDP socket, request ids, window of GETs and retry timers, driven
    by one selector loop, so no reader waits for the CPU behind the others (2 shared cores, N Python processes).

    What it models: N inference nodes, each on its own CPU, that start reading at one instant. The first
    windows go out interleaved (every reader's GET for chunk j before anyone's for j + 1); after that the loop
    takes one reply per reader in turn, and each reader sends its next GET as soon as one of its own replies is
    read, as `KVPClient.get_block` does. The
    same checks as the client: KVP validity, req_id, key, checksum and reassembly (`kvpool.blocks`), and the
    block's SHA-256 per reader."""
    import selectors
    import socket

    from kvpool.blocks import Reassembly
    from kvpool.constants import Opcode
    from kvpool.wire import Header, check, encode

    rng = random.Random()
    sel = selectors.DefaultSelector()
    readers: list[dict[str, Any]] = []
    for i in range(args.readers):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.bind(("0.0.0.0", 0))
        sock.setblocking(False)
        r: dict[str, Any] = {"i": i, "sock": sock, "next": 0, "flight": {}, "assembly": Reassembly(), "done": 0, "time": None,
             "req": rng.randrange(1 << 31), "sent": 0, "first": [None] * chunks, "error": None}
        readers.append(r)
        sel.register(sock, selectors.EVENT_READ, r)

    def send(r: dict, chunk: int, attempts: int = 0) -> None:
        r["req"] = (r["req"] + 1) & 0xFFFFFFFF
        header = Header(Opcode.GET, tenant=TENANT, prefix_hash=args.ph, chunk_idx=chunk, chunk_count=chunks,
                        req_id=r["req"], chunk_shift=7)
        r["flight"][r["req"]] = (chunk, time.monotonic(), attempts + 1)
        if r["first"][chunk] is None:
            r["first"][chunk] = time.monotonic() - start
        r["sock"].sendto(encode(header), options.server)
        r["sent"] += 1

    start = time.monotonic()
    for j in range(min(options.window, chunks)):
        for r in readers:
            send(r, j)
            r["next"] = j + 1
    left = len(readers)
    deadline = start + READER_TIMEOUT * (READER_RETRIES + 1) * 4 + 60
    while left and time.monotonic() < deadline:
        ready = [key.data for key, _ in sel.select(timeout=0.05)]
        while ready:  # one reply per reader in turn, as N nodes would take theirs side by side
            for r in list(ready):
                try:
                    data = r["sock"].recv(65535)
                except BlockingIOError:
                    ready.remove(r)
                    continue
                reply = Header.unpack(data)
                item = r["flight"].pop(reply.req_id, None)
                if item is None or check(data) is not None or reply.chunk_idx != item[0] \
                        or reply.opcode != Opcode.GET_REPLY:
                    continue
                try:
                    r["assembly"].add(reply.chunk_idx, reply.chunk_count, reply.value_len,
                                      memoryview(data)[44:44 + reply.chunk_len], reply.version, reply.value_csum)
                except Exception as exc:  # a reader's failure is a result to report
                    r["error"] = f"reader {r['i']}: {exc}"
                r["done"] += 1
                if r["next"] < chunks:
                    send(r, r["next"])
                    r["next"] += 1
                if r["done"] == chunks:
                    r["time"] = time.monotonic() - start
                    left -= 1
                    sel.unregister(r["sock"])
                    ready.remove(r)
        now = time.monotonic()
        for r in readers:
            for req, (chunk, sent_at, attempts) in list(r["flight"].items()):
                if now - sent_at >= READER_TIMEOUT and attempts <= READER_RETRIES:
                    del r["flight"][req]
                    send(r, chunk, attempts)
    out: dict[str, Any] = {"times": [], "verified": [], "woke": [], "errors": [], "client_sends": 0}
    for r in readers:
        ok = r["time"] is not None and r["error"] is None
        out["times"].append(r["time"])
        out["verified"].append(ok and hashlib.sha256(r["assembly"].data()).hexdigest() == digest)
        out["woke"].append(r["first"][0])
        if r["error"] or r["time"] is None:
            out["errors"].append(r["error"] or f"reader {r['i']}: timed out")
        out["client_sends"] += r["sent"]
        r["sock"].close()
    out["errors"] = out["errors"][:5]
    out["chunk_spread_s"] = _chunk_spread([r["first"] for r in readers])
    return out


def _chunk_spread(first_sends: list[list[float | None]]) -> list[float]:
    """Per chunk, how far apart the readers sent their first GET for it (s): what coalescing must bridge.

    A reader's GET joins a pending entry only if it reaches the switch before that entry's reply (one storage
    round trip after the first GET): readers further apart than that each cost the storage node a GET."""
    spreads = []
    for sends in zip(*first_sends, strict=True):
        known = [t for t in sends if t is not None]
        if len(known) > 1:
            spreads.append(max(known) - min(known))
    return spreads


# ---- the orchestrator (root) ------------------------------------------------------------------------------

def measure(bed: Bed, mib: int, readers: int, on: bool, ph: int, loss: float = 0.0, in_step: bool = False) -> dict:
    size = mib << 20
    chunks = -(-size // CHUNK)
    common = ("--ph", str(ph), "--size", str(size), "--seed", str(ph & 0xFFFF))
    bed.agent("storage", "--agent", "write", *common)
    bed.coalescing(on)
    before = bed.events()
    cpu_before = bed.controller_cpu_s()
    trace = () if TRACE_DIR is None else (
        "--trace", str((TRACE_DIR / f"{mib}MiB-N{readers}-{'on' if on else 'off'}-loss{loss:g}.json").resolve()))
    got = bed.agent("client", "--agent", "readers", "--readers", str(readers), "--loss", str(loss / 100), *common,
                    *trace, *(("--in-step",) if in_step else ()))
    gets = bed.agent("storage", "--agent", "stat", *common)["gets"]
    after = bed.events()
    times = [t for t in got["times"] if t is not None]
    woke = [w for w in got["woke"] if w is not None]
    return {"block_mib": mib, "readers": readers, "coalescing": "on" if on else "off", "loss_percent": loss,
            "reader_mode": "in-step" if in_step else "processes",
            "chunks": chunks, "storage_gets": gets, "storage_gets_per_chunk": gets / chunks,
            "storage_bytes": gets * (44 + CHUNK), "reader_sends": got["client_sends"],
            "completion_s": {"p50": percentile(times, 50), "p99": percentile(times, 99)},
            "all_verified": len(times) == readers and all(got["verified"]), "errors": got["errors"],
            "read_MB_per_s_p50": size / 1e6 / percentile(times, 50) if times else 0.0,
            "start_spread_ms": (max(woke) - min(woke)) * 1e3 if woke else float("nan"),
            "chunk_spread_ms": {"p50": percentile(got["chunk_spread_s"], 50) * 1e3,
                                "p90": percentile(got["chunk_spread_s"], 90) * 1e3},
            "coalesce_events": {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)},
            "controller_cpu_s": _cpu_since(bed, cpu_before)}


# ---- the realistic mode: client defaults, one process per reader, MTU 1500 and 9000, with and without loss ----

@dataclass(frozen=True)
class Realistic:
    """What the realistic mode measures: every (MTU, case, loss, N)."""

    mtus: tuple[int, ...] = (1500, 9000)
    cases: tuple[str, ...] = ("one-block", "own-blocks")
    """`one-block`: every reader reads the same block; `own-blocks`: reader i its own block, all on one node."""
    readers: tuple[int, ...] = (1, 8, 16, 32)
    """N = 1 is the lone reader: every other row's aggregate goodput is compared with it."""
    block_mib: int = 16
    losses: tuple[float, ...] = (0.0, 5.0)
    """Percent lost on each veth hop, both ways; emulated at each reader (this kernel has no netem): a round
    trip crosses two hops each way, so a reader's transport drops 1 - 0.95^2 of its datagrams each way."""
    realtime_devices: bool = True
    """The switch and the storage node at SCHED_FIFO, the readers under the fair scheduler (`kvtesting.realtime`):
    they stand for N machines, the switch and the node for one each; False: every process shares the CPUs fairly
    (32 reader processes then preempt the switch and the node at every wake-up)."""


REALISTIC_FULL = Realistic()
REALISTIC_QUICK = Realistic(readers=(1, 4), block_mib=1)


def jain(values: list[float]) -> float:
    """Jain's fairness index of per-reader goodputs: 1 when equal, 1/n when one reader has everything."""
    if not values:
        return float("nan")
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if any(values) else float("nan")


def measure_realistic(bed: Bed, mtu: int, case: str, readers: int, loss: float, phs: list[int],
                      size: int, chunk: int) -> dict:
    blocks = phs[:1] if case == "one-block" else phs[:readers]
    per_way = 1 - (1 - loss / 100) ** 2
    cpu_before = bed.controller_cpu_s()
    began = time.monotonic()
    got = bed.agent("client", "--agent", "realistic", "--readers", str(readers), "--loss", str(per_way),
                    "--ph", "0", "--seed", "0", "--size", str(size), "--phs", ",".join(map(str, blocks)),
                    timeout=1800)
    times = [r["time"] for r in got if r["time"] is not None]
    ok = [r for r in got if r["verified"]]
    goodputs = [size / 1e6 / r["time"] for r in ok]
    chunks = -(-size // chunk)
    resent = sum(r["resent"] for r in got)
    return {"mtu": mtu, "case": case, "readers": readers, "loss_percent_per_hop": loss, "block_bytes": size,
            "chunk_bytes": chunk, "chunks_per_block": chunks,
            "completion_s": {"p50": percentile(times, 50), "p99": percentile(times, 99)},
            "jain": jain(goodputs),
            "aggregate_MB_per_s": (len(ok) * size / 1e6 / max(r["time"] for r in ok)) if ok else 0.0,
            "reader_MB_per_s": goodputs,
            "resent_gets": resent, "resent_percent_of_chunks": 100 * resent / (readers * chunks),
            "busy_replies": sum(r["busy"] for r in got), "marks": sum(r["marks"] for r in got),
            "duplicate_replies": sum(r.get("strays", 0) for r in got),
            "failed_readers": readers - len(ok), "errors": [r["error"] for r in got if r["error"]][:3],
            "sent": sum(r["sent"] for r in got), "reader_cpu_s": sum(r["cpu_s"] for r in got),
            "controller_cpu_s": _cpu_since(bed, cpu_before), "wall_s": time.monotonic() - began,
            "final_cwnd": [round(r["cwnd"], 1) for r in got], "srtt_ms": [round(r["srtt_ms"], 2) for r in got]}


def _cpu_since(bed: Bed, before: float | None) -> float | None:
    """The controller's CPU seconds since `before` (None: no controller ran)."""
    now = bed.controller_cpu_s()
    return None if now is None or before is None else now - before


def _cpu_cell(value: float | None, wall: float | None = None) -> str:
    """CPU seconds, with their share of one core over `wall` seconds when known."""
    if value is None:
        return "–"
    return f"{value:.2f} ({100 * value / wall:.1f}%)" if wall else f"{value:.2f}"


def realistic_table(rows: list[dict]) -> str:
    lines = ["| MTU | case | loss/hop | N | chunk | p50 s | p99 s | Jain | aggregate MB/s | vs lone | "
             "resent GETs (% of chunks) | duplicate replies | BUSY | marks | controller CPU s (% of a core) | failed |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lone = r.get("lone_MB_per_s")
        vs = f"{r['aggregate_MB_per_s'] / lone:.2f}" if lone else "–"
        lines.append(f"| {r['mtu']} | {r['case']} | {r['loss_percent_per_hop']:g}% | {r['readers']} | "
                     f"{r['chunk_bytes']} | {r['completion_s']['p50']:.2f} | {r['completion_s']['p99']:.2f} | "
                     f"{r['jain']:.3f} | {r['aggregate_MB_per_s']:.1f} | {vs} | "
                     f"{r['resent_gets']} ({r['resent_percent_of_chunks']:.2f}%) | {r.get('duplicate_replies', 0)} | "
                     f"{r['busy_replies']} | "
                     f"{r['marks']} | {_cpu_cell(r.get('controller_cpu_s'), r.get('wall_s'))} | {r['failed_readers']}{' ' + r['errors'][0][:80] if r['errors'] else ''} |")
    return "\n".join(lines)


def run_realistic(bed: Bed, plan: Realistic, ph_base: int) -> list[dict]:
    """Every row of `plan` in one bed, coalescing on as the controller configures it; the blocks of each MTU
    are written once (in the chunks the client's default picks on a path of that MTU), read cold by every row
    (chunks over a slot's 128 bytes are never cached by the switch)."""
    from kvpool.blocks import chunk_len_for_mtu

    rows: list[dict] = []
    size = plan.block_mib << 20
    bed.coalescing(True)
    for mtu in plan.mtus:
        bed.set_mtu(mtu)
        chunk = chunk_len_for_mtu(mtu)
        ph_base += 0x1000
        phs = [ph_base + i for i in range(max(plan.readers))]
        for ph in phs:
            bed.agent("storage", "--agent", "write", "--ph", str(ph), "--size", str(size), "--seed",
                      str(ph & 0xFFFF), "--chunk", str(chunk))
        for loss in plan.losses:
            for case in plan.cases:
                lone = None
                for n in plan.readers:
                    if n == 1 and lone is not None:
                        continue
                    row = measure_realistic(bed, mtu, case, n, loss, phs, size, chunk)
                    if n == 1:
                        lone = row["aggregate_MB_per_s"]
                    row["lone_MB_per_s"] = lone
                    rows.append(row)
                    print(f"   {realistic_table(rows[-1:]).splitlines()[-1]}", flush=True)
    bed.set_mtu(MTU)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| readers | block | N | coalescing | loss | storage GETs (per chunk) | storage MB sent | p50 s | p99 s | "
             "all verified | MB/s per reader (p50) | start spread ms | chunk spread ms p50/p90 | coalesce_events |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r.get('reader_mode', 'processes')} | {r['block_mib']} MiB | {r['readers']} | {r['coalescing']} | {r['loss_percent']}% | "
                     f"{r['storage_gets']} ({r['storage_gets_per_chunk']:.2f}) | {r['storage_bytes'] / 1e6:.1f} | "
                     f"{r['completion_s']['p50']:.2f} | {r['completion_s']['p99']:.2f} | "
                     f"{'yes' if r['all_verified'] else 'NO ' + '; '.join(r['errors'][:1])} | "
                     f"{r['read_MB_per_s_p50']:.2f} | {r.get('start_spread_ms', float('nan')):.1f} | "
                     f"{r['chunk_spread_ms']['p50']:.1f}/{r['chunk_spread_ms']['p90']:.1f} | "
                     f"{' '.join(f'{k}={v}' for k, v in r.get('coalesce_events', {}).items())} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["block_mib"] for r in rows if r["loss_percent"] == 0})
    fig, axes = plt.subplots(len(sizes), 2, figsize=(10, 3.5 * len(sizes)), squeeze=False)
    for row_axes, mib in zip(axes, sizes, strict=True):
        for (mode, reader_mode), style in ((("off", "processes"), "o--"), (("on", "processes"), "s-"),
                                           (("off", "in-step"), "^:"), (("on", "in-step"), "d-.")):
            pts = sorted(((r["readers"], r) for r in rows
                          if r["block_mib"] == mib and r["coalescing"] == mode and r["loss_percent"] == 0
                          and r.get("reader_mode", "processes") == reader_mode), key=lambda x: x[0])
            if not pts:
                continue
            ns = [n for n, _ in pts]
            label = f"coalescing {mode}, readers {reader_mode}"
            row_axes[0].plot(ns, [r["storage_gets_per_chunk"] for _, r in pts], style, label=label)
            row_axes[1].plot(ns, [r["completion_s"]["p99"] for _, r in pts], style, label=label)
        row_axes[0].set(title=f"{mib} MiB block: storage-node GETs per chunk", xlabel="concurrent readers N",
                        xscale="log", yscale="log")
        row_axes[1].set(title=f"{mib} MiB block: readers' p99 completion", xlabel="concurrent readers N",
                        ylabel="seconds", xscale="log")
        for ax in row_axes:
            ax.legend()
            ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(out: Path, quick: bool = False, sizes: Sizes | None = None, realistic: Realistic | None = None,
        coalescing_study: bool = False, spread: SpreadPlan | bool = True) -> dict:
    """The spread table first (`spread`: True = SPREAD_FULL / SPREAD_QUICK, False = none), then the realistic
    rows (`realistic`, default REALISTIC_FULL / REALISTIC_QUICK; a plan with no readers skips them), then, when
    asked, the coalescing study (`sizes`: coalescing off and on, tuned readers)."""
    from bench import _incast_spread

    plan = realistic or (REALISTIC_QUICK if quick else REALISTIC_FULL)
    sizes = sizes or (QUICK if quick else FULL)
    if spread is True:
        spread = _incast_spread.SPREAD_QUICK if quick else _incast_spread.SPREAD_FULL
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    ph = 0x1C00_0000 + (int(time.time()) & 0xFFFF) * 0x10000
    started = time.perf_counter()
    spread_result = _incast_spread.run(spread, out, stream_join_available()) if spread else None
    if spread_result is not None:
        (out / f"{NAME}.json").write_text(json.dumps({"bench": NAME, "spread": spread_result}, indent=2))
        (out / f"{NAME}.md").write_text(_incast_spread.markdown(spread_result))
    if not plan.readers and not coalescing_study:
        return {"bench": NAME, "spread": spread_result}
    with Bed(out / "incast-bed", realtime_devices=plan.realtime_devices) as bed:
        scheduling = bed.scheduling()
        realistic_rows = run_realistic(bed, plan, ph + 0x8000) if plan.readers else []
        for mib in sizes.block_mib if coalescing_study else ():
            for n in sizes.readers[mib]:
                for in_step in sizes.modes:
                    for on in (False, True):
                        ph += 1
                        rows.append(measure(bed, mib, n, on, ph, in_step=in_step))
                        print(f"   {table(rows[-1:]).splitlines()[-1]}", flush=True)
        for on in (False, True) if sizes.loss_readers and coalescing_study else ():
            ph += 1
            rows.append(measure(bed, sizes.loss_mib, sizes.loss_readers, on, ph, loss=1.0))
            print(f"   {table(rows[-1:]).splitlines()[-1]}", flush=True)
    result = {"bench": NAME, "spread": spread_result, "realistic": {"rows": realistic_rows, "plan": plan.__dict__,
                                                                  "scheduling": scheduling,
                                           "client": "ClientOptions defaults (congestion control, RTO from RTT, "
                                                     "chunk size from the path MTU)",
                                           "controller_cpu_s": "the real controller (`python -m controller "
                                                               "serve`) as the switch's primary, CPU seconds per "
                                                               "row from /proc"},
              "chunk_bytes": CHUNK, "mtu": MTU, "coalesce_timeout_us": COALESCE_TIMEOUT_US,
              "baseline": "coalescing off = coalesce_config default action coalesce_off (the controller with "
                          "coalescing disabled)", "rows": rows, "wall_s": time.perf_counter() - started}
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    text = _incast_spread.markdown(spread_result) + "\n" if spread_result is not None else ""
    text += "## Realistic: client defaults, one process per reader\n\n" + scheduling + "\n\n" \
        + realistic_table(realistic_rows) + "\n"
    if rows:
        text += "\n## Coalescing study (tuned readers, 8 KiB chunks, MTU 9000)\n\n" + table(rows) + "\n"
        plot(rows, out / f"{NAME}.png")
    (out / f"{NAME}.md").write_text(text)
    return result


if __name__ == "__main__":
    if "--agent" in sys.argv:
        sys.exit(_agent(sys.argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m bench.incast")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", help="only these rows, no loss rows: 'MIB:N,N;MIB:N', e.g. '1:4,8;16:4'")
    parser.add_argument("--modes", choices=("processes", "in-step", "both"), default="both",
                        help="with --rows: which reader modes")
    parser.add_argument("--trace-dir", type=Path, help="write each row's per-reader GET/reply times here")
    parser.add_argument("--coalescing-study", action="store_true",
                        help="after the realistic rows, the coalescing off/on rows with tuned readers")
    parser.add_argument("--mtus", help="realistic rows: MTUs, e.g. 1500,9000")
    parser.add_argument("--ns", help="realistic rows: reader counts (1 first: the lone reader), e.g. 1,8,16,32")
    parser.add_argument("--mib", type=int, help="realistic rows: block size in MiB")
    parser.add_argument("--losses", help="realistic rows: percent loss per hop, e.g. 0,5")
    parser.add_argument("--cases", help="realistic rows: one-block,own-blocks")
    parser.add_argument("--fair", action="store_true",
                        help="realistic rows: the switch and the node under the fair scheduler too (default: "
                             "SCHED_FIFO, the readers fair)")
    parser.add_argument("--spread-only", action="store_true", help="only the spread table (no realistic rows)")
    parser.add_argument("--no-spread", action="store_true", help="no spread table")
    parser.add_argument("--spread-ns", help="spread table: reader counts, e.g. 8,16,32")
    parser.add_argument("--spreads", help="spread table: start spreads in s (the lone block time is added), "
                                          "e.g. 0,0.05,0.5")
    parser.add_argument("--spread-mtus", help="spread table: MTUs of the pool's rows, e.g. 9000,1500")
    parser.add_argument("--spread-mib", type=int, help="spread table: block size in MiB")
    parser.add_argument("--no-mooncake", action="store_true", help="spread table without Mooncake's rows")
    parser.add_argument("--no-stream-join", action="store_true", help="kvswitch rows with coalescing only")
    parser.add_argument("--no-immediate-patch", action="store_true",
                        help="spread table: no kvswitch rows with the readers' immediate patches (the client before "
                             "the patch pass)")
    args = parser.parse_args()
    from bench._incast_spread import SPREAD_FULL, SPREAD_QUICK, SpreadPlan

    sbase = SPREAD_QUICK if args.quick else SPREAD_FULL
    spread_plan = None if args.no_spread else SpreadPlan(
        readers=tuple(int(x) for x in args.spread_ns.split(",")) if args.spread_ns else sbase.readers,
        spreads_s=tuple(float(x) for x in args.spreads.split(",")) if args.spreads else sbase.spreads_s,
        block_mib=args.spread_mib or sbase.block_mib,
        mtus=tuple(int(x) for x in args.spread_mtus.split(",")) if args.spread_mtus else sbase.mtus,
        lone=sbase.lone, mooncake=sbase.mooncake and not args.no_mooncake, stream_join=not args.no_stream_join,
        immediate_patch=not args.no_immediate_patch)
    base = REALISTIC_QUICK if args.quick else REALISTIC_FULL
    plan = Realistic(
        mtus=tuple(int(x) for x in args.mtus.split(",")) if args.mtus else base.mtus,
        cases=tuple(args.cases.split(",")) if args.cases else base.cases,
        readers=tuple(int(x) for x in args.ns.split(",")) if args.ns else base.readers,
        block_mib=args.mib or base.block_mib,
        losses=tuple(float(x) for x in args.losses.split(",")) if args.losses else base.losses,
        realtime_devices=not args.fair)
    if args.spread_only:
        plan = Realistic(readers=())
    if args.trace_dir:
        args.trace_dir.mkdir(parents=True, exist_ok=True)
        TRACE_DIR = args.trace_dir
    only = None
    if args.rows:
        wanted = {int(m): tuple(int(n) for n in ns.split(",")) for m, ns in
                  (part.split(":") for part in args.rows.split(";"))}
        only = Sizes(tuple(wanted), wanted, loss_readers=0, loss_mib=1,
                     modes={"processes": (False,), "in-step": (True,), "both": (False, True)}[args.modes])
    run(args.out, args.quick, only, plan, coalescing_study=args.coalescing_study or args.rows is not None,
        spread=spread_plan or False)
