"""`make demo`: start the testbed, replay a trace excerpt from the inference hosts, report, plot, stop.

The excerpt is the first `requests` lines of a Mooncake-format JSONL trace (`timestamp` in ms, `hash_ids`
of 512-token blocks, `input_length`). Block ids become prefix hashes with `kvpool.prefix_hash`; requests are
dealt round-robin to h1..hN and keep their relative arrival times, squeezed into `duration` seconds. Each
host runs `topo.host_replay`. The report gives the switch hit ratio, the storage node's own GET count for the
hottest blocks (STAT over the management link) against what the clients asked, and latency percentiles of
chunks served by the switch vs the storage node; `demo.png` plots both.

Then the burst: one 16 MiB block (a shared system prompt) is written once, and every host reads it at the same
instant, twice in the same run: through the switch (GETs coalesced) and with F_BYPASS (`--bypass`: never
coalesced nor answered by the switch), the baseline. Each host's reader is started ahead and sleeps until a
shared wall-clock instant, so the reads arrive together; each checks the bytes it got. The storage node's
fan-in is what its data interface received and sent during each burst (the kernel's counters: nothing else runs
then), cross-checked by STAT on a sample of the block's chunks (STAT of all 2,048 chunks is too slow).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from kvpool.client import ClientOptions, KVPClient, KVPError
from kvpool.constants import PREFIX_BLOCK_TOKENS
from kvpool.prefix_hash import BlockIdHasher
from topo.switches import REPO, TestbedError
from topo.testbed import Testbed, TestbedOptions
from topo.topologies import STORAGE_IP


@dataclass(frozen=True)
class DemoOptions:
    trace: Path
    """Mooncake-format JSONL."""
    out: Path
    """Folder for report.md, results.json, demo.png and the raw per-host results."""
    requests: int = 300
    """How many requests from the start of the trace."""
    block_bytes: int = 256
    """Bytes of each KV block in the demo (real blocks are MBs; 256 B = 2 chunks keeps the replay quick)."""
    duration: float = 20.0
    """Seconds the excerpt's arrival times are squeezed into (0 = as fast as possible)."""
    announce: bool = False
    """Send INSERT for every stored block. Off by default: then the switch's hot-key digests alone drive
    admission, which is the demo's story (the shared first block turns hot and the switch absorbs its
    incast), and the controller is not flooded with one INSERT per stored chunk."""
    hot_blocks: int = 10
    """How many of the most requested blocks the report and plot show."""
    timeout: float = 900.0
    """Seconds the replay may take at most."""
    burst_bytes: int = 16 << 20
    """Size of the block all hosts read at once (0: no burst)."""
    burst_timeout: float = 60.0
    """Seconds each of the two bursts may take at most."""


BURST_CHUNK_BYTES = 8192
"""Chunk size of the burst block: 8 KiB chunks fit the testbed's MTU of 9000."""
BURST_PREFIX_HASH = int.from_bytes(hashlib.sha256(b"kvswitch demo: shared system prompt").digest()[:8], "big")
BURST_LEAD_SECONDS = 4.0
"""Time from starting the readers to releasing them: enough for each to import the client and sleep."""
BURST_SAMPLE_CHUNKS = 16
"""Chunks of the burst block whose storage-node GET count is read with STAT (evenly spread)."""
_RELEASE = ("import sys, time\n"
            "from kvpool.client import main\n"
            "time.sleep(max(0.0, float(sys.argv[1]) - time.time()))\n"
            "t0 = time.time()\n"
            "rc = main(sys.argv[2:])\n"
            "print(f'released {t0:.6f} done {time.time():.6f}', flush=True)\n"
            "sys.exit(rc)\n")
