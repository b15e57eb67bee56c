"""Mooncake Store's own answer to a hot key: N readers of one 16 MiB key, dynamic replication off and on.

The peer baseline of the N-to-1 incast: the same readers, block size and start spreads, reading one hot key
straight from Mooncake Store with its own client (`MooncakeDistributedStore.get` over TCP, the pinned
mooncake-transfer-engine-non-cuda 0.3.13.post1). `bench incast`'s spread table runs `measure` in the same
invocation as the pool's rows (no switch function, kvswitch), so the four systems sit side by side.

The bed, built fresh per run (root: network namespaces and veth pairs this benchmark creates and removes):

* one "fabric" namespace holding a Linux bridge (10.77.0.1/16 on it), where `mooncake_master` and its HTTP
  metadata server run (`python -m kvpool.mooncake_master`);
* `--segments` storage namespaces (10.77.0.11, .12, ...), each one process contributing a memory segment to the
  pool (`setup(..., global_segment_size, ...)`): the storage nodes;
* a writer client in the fabric namespace that puts each row's key (one replica, on one of the segments);
* up to 32 reader namespaces (10.77.1.1, ...), one process each with its own Mooncake client (no segment).

Every host reaches the others over its own veth into the bridge, so a storage node's bytes are the transmit
counter of its veth (`/sys/class/net/eth0/statistics/tx_bytes` read in its namespace), sampled before and after
a row. A veth has no line rate: transfers run as fast as the two shared cores copy bytes.

Per row (N readers x start spread x dynamic replication off / on), a fresh key (cold: never read before) is
put, then reader i starts its `get` at t0 + i x spread / (N - 1) (spreads: 0, 50 ms, 500 ms and one lone
reader's block time, measured first), checks the bytes' SHA-256, and reports its start and end. Reported:
bytes the busiest storage node sent per block read (in blocks: 1.0 = every reader's copy came from it; 1/N =
it sent the block once), p50 / p99 completion (from each reader's own start), readers verified / failed.

Dynamic replication ON is `mooncake_master --dynamic_replication_mode=enforce
--dynamic_replication_heat_window_seconds=1 --dynamic_replication_max_memory_replicas=<segments>` (flags of
0.3.13.post1, checked with `mooncake_master --help`; admission QPS threshold left at its default 0.8 reads/s),
the shortest heat window the flag allows (whole seconds).

    .venv/bin/python -m bench mooncake_fanout --out out/bench        (as root)
    .venv/bin/python -m bench.mooncake_fanout --readers 8 --spreads 0,0.05 --out out/bench   (a quick look)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import select
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

NAME = "mooncake_fanout"
BLOCK_BYTES = 16 << 20
READERS = (8, 16, 32)
SPREADS_S = (0.0, 0.05, 0.5)
"""Start spreads; one lone reader's block time is added to them, measured on the bed."""
SEGMENTS = 2
SEGMENT_BYTES = 512 << 20
"""Memory each storage node contributes: room for every row's key and its dynamic replicas."""
CLIENT_BUFFER_BYTES = 32 << 20
"""Each client's local transfer buffer (a get lands in it): above one block."""
FABRIC_ADDRESS = "10.77.0.1"
PREFIX_LEN = 16
LEAD_S = 1.0
"""Readers are told their start time this far ahead, so that every one is waiting when the row starts."""
READ_TIMEOUT_S = 120.0
AGAIN_AFTER_S = 1.5
"""After each N's rows, its last key is read again this long after (past the 1 s heat window)."""


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def block_data(seed: int, size: int = BLOCK_BYTES) -> bytes:
    return random.Random(seed).randbytes(size)


# -- agents: run inside a namespace, talk JSON lines over stdin / stdout ---------------------------------
def _client(master: str, metadata: str, host: str, segment: int) -> Any:
    from mooncake.store import MooncakeDistributedStore

    os.environ["MC_TCP_BIND_ADDRESS"] = host  # the address the transfer engine publishes (kvpool.backends.mooncake)
    client = MooncakeDistributedStore()
    rc = client.setup(host, metadata, segment, CLIENT_BUFFER_BYTES, "tcp", "", master)
    if rc != 0:
        raise RuntimeError(f"Mooncake client setup failed ({rc}) on {host}")
    return client


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _agent(argv: list[str]) -> int:
    """`python -m bench.mooncake_fanout _agent ROLE MASTER METADATA HOST [SEGMENT_BYTES]`.

    storage: contribute a segment, say ready, wait for end of input. writer: `{"put": key, "seed": s, "size": n}`
    or `{"replicas": key}` (how many replicas the master lists) per line. reader: `{"get": key, "at": wall clock, "sha256": hex}` per line → start, end, bytes, ok."""
    role, master, metadata, host = argv[:4]
    segment = int(argv[4]) if len(argv) > 4 else 0
    client = _client(master, metadata, host, segment)
    _say({"ready": host})
    if role == "storage":
        sys.stdin.read()
        client.close()
        return 0
    from mooncake.store import ReplicateConfig

    for line in sys.stdin:
        order = json.loads(line)
        if role == "writer" and "replicas" in order:
            _say({"replicas": len(client.get_replica_desc(order["replicas"]))})
            continue
        if role == "writer":
            config = ReplicateConfig()
            config.replica_num = 1
            rc = client.put(order["put"], block_data(order["seed"], order["size"]), config)
            _say({"rc": rc})
            continue
        delay = order["at"] - time.time()
        if delay > 0:
            time.sleep(delay)
        start = time.time()
        try:
            got = client.get(order["get"])
            error = ""
        except Exception as exc:  # a failed reader is a row's figure, not the end of the run
            got, error = b"", repr(exc)
        end = time.time()
        _say({"start": start, "end": end, "bytes": len(got), "error": error,
              "ok": hashlib.sha256(got).hexdigest() == order["sha256"]})
    client.close()
    return 0


