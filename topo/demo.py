"""`make demo`: start the testbed, replay a trace excerpt from the inference hosts, report, plot, stop.

The excerpt is the first `requests` lines of a Mooncake-format JSONL trace (`timestamp` in ms, `hash_ids`
of 512-token blocks, `input_length`). Block ids become prefix hashes with `kvpool.prefix_hash`; requests are
dealt round-robin to h1..hN and keep their relative arrival times, squeezed into `duration` seconds. Each
host runs `topo.replay`. The report gives the switch hit ratio, the storage node's own GET count for the
hottest blocks (STAT over the management link) against what the clients asked, and latency percentiles of
chunks served by the switch vs the storage node; `demo.png` plots both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
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
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
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
            proc = bed.net[name].popen([sys.executable, "-m", "topo.replay", "--server", STORAGE_IP,
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
    summary = summarise(records, stats, options.hot_blocks)
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