"""A reader: sleeps until the shared instant (argv[1]), then runs `python -m kvpool.client argv[2:]`."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    timestamp_ms: int
    hash_ids: tuple[int, ...]
    input_length: int


def load_excerpt(path: Path, limit: int) -> list[TraceRequest]:
    """The first `limit` requests; errors name the file and line."""
    if not path.exists():
        raise TestbedError(f"{path}: trace not found (set TRACE=path.jsonl; the default is the shipped "
                           "data/traces/mooncake_conversation_excerpt.jsonl)")
    if not path.is_file():
        raise TestbedError(f"{path}: not a file; name a Mooncake-format JSONL trace inside it")
    out: list[TraceRequest] = []
    with path.open() as f:
        for lineno, line in enumerate(f, start=1):
            if len(out) >= limit:
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                ids = tuple(int(x) for x in row["hash_ids"])
                out.append(TraceRequest(int(row["timestamp"]), ids,
                                        int(row.get("input_length", len(ids) * PREFIX_BLOCK_TOKENS))))
            except (ValueError, KeyError, TypeError) as exc:
                raise TestbedError(f"{path}:{lineno}: not a Mooncake trace line ({exc})") from None
    if not out:
        raise TestbedError(f"{path}: no requests")
    return out


def block_tokens(request: TraceRequest) -> list[int]:
    """Tokens each block covers: 512, the last one what is left of input_length (at least 1)."""
    n = len(request.hash_ids)
    return [max(1, min(PREFIX_BLOCK_TOKENS, request.input_length - d * PREFIX_BLOCK_TOKENS)) for d in range(n)]


def deal(requests: list[TraceRequest], hosts: list[str], duration: float) -> dict[str, list[dict]]:
    """Round-robin the requests over the hosts, arrival times scaled into [0, duration]."""
    hasher = BlockIdHasher()
    t0 = requests[0].timestamp_ms
    span = max(1, requests[-1].timestamp_ms - t0)
    work: dict[str, list[dict]] = {h: [] for h in hosts}
    for i, r in enumerate(requests):
        work[hosts[i % len(hosts)]].append({
            "i": i, "t": (r.timestamp_ms - t0) / span * duration if duration > 0 else 0.0,
            "blocks": hasher.hashes(r.hash_ids), "tokens": block_tokens(r)})
    return work


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {"n": len(values), "p50": qs[49], "p90": qs[89], "p99": qs[98]}


def summarise(records: list[dict], stats: dict[int, int], hot: int) -> dict:
    """The report's numbers from the hosts' result records and the storage node's STAT counts."""
    chunk_lat: dict[str, list[float]] = {"HIT_SWITCH": [], "HIT_SERVER": []}
    outcomes: Counter[str] = Counter()
    miss_us: list[float] = []
    asked: Counter[int] = Counter()
    wrong = 0
    for rec in records:
        for g in rec["gets"]:
            outcomes[g["outcome"]] += 1
            asked[g["ph"]] += 1
            if g["outcome"] == "MISS":
                miss_us.append(g["us"])
            for status, us in g.get("chunks", []):
                chunk_lat.setdefault(status, []).append(us)
            wrong += g.get("correct") is False
    chunk_total = sum(len(v) for v in chunk_lat.values())
    hot_list = [{"prefix_hash": f"{ph:#018x}", "client_gets": n, "storage_gets": stats.get(ph)}
                for ph, n in asked.most_common(hot)]
    return {
        "requests": len(records),
        "block_gets": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "switch_hit_ratio_chunks": len(chunk_lat["HIT_SWITCH"]) / chunk_total if chunk_total else 0.0,
        "switch_hit_ratio_blocks": outcomes["HIT_SWITCH"] / max(1, sum(outcomes.values())),
        "wrong_blocks": wrong,
        "puts": sum(r["puts"] for r in records),
        "inserts": sum(r["inserts"] for r in records),
        "errors": sum(r["errors"] for r in records),
        "latency_us": {"HIT_SWITCH": percentiles(chunk_lat["HIT_SWITCH"]),
                       "HIT_SERVER": percentiles(chunk_lat["HIT_SERVER"]), "MISS (block)": percentiles(miss_us)},
        "hot_blocks": hot_list,
        "_chunk_latencies": chunk_lat,
    }