# -- the bed ---------------------------------------------------------------------------------------------
@dataclass
class Agent:
    """One process inside a namespace, spoken to in JSON lines."""

    process: subprocess.Popen[str]
    host: str

    def ask(self, order: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(order) + "\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = READ_TIMEOUT_S) -> dict:
        out = self.process.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else ""
        if not line:
            raise RuntimeError(f"agent on {self.host} gave no answer (exit code {self.process.poll()})")
        return dict(json.loads(line))

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Bed:
    """Namespaces: a fabric (bridge + master), storage nodes and readers, all made and removed here."""

    readers: int
    segments: int
    log: IO[str]
    tag: str = field(default_factory=lambda: f"mcf{os.getpid() % 100000}")
    made: list[str] = field(default_factory=list)

    @property
    def fabric(self) -> str:
        return f"{self.tag}f"

    def storage_ns(self, i: int) -> str:
        return f"{self.tag}s{i}"

    def reader_ns(self, i: int) -> str:
        return f"{self.tag}r{i}"

    @staticmethod
    def storage_ip(i: int) -> str:
        return f"10.77.0.{11 + i}"

    @staticmethod
    def reader_ip(i: int) -> str:
        return f"10.77.1.{1 + i}"

    def __enter__(self) -> Bed:
        try:
            _sh("ip", "netns", "add", self.fabric)
            self.made.append(self.fabric)
            f = ("ip", "netns", "exec", self.fabric)
            _sh(*f, "ip", "link", "set", "lo", "up")
            _sh(*f, "ip", "link", "add", "br0", "type", "bridge")
            _sh(*f, "ip", "addr", "add", f"{FABRIC_ADDRESS}/{PREFIX_LEN}", "dev", "br0")
            _sh(*f, "ip", "link", "set", "br0", "up")
            hosts = [(self.storage_ns(i), self.storage_ip(i)) for i in range(self.segments)]
            hosts += [(self.reader_ns(i), self.reader_ip(i)) for i in range(self.readers)]
            for n, (ns, ip) in enumerate(hosts):
                _sh("ip", "netns", "add", ns)
                self.made.append(ns)
                port = f"{self.tag}p{n}"
                _sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
                    "netns", self.fabric)
                x = ("ip", "netns", "exec", ns)
                _sh(*x, "ip", "link", "set", "lo", "up")
                _sh(*x, "ip", "addr", "add", f"{ip}/{PREFIX_LEN}", "dev", "eth0")
                _sh(*x, "ip", "link", "set", "eth0", "up")
                _sh(*f, "ip", "link", "set", port, "master", "br0")
                _sh(*f, "ip", "link", "set", port, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for ns in reversed(self.made):  # removing a namespace removes its veth ends too
            _sh("ip", "netns", "delete", ns, check=False)
        self.made.clear()

    def spawn(self, ns: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True)

    def tx_bytes(self, ns: str) -> int:
        return int(_sh("ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/statistics/tx_bytes").stdout)


@dataclass
class Pool:
    """A master with its storage nodes, writer and readers on a bed, in one dynamic-replication mode."""

    bed: Bed
    replication: bool
    master: subprocess.Popen[str] | None = None
    storage: list[Agent] = field(default_factory=list)
    writer: Agent | None = None
    readers: list[Agent] = field(default_factory=list)

    def flags(self) -> list[str]:
        if not self.replication:
            return ["--dynamic_replication_mode=off"]
        return ["--dynamic_replication_mode=enforce", "--dynamic_replication_heat_window_seconds=1",
                f"--dynamic_replication_max_memory_replicas={self.bed.segments}"]

    def __enter__(self) -> Pool:
        bed = self.bed
        try:
            self.master = bed.spawn(bed.fabric, "-m", "kvpool.mooncake_master", "--host", FABRIC_ADDRESS, "--",
                                    *self.flags())
            head = Agent(self.master, FABRIC_ADDRESS).answer(30)
            where = [head["master"], head["metadata"]]

            def agent(ns: str, role: str, ip: str, segment: int = 0) -> Agent:
                return Agent(bed.spawn(ns, "-m", "bench.mooncake_fanout", "_agent", role, *where, ip,
                                       str(segment)), ip)

            self.storage = [agent(bed.storage_ns(i), "storage", bed.storage_ip(i), SEGMENT_BYTES)
                            for i in range(bed.segments)]
            for a in self.storage:
                a.answer(60)
            self.writer = agent(bed.fabric, "writer", FABRIC_ADDRESS)
            self.writer.answer(60)
            self.readers = [agent(bed.reader_ns(i), "reader", bed.reader_ip(i)) for i in range(bed.readers)]
            for a in self.readers:
                a.answer(120)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for a in [*self.readers, *([self.writer] if self.writer else []), *self.storage]:
            a.stop()
        if self.master is not None and self.master.poll() is None:
            self.master.terminate()  # kvpool.mooncake_master stops the master it started
            try:
                self.master.wait(10)
            except subprocess.TimeoutExpired:
                self.master.kill()
                self.master.wait()

    def put(self, key: str, seed: int) -> str:
        assert self.writer is not None
        self.writer.ask({"put": key, "seed": seed, "size": BLOCK_BYTES})
        rc = self.writer.answer()["rc"]
        if rc != 0:
            raise RuntimeError(f"put {key} failed ({rc})")
        return hashlib.sha256(block_data(seed)).hexdigest()

    def replicas(self, key: str) -> int:
        """Replicas of `key` the master lists now (dynamic replication adds some)."""
        assert self.writer is not None
        self.writer.ask({"replicas": key})
        return int(self.writer.answer()["replicas"])

    def read(self, key: str, digest: str, readers: int, spread_s: float) -> dict:
        """One row: `readers` readers of `key`, starts spread evenly over `spread_s`; per-node bytes sent."""
        bed = self.bed
        before = [bed.tx_bytes(bed.storage_ns(i)) for i in range(bed.segments)]
        t0 = time.time() + LEAD_S
        for i, reader in enumerate(self.readers[:readers]):
            offset = spread_s * i / (readers - 1) if readers > 1 else 0.0
            reader.ask({"get": key, "at": t0 + offset, "sha256": digest})
        got = [r.answer() for r in self.readers[:readers]]
        after = [bed.tx_bytes(bed.storage_ns(i)) for i in range(bed.segments)]
        sent = [b - a for a, b in zip(before, after, strict=True)]
        times = sorted(g["end"] - g["start"] for g in got)
        return {"readers": readers, "spread_s": spread_s, "node_bytes": sent,
                "busiest_blocks_per_read": max(sent) / (BLOCK_BYTES * readers),
                "total_blocks_per_read": sum(sent) / (BLOCK_BYTES * readers),
                "p50_s": _percentile(times, 50), "p99_s": _percentile(times, 99),
                "verified": sum(1 for g in got if g["ok"]), "failed": sum(1 for g in got if not g["ok"]),
                "errors": sorted({g["error"] for g in got if g["error"]}),
                "start_spread_s": max(g["start"] for g in got) - min(g["start"] for g in got),
                "replicas_after": self.replicas(key)}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# -- the benchmark ---------------------------------------------------------------------------------------
def lone_block_time(pool: Pool, seed: int, repeats: int = 3) -> float:
    """Median time one reader alone takes to get a fresh block (the spread of the last column)."""
    times = []
    for k in range(repeats):
        key = f"lone-{seed}-{k}"
        digest = pool.put(key, seed + k)
        row = pool.read(key, digest, 1, 0.0)
        if row["failed"]:
            raise RuntimeError(f"a lone reader failed: {row['errors']}")
        times.append(row["p50_s"])
    return sorted(times)[len(times) // 2]


def measure(readers: tuple[int, ...], spreads: tuple[float, ...], segments: int, log: IO[str],
            lone: bool = True) -> dict:
    rows: list[dict] = []
    lone_s: dict[str, float] = {}
    with Bed(max(readers), segments, log) as bed:
        for replication in (False, True):
            mode = "on" if replication else "off"
            with Pool(bed, replication) as pool:
                lone_s[mode] = lone_block_time(pool, 1000 * (1 + replication))
                row_spreads = [*spreads, lone_s[mode]] if lone else list(spreads)
                for n in readers:
                    for s, spread in enumerate(row_spreads):
                        key = f"hot-{mode}-{n}-{s}"
                        seed = zlib.crc32(key.encode())
                        digest = pool.put(key, seed)
                        row = pool.read(key, digest, n, spread)
                        row.update(replication=mode, spread_label="lone block time" if s == len(spreads) else
                                   f"{1000 * spread:g} ms")
                        rows.append(row)
                        _say_row(row)
                    # The last key again, after the heat window: a replica made meanwhile may now take reads.
                    time.sleep(AGAIN_AFTER_S)
                    row = pool.read(key, digest, n, 0.0)
                    row.update(replication=mode, spread_label=f"0 ms, same key again after {AGAIN_AFTER_S:g} s")
                    rows.append(row)
                    _say_row(row)
    return {"block_bytes": BLOCK_BYTES, "segments": segments, "lone_block_time_s": lone_s, "rows": rows,
            "bed": "network namespaces over veth into one Linux bridge (no line rate), 2 shared cores",
            "mooncake": "mooncake-transfer-engine-non-cuda 0.3.13.post1, TCP"}


def _say_row(row: dict) -> None:
    print(f"   dynamic replication {row['replication']}, N = {row['readers']}, spread {row['spread_label']}: "
          f"busiest {row['busiest_blocks_per_read']:.2f} blocks/read, p50 {row['p50_s']:.3f} s, "
          f"p99 {row['p99_s']:.3f} s, {row['verified']}/{row['readers']} verified", flush=True)


def table(result: dict) -> str:
    lines = ["| dynamic replication | N | start spread | busiest node blocks / read | all nodes blocks / read | "
             "bytes per node (MiB) | replicas listed after | p50 s | p99 s | verified / failed |",
             "|---|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in result["rows"]:
        spread = r["spread_label"] + (f" ({1000 * r['spread_s']:.0f} ms)" if r["spread_label"].startswith("lone")
                                      else "")
        nodes = " / ".join(f"{b / 2**20:.0f}" for b in r["node_bytes"])
        lines.append(f"| {r['replication']} | {r['readers']} | {spread} | {r['busiest_blocks_per_read']:.3f} | "
                     f"{r['total_blocks_per_read']:.3f} | {nodes} | {r.get('replicas_after', '-')} | "
                     f"{r['p50_s']:.3f} | {r['p99_s']:.3f} | "
                     f"{r['verified']} / {r['failed']} |")
    lone = ", ".join(f"{k}: {1000 * v:.0f} ms" for k, v in result["lone_block_time_s"].items())
    return "\n".join([f"{result['block_bytes'] >> 20} MiB key, {result['segments']} storage segments, "
                      f"{result['mooncake']}; {result['bed']}. One lone reader's block time: {lone}.", "",
                      *lines])


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in result["rows"]:
        if "again" in r["spread_label"]:
            continue  # a second read of a warm key, not a point of the spread axis
        groups.setdefault((r["replication"], r["readers"]), []).append(r)
    for (mode, n), rows in sorted(groups.items()):
        rows = sorted(rows, key=lambda r: r["spread_s"])
        xs = [1000 * r["spread_s"] for r in rows]
        style = "-" if mode == "off" else "--"
        left.plot(xs, [r["busiest_blocks_per_read"] for r in rows], style, marker="o",
                  label=f"replication {mode}, N={n}")
        right.plot(xs, [r["p99_s"] for r in rows], style, marker="o", label=f"replication {mode}, N={n}")
    left.set(xscale="symlog", xlabel="start spread (ms)", ylabel="busiest node: blocks sent per block read",
             title="Mooncake Store, one hot 16 MiB key")
    right.set(xscale="symlog", xlabel="start spread (ms)", ylabel="p99 completion (s)")
    left.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(out: Path, quick: bool = False, readers: tuple[int, ...] = READERS,
        spreads: tuple[float, ...] = SPREADS_S, segments: int = SEGMENTS) -> dict:
    if os.geteuid() != 0:
        raise PermissionError("bench mooncake_fanout builds network namespaces: run it as root")
    out.mkdir(parents=True, exist_ok=True)
    if quick:
        readers, spreads = (4,), (0.0, 0.05)
    with (out / f"{NAME}.log").open("w") as log:
        result = measure(readers, spreads, segments, log, lone=not quick)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    (out / f"{NAME}.md").write_text(table(result) + "\n")
    plot(result, out / f"{NAME}.png")
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_agent"]:
        return _agent(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.mooncake_fanout", description=__doc__.splitlines()[0])
    parser.add_argument("--readers", default=",".join(map(str, READERS)), help="N values (default 8,16,32)")
    parser.add_argument("--spreads", default=",".join(f"{s:g}" for s in SPREADS_S),
                        help="start spreads in s (the lone reader's block time is added; default 0,0.05,0.5)")
    parser.add_argument("--segments", type=int, default=SEGMENTS, help="storage segments (default 2)")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    run(args.out, readers=tuple(int(x) for x in args.readers.split(",")),
        spreads=tuple(float(x) for x in args.spreads.split(",")), segments=args.segments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