def render(summary: dict, options: TestbedOptions) -> str:
    lines = [f"# kvswitch demo: {summary['requests']} requests, {options.hosts} hosts, {options.topology} topology, "
             f"target {options.target}", "",
             f"- block GETs: {summary['block_gets']} ({', '.join(f'{k} {v}' for k, v in sorted(summary['outcomes'].items()))})",
             f"- switch hit ratio: {summary['switch_hit_ratio_chunks']:.3f} of chunks, "
             f"{summary['switch_hit_ratio_blocks']:.3f} of block GETs",
             f"- blocks stored: {summary['puts']}, announced (INSERT): {summary['inserts']}, errors: {summary['errors']}, "
             f"wrong contents read: {summary['wrong_blocks']}", "",
             "| served by | chunks | p50 µs | p90 µs | p99 µs |", "|---|---:|---:|---:|---:|"]
    for name, p in summary["latency_us"].items():
        if p:
            lines.append(f"| {name} | {p['n']} | {p['p50']:.0f} | {p['p90']:.0f} | {p['p99']:.0f} |")
        else:
            lines.append(f"| {name} | 0 | – | – | – |")
    lines += ["", "Hottest blocks: GETs the clients sent vs GETs the storage node saw (STAT, chunk 0):", "",
              "| prefix hash | client GETs | storage-node GETs |", "|---|---:|---:|"]
    for h in summary["hot_blocks"]:
        seen = "?" if h["storage_gets"] is None else h["storage_gets"]
        lines.append(f"| {h['prefix_hash']} | {h['client_gets']} | {seen} |")
    if summary.get("burst"):
        lines += render_burst(summary["burst"])
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    burst = summary.get("burst")
    fig, axes = plt.subplots(1, 3 if burst else 2, figsize=(16.5 if burst else 11, 4))
    left, right = axes[0], axes[1]
    if burst:
        plot_burst(axes[2], burst)
    for name, values in summary["_chunk_latencies"].items():
        if values:
            xs = np.sort(values)
            left.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=f"{name} ({len(xs)})")
    left.set_xscale("log")
    left.set_xlabel("chunk GET latency (µs)")
    left.set_ylabel("CDF")
    left.set_title("latency by who answered")
    left.legend()
    hot = summary["hot_blocks"]
    x = np.arange(len(hot))
    right.bar(x - 0.2, [h["client_gets"] for h in hot], 0.4, label="GETs sent by clients")
    right.bar(x + 0.2, [h["storage_gets"] or 0 for h in hot], 0.4, label="GETs reaching the storage node")
    right.set_xticks(x, [h["prefix_hash"][-4:] for h in hot], rotation=45)
    right.set_xlabel("hottest blocks (prefix hash, last 4 hex digits)")
    right.set_title("incast absorbed by the switch")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_demo(testbed: TestbedOptions, options: DemoOptions) -> str:
    """The whole demo; returns the report (also written to `options.out/report.md`)."""
    from tqdm import tqdm

    requests = load_excerpt(options.trace, options.requests)
    options.out.mkdir(parents=True, exist_ok=True)
    bed = Testbed(testbed)
    hosts = [h.name for h in bed.plan.inference_hosts]
    work = deal(requests, hosts, options.duration)
    with bed:
        assert bed.net is not None
        start_at = time.time() + 2.0
        workers = []
        for name in hosts:
            work_file = options.out / f"work-{name}.json"
            work_file.write_text(json.dumps({"start_at": start_at, "block_bytes": options.block_bytes,
                                             "announce": options.announce, "tenant": 0,
                                             "requests": work[name]}))
            result_file = options.out / f"results-{name}.jsonl"
            result_file.write_text("")
            log = (options.out / f"replay-{name}.log").open("wb")
            proc = bed.net[name].popen([sys.executable, "-m", "topo.host_replay", "--server", STORAGE_IP,
                                        "--work", str(work_file), "--out", str(result_file), "--host", name],
                                       stdout=log, stderr=log, cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
            workers.append((name, proc, result_file, log))
        deadline = time.monotonic() + options.duration + options.timeout
        try:
            with tqdm(total=len(requests), desc="replaying", unit="req") as bar:
                while any(p.poll() is None for _, p, _, _ in workers):
                    bar.update(sum(_lines(f) for _, _, f, _ in workers) - bar.n)
                    if time.monotonic() > deadline:
                        raise TestbedError(f"replay did not finish within {options.timeout:.0f} s")
                    time.sleep(0.5)
                bar.update(sum(_lines(f) for _, _, f, _ in workers) - bar.n)
        finally:  # on timeout, Ctrl-C or SIGTERM: no worker outlives the testbed
            for _, p, _, _ in workers:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for name, proc, _, log in workers:
            log.close()
            if proc.returncode != 0:
                raise TestbedError(f"replay on {name} failed (status {proc.returncode}); see "
                                   f"{options.out / f'replay-{name}.log'}")
        records = [json.loads(line) for _, _, f, _ in workers for line in f.read_text().splitlines() if line]
        asked: Counter[int] = Counter(g["ph"] for r in records for g in r["gets"])
        stats: dict[int, int] = {}
        with KVPClient(ClientOptions(server=bed.storage_address, timeout=0.5, retries=3)) as client:
            for ph, _ in asked.most_common(options.hot_blocks):
                with contextlib.suppress(KVPError):
                    stats[ph] = client.stat(ph, 0)
        burst = None
        if options.burst_bytes > 0:
            print(f"burst: {len(hosts)} hosts read one {options.burst_bytes / 2**20:.0f} MiB block at once, "
                  "coalesced then bypassed", file=sys.stderr, flush=True)
            burst = run_burst(bed, hosts, options)
    summary = summarise(records, stats, options.hot_blocks)
    if burst is not None:
        summary["burst"] = burst
    report = render(summary, dataclasses.replace(testbed, hosts=len(hosts)))
    (options.out / "report.md").write_text(report)
    (options.out / "results.json").write_text(json.dumps(
        {k: v for k, v in summary.items() if not k.startswith("_")}, indent=2) + "\n")
    plot(summary, options.out / "demo.png")
    return report + f"\nwritten: {options.out / 'report.md'}, {options.out / 'demo.png'}"


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


# ---- the burst: every host reads one big shared block at once, with and without coalescing -----------------

BURST_MODES = {"coalescing": False, "bypass": True}
"""The two bursts, in the order they run: name → F_BYPASS. Coalescing runs first, so the baseline cannot have
warmed anything for it."""


@dataclass(frozen=True, slots=True)
class InterfaceCounters:
    """The kernel's counters of a storage node's data interface (what it received and sent)."""

    rx_packets: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0

    def __sub__(self, other: InterfaceCounters) -> InterfaceCounters:
        return InterfaceCounters(self.rx_packets - other.rx_packets, self.tx_packets - other.tx_packets,
                                 self.tx_bytes - other.tx_bytes)

    def __add__(self, other: InterfaceCounters) -> InterfaceCounters:
        return InterfaceCounters(self.rx_packets + other.rx_packets, self.tx_packets + other.tx_packets,
                                 self.tx_bytes + other.tx_bytes)


def sample_chunks(chunks: int, n: int = BURST_SAMPLE_CHUNKS) -> list[int]:
    """`n` chunk indices spread evenly over the block, first and last included."""
    if chunks <= n:
        return list(range(chunks))
    return sorted({round(i * (chunks - 1) / (n - 1)) for i in range(n)})


def reader_record(host: str, log_text: str, got: bytes | None, expected_sha256: str, returncode: int | None) -> dict:
    """One reader's outcome from its output: verified (its bytes hash to the block's), who answered its chunks,
    retries, and the seconds from the release to the whole block."""
    statuses = Counter(re.findall(r"^\s+chunk \d+: (\w+) ", log_text, flags=re.MULTILINE))
    tries = [int(t) for t in re.findall(r"\((\d+) tries\)", log_text)]
    timing = re.search(r"released ([\d.]+) done ([\d.]+)", log_text)
    return {"host": host, "returncode": returncode,
            "verified": got is not None and hashlib.sha256(got).hexdigest() == expected_sha256,
            "bytes": 0 if got is None else len(got),
            "chunks_by_status": dict(statuses), "retries": sum(t - 1 for t in tries),
            "seconds": float(timing[2]) - float(timing[1]) if timing else None}


def burst_mode(readers: list[dict], traffic: InterfaceCounters, stat_gets: int, sampled: int) -> dict:
    """One burst's figures: the readers, and the storage node's fan-in (GETs received) and what it sent."""
    return {"readers": readers, "all_verified": bool(readers) and all(r["verified"] for r in readers),
            "storage_gets": traffic.rx_packets, "storage_replies": traffic.tx_packets,
            "storage_bytes_sent": traffic.tx_bytes,
            "stat_sample": {"chunks": sampled, "gets": stat_gets,
                            "gets_per_chunk": stat_gets / sampled if sampled else None}}


def render_burst(burst: dict) -> list[str]:
    """The report's burst section."""
    modes = burst["modes"]
    lines = ["", f"## Burst: {burst['hosts']} hosts read one {burst['block_bytes'] / 2**20:.0f} MiB block at once",
             "", f"Block {burst['prefix_hash']} ({burst['chunks']} chunks of {burst['chunk_bytes']} B), written once, "
             "then read by every host at one instant: through the switch (GETs coalesced) and with F_BYPASS "
             "(never coalesced nor answered by the switch). Storage-node figures are its data interface's "
             f"counters during each burst; STAT counts GETs on {burst['sample_chunks']} sampled chunks.", "",
             "| burst | readers verified | storage-node GET datagrams (a span GET asks for up to 16 chunks) | "
             "storage-node replies (chunks sent) | MiB sent | "
             "GETs per sampled chunk (STAT) | chunks from switch | slowest reader s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in modes.items():
        ok = sum(r["verified"] for r in m["readers"])
        per_chunk = m["stat_sample"]["gets_per_chunk"]
        from_switch = sum(r["chunks_by_status"].get("HIT_SWITCH", 0) for r in m["readers"])
        slowest = max((r["seconds"] for r in m["readers"] if r["seconds"] is not None), default=None)
        lines.append(f"| {'coalescing (switch)' if name == 'coalescing' else 'bypass (no coalescing)'} | "
                     f"{ok}/{len(m['readers'])} | {m['storage_gets']} | {m['storage_replies']} | "
                     f"{m['storage_bytes_sent'] / 2**20:.1f} | {'?' if per_chunk is None else f'{per_chunk:.2f}'} | "
                     f"{from_switch} | {'?' if slowest is None else f'{slowest:.1f}'} |")
    if {"coalescing", "bypass"} <= modes.keys() and modes["coalescing"]["storage_replies"]:
        ratio = modes["bypass"]["storage_replies"] / modes["coalescing"]["storage_replies"]
        lines += ["", f"Coalescing cut what the storage node sent {ratio:.1f}× "
                  f"({modes['bypass']['storage_replies']} → {modes['coalescing']['storage_replies']} chunks)."]
    return lines


def plot_burst(axis, burst: dict) -> None:
    """Chunks and MiB the storage node sent, with and without coalescing, side by side."""
    import numpy as np

    names = list(burst["modes"])
    x = np.arange(2)
    for i, name in enumerate(names):
        m = burst["modes"][name]
        values = [m["storage_replies"] / burst["chunks"], m["storage_bytes_sent"] / burst["block_bytes"]]
        bars = axis.bar(x + (i - 0.5) * 0.4, values, 0.4, label=f"{name} ({m['storage_replies']} chunks, "
                        f"{m['storage_bytes_sent'] / 2**20:.0f} MiB)")
        axis.bar_label(bars, fmt="%.2f")
    axis.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axis.set_xticks(x, ["chunks sent\n(per chunk of the block)", "bytes sent\n(per byte of the block)"])
    axis.set_title(f"burst: {burst['hosts']} hosts read {burst['block_bytes'] / 2**20:.0f} MiB at once")
    axis.set_ylim(0, 1.35 * max(burst["modes"][n]["storage_replies"] / burst["chunks"] for n in names) + 0.1)
    axis.legend(fontsize=8, loc="upper left")


def run_burst(bed: Testbed, hosts: list[str], options: DemoOptions) -> dict:
    """Write the burst block once, then read it from every host at one instant, coalesced and bypassed."""
    assert bed.net is not None
    folder = options.out / "burst"
    folder.mkdir(parents=True, exist_ok=True)
    data = os.urandom(options.burst_bytes)
    source = folder / "block.bin"
    source.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    chunks = -(-len(data) // BURST_CHUNK_BYTES)
    version = int(time.time()) & 0x7FFFFFFF  # a fresh version each run: a kept storage tier (--resume) never conflicts
    common = ["--server", bed.storage_address[0], "--chunk-size", str(BURST_CHUNK_BYTES), "--timeout", "1.0", "--retries", "5"]
    _host_command(bed, hosts[0], [sys.executable, "-m", "kvpool.client", *common, "put", hex(BURST_PREFIX_HASH),
                                  "--version", str(version), "--file", str(source)],
                  folder / "put.log", options.burst_timeout)
    sample = sample_chunks(chunks)
    modes = {}
    for name, bypass in BURST_MODES.items():
        stat_before = _stat_sample(bed, sample)
        before = _storage_traffic(bed)
        start_at = time.time() + BURST_LEAD_SECONDS
        readers = []
        for host in hosts:
            out = folder / f"{name}-{host}.bin"
            out.unlink(missing_ok=True)
            log_path = folder / f"{name}-{host}.log"
            log = log_path.open("wb")
            argv = [sys.executable, "-c", _RELEASE, f"{start_at:.6f}", *common, *(["--bypass"] if bypass else []),
                    "get", hex(BURST_PREFIX_HASH), "--chunks", str(chunks), "--version", str(version),
                    "--out", str(out)]
            proc = bed.net[host].popen(argv, stdout=log, stderr=log, cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
            readers.append((host, proc, out, log_path, log))
        _wait_all([p for _, p, _, _, _ in readers], BURST_LEAD_SECONDS + options.burst_timeout, f"burst ({name})")
        time.sleep(0.5)  # late replies (retries) land before the counters are read
        traffic = _storage_traffic(bed) - before
        stat_after = _stat_sample(bed, sample)
        records = []
        for host, proc, out, log_path, log in readers:
            log.close()
            got = out.read_bytes() if out.exists() else None
            records.append(reader_record(host, log_path.read_text(errors="replace"), got, expected, proc.returncode))
            out.unlink(missing_ok=True)  # 16 MiB per reader: keep only the verdict
        modes[name] = burst_mode(records, traffic, sum(stat_after.values()) - sum(stat_before.values()), len(sample))
    source.unlink()
    return {"prefix_hash": f"{BURST_PREFIX_HASH:#018x}", "version": version, "block_bytes": len(data),
            "chunk_bytes": BURST_CHUNK_BYTES, "chunks": chunks, "hosts": len(hosts),
            "sample_chunks": len(sample), "modes": modes}


def _host_command(bed: Testbed, host: str, argv: list[str], log_path: Path, timeout: float) -> None:
    assert bed.net is not None
    with log_path.open("wb") as log:
        proc = bed.net[host].popen(argv, stdout=log, stderr=log, cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
        _wait_all([proc], timeout, f"{argv[3:5]} on {host}")
    if proc.returncode != 0:
        raise TestbedError(f"{' '.join(argv[2:4])} on {host} failed (status {proc.returncode}); see {log_path}")


def _wait_all(procs: list, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                raise TestbedError(f"{what} did not finish within {timeout:.0f} s")
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _storage_traffic(bed: Testbed) -> InterfaceCounters:
    """Summed over the storage nodes: their data interface (stI-eth0) counters, read in their namespace."""
    assert bed.net is not None
    total = InterfaceCounters()
    for ep in bed.plan.storage_nodes:
        base = f"/sys/class/net/{ep.name}-eth0/statistics"
        out = bed.net[ep.name].cmd(f"cat {base}/rx_packets {base}/tx_packets {base}/tx_bytes").split()
        total = total + InterfaceCounters(*(int(v) for v in out[:3]))
    return total


def _stat_sample(bed: Testbed, chunks: list[int]) -> dict[int, int]:
    """GETs the storage node has seen for these chunks of the burst block (STAT over the management link)."""
    counts: dict[int, int] = {}
    with KVPClient(ClientOptions(server=bed.storage_address, timeout=0.5, retries=3)) as client:
        for idx in chunks:
            with contextlib.suppress(KVPError):
                counts[idx] = client.stat(BURST_PREFIX_HASH, idx)
    return counts
