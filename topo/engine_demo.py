"""`make demo ENGINE=vllm`: the trace excerpt through real vLLM engines, with the pool and without it, same run.

1. Requests. From the shipped excerpt (Mooncake format: `hash_ids` of prefix-chained blocks), the first
   `requests` that share a prefix of at least two blocks with an earlier request, together with that earlier
   request (`select_sharing`), in trace order. Each hash id becomes a fixed sequence of `tokens_per_id` token ids
   (`tokens_of`: seeded by the id, the same on every run and host), a prompt at most `max_ids` ids long, so
   requests that share hash ids share a token prefix.
2. Engines (`topo.engines`): on every inference host a vLLM server with the kvswitch connector (the pool through
   the switch) and one without (the baseline); vLLM's own prefix cache is off in both.
3. Calibration: full prefills of fresh prompts of several lengths on both engines of h1, before and after the
   replay and one between every two requests (each engine's prefill rate, the pool engine's with its connector's
   cost of a miss), and whole-block reads through the switch from h1 before and from the last host after the
   replay, each of a fresh block, with nothing else running; each size's median is fitted by
   `evaluation.calibration`. The model is priced with the pool read rate the engines' connectors achieved (their
   counters), which a client reading alone exceeds.
4. Replay: requests dealt round-robin to the hosts, one at a time in trace order (after each, until the storage
   node is quiet, so its saves are in the pool before the next one looks); each goes to its host's baseline, then to its
   pool engine (`topo.engine_client`): TTFT, tokens, top log-probabilities, cached (external-hit) tokens.
5. Report (`out/demo/report.md`, `results.json`, `ttft.png`): per request TTFT with and without the pool and
   the external-hit tokens; whether every generated token and its top-5 log-probabilities match; the storage
   node's data-interface counters, the switch controller's metrics and the connectors' counters; the calibration
   table (the evaluator's TTFT model against the measured means).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from evaluation.calibration import (
    Calibration,
    PrefillSample,
    compare,
    fit_pool_read,
    fit_prefill,
    model_from_hf_config,
)
from evaluation.calibration import render as render_calibration
from topo.demo import TraceRequest, _storage_traffic, load_excerpt
from topo.engines import (
    BASELINE_PORT,
    POOL_PORT,
    EngineEndpoint,
    EngineOptions,
    connector_stats,
    start_engines,
)
from topo.switches import REPO, TestbedError
from topo.testbed import Testbed, TestbedOptions

FIRST_TOKEN_ID = 3
"""Token ids below this are the presets' special tokens (BOS 1, EOS 2): prompts never use them."""
LOGPROB_TOLERANCE = 1e-3
"""Largest difference of a top log-probability between the two engines that still counts as the same: the
pool engine computes on top of loaded KV in other batch shapes than a full prefill, so the last bits may
differ; a wrong cache moves them by far more (and changes the tokens)."""


@dataclass(frozen=True)
class EngineDemoOptions:
    trace: Path
    out: Path
    requests: int = 24
    """How many requests to replay (sharing ones and the ones they share with)."""
    tokens_per_id: int = 256
    """Tokens each trace hash id becomes (one pool block of the connector's 256)."""
    max_ids: int = 12
    """Longest prompt, in hash ids (12 × 256 = 3,072 tokens, under the engines' 4,096)."""
    max_tokens: int = 8
    """Tokens generated per request."""
    settle_s: float = 0.3
    """After each request, wait until the storage node has received nothing for this long (at most
    `settle_max_s`): the request's background saves are then in the pool before the next request looks, and no
    save competes with the next request for the CPU."""
    settle_max_s: float = 20.0
    vocab: int = 2048
    """The presets' vocabulary size."""
    calibration_lengths: tuple[int, ...] = (256, 1024, 2048, 3072, 4000)
    """Prompt lengths of the prefill-rate sweep."""
    calibration_repeats: int = 3
    """Prefills of each length; the fit takes each length's median (a busy machine adds outliers)."""


PREFILL_BOUND_SIZES = {"requests": 8, "max_ids": 8, "calibration_lengths": (256, 1024, 2048),
                       "calibration_repeats": 2}
"""The demo's sizes for the `prefill-bound` preset, which prefills ~30x slower per token than `tiny`: 8 requests
of at most 2,048 tokens and a shorter calibration sweep keep the demo to a few minutes on the 2-core machine."""


def options_for_preset(preset: str, trace: Path, out: Path, requests: int | None = None) -> EngineDemoOptions:
    """The demo's options for `preset`: the defaults, or smaller sizes for a preset that prefills slowly;
    `requests` (when given) overrides the number of requests."""
    sizes: dict = dict(PREFILL_BOUND_SIZES) if preset == "prefill-bound" else {}
    if requests is not None:
        sizes["requests"] = requests
    return EngineDemoOptions(trace=trace, out=out, **sizes)


# ---- requests -----------------------------------------------------------------------------------------------------

def tokens_of(hash_id: int, count: int, vocab: int) -> list[int]:
    """The fixed token ids hash id `hash_id` stands for: a generator seeded by the id's BLAKE2b digest."""
    seed = hashlib.blake2b(hash_id.to_bytes(8, "little"), digest_size=8, person=b"kvswitch-demo").digest()
    rng = random.Random(int.from_bytes(seed, "little"))
    return [rng.randrange(FIRST_TOKEN_ID, vocab) for _ in range(count)]


def prompt_of(request: TraceRequest, options: EngineDemoOptions) -> list[int]:
    return [t for h in request.hash_ids[:options.max_ids] for t in tokens_of(h, options.tokens_per_id, options.vocab)]


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def select_sharing(requests: list[TraceRequest], limit: int, max_ids: int) -> list[int]:
    """Indices (in trace order) of the first requests that share at least two leading hash ids (within `max_ids`)
    with an earlier request, each with the latest such earlier request, until `limit` are chosen."""
    chosen: set[int] = set()
    prefixes = [r.hash_ids[:max_ids] for r in requests]
    for j in range(len(requests)):
        if len(chosen) >= limit:
            break
        best, parent = 1, None
        for p in range(j - 1, -1, -1):
            shared = _common(prefixes[p], prefixes[j])
            if shared > best:
                best, parent = shared, p
        if parent is not None:
            chosen.update((parent, j))
    return sorted(chosen)[:max(limit, 0)]


# ---- measurements -------------------------------------------------------------------------------------------------

_READ_RATE = """
import json, os, sys, time
from kvpool.client import ClientOptions, KVPClient
server, sizes, reads = sys.argv[1], [int(s) for s in sys.argv[2].split(',')], int(sys.argv[3])
out = []
with KVPClient(ClientOptions(server=(server, 7420), tenant=0xFFFF, timeout=1.0, retries=5, chunk_size=8192)) as c:
    for size in sizes:
        for _ in range(reads):
            key = int.from_bytes(os.urandom(8), 'big')
            c.put_block(key, os.urandom(size), 1, 8192)
            t0 = time.perf_counter()
            got = c.get_block(key)
            out.append((len(got.data), time.perf_counter() - t0))
print(json.dumps(out))
"""
"""Run on a host: for each size, `reads` times: write a fresh block, read it once through the switch (as an
engine reads a block: from the storage node, before the switch has seen it hot); print (bytes, s)."""


def measure_pool_reads(bed: Testbed, host: str, sizes: list[int], reads: int = 4) -> list[tuple[int, float]]:
    assert bed.net is not None
    done = bed.net[host].popen([sys.executable, "-c", _READ_RATE, bed.storage_address[0],
                                ",".join(map(str, sizes)), str(reads)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
    out, err = done.communicate(timeout=600)
    if done.returncode != 0:
        raise TestbedError(f"pool read measurement on {host} failed: {err.decode(errors='replace')[-500:]}")
    return [(int(b), float(s)) for b, s in json.loads(out)]


Sweep = dict[str, list[tuple[int, float]]]
"""Per engine role (baseline, pool): (prompt tokens, TTFT s) of full prefills of fresh prompts."""


def sweep_once(clients: HostClients, host: str, options: EngineDemoOptions, n: int, length: int,
               sweep: Sweep) -> None:
    """One fresh prompt of `length` tokens (ids no trace uses), fully prefilled by both engines of `host`: the
    pool engine misses the pool and pays its connector's cost of a miss (the lookup, the saves after it)."""
    prompt = tokens_of((1 << 62) + n * 100_000 + length, length, options.vocab)
    answer = clients.ask(host, {"i": -1, "prompt": prompt, "max_tokens": 1,
                                "targets": [["baseline", BASELINE_PORT], ["pool", POOL_PORT]]})
    for role, result in answer["results"].items():
        if result.get("ttft_s") is not None:
            sweep.setdefault(role, []).append((length, result["ttft_s"]))


def prefill_sweep(bed: Testbed, clients: HostClients, host: str, options: EngineDemoOptions, first: int,
                  sweep: Sweep) -> None:
    """`calibration_repeats` rounds of every length; after each prompt, until the pool engine's saves of it are
    done (as between the replay's requests), so no prefill is timed beside another's saves."""
    for n in range(first, first + options.calibration_repeats):
        for length in options.calibration_lengths:
            sweep_once(clients, host, options, n, length, sweep)
            wait_quiet(bed, options.settle_s, options.settle_max_s)


def wait_quiet(bed: Testbed, quiet_s: float, max_s: float) -> None:
    """Until the storage nodes have received no packet for `quiet_s` seconds, or `max_s` have passed."""
    deadline = time.monotonic() + max_s
    last = _storage_traffic(bed).rx_packets
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _storage_traffic(bed).rx_packets
        if now == last:
            return
        last = now


class HostClients:
    """One `topo.engine_client` per host, fed one request at a time."""

    def __init__(self, bed: Testbed, hosts: list[str], model: str, folder: Path) -> None:
        assert bed.net is not None
        self.procs: dict[str, subprocess.Popen] = {}
        for host in hosts:
            log = (folder / f"client-{host}.log").open("wb")
            self.procs[host] = bed.net[host].popen([sys.executable, "-m", "topo.engine_client", model],
                                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                                   cwd=str(REPO), env={"PYTHONPATH": str(REPO)})

    def ask(self, host: str, request: dict) -> dict:
        proc = self.procs[host]
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise TestbedError(f"the engine client on {host} ended (status {proc.poll()})")
        return json.loads(line)

    def close(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def switch_metrics(bed: Testbed) -> dict[str, float]:
    """The switch controllers' Prometheus counters whose names start with kvswitch_ (summed per name+labels)."""
    metrics: dict[str, float] = {}
    for sw in bed.plan.switches:
        url = bed.metrics_url(sw.device_id)
        if url is None:
            continue
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=5) as r:
                text = r.read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("kvswitch_") and " " in line:
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    metrics[name] = metrics.get(name, 0.0) + float(value)
    return metrics


# ---- comparison and report ----------------------------------------------------------------------------------------

def same_output(pool: dict, baseline: dict) -> tuple[bool, float]:
    """Whether both engines generated the same tokens with the same top-5 tokens per step, and the largest
    difference of a top log-probability between them."""
    if pool.get("error") or baseline.get("error") or pool.get("tokens") != baseline.get("tokens"):
        return False, float("inf")
    worst = 0.0
    for a, b in zip(pool["top_logprobs"], baseline["top_logprobs"], strict=True):
        if set(a) != set(b):
            return False, float("inf")
        worst = max(worst, *(abs(a[k] - b[k]) for k in a)) if a else worst
    return worst <= LOGPROB_TOLERANCE, worst


def summarise(rows: list[dict]) -> dict:
    ok = [r for r in rows if not r["pool"].get("error") and not r["baseline"].get("error")]
    hits = [r for r in ok if (r["pool"].get("cached_tokens") or 0) > 0]

    def mean(values: list[float]) -> float | None:
        return statistics.fmean(values) if values else None

    return {
        "requests": len(rows), "failed": len(rows) - len(ok),
        "identical": sum(r["identical"] for r in rows),
        "max_logprob_diff": max((r["max_logprob_diff"] for r in ok), default=None),
        "external_hit_tokens": sum(r["pool"].get("cached_tokens") or 0 for r in ok),
        "requests_with_hits": len(hits),
        "mean_ttft_pool_s": mean([r["pool"]["ttft_s"] for r in ok]),
        "mean_ttft_baseline_s": mean([r["baseline"]["ttft_s"] for r in ok]),
        "mean_ttft_pool_hits_s": mean([r["pool"]["ttft_s"] for r in hits]),
        "mean_ttft_baseline_hits_s": mean([r["baseline"]["ttft_s"] for r in hits]),
    }


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def render(summary: dict, rows: list[dict], testbed: TestbedOptions, engine: EngineOptions,
           calibration_lines: list[str], counters: dict) -> str:
    lines = [f"# kvswitch demo with vLLM: {summary['requests']} requests of the trace excerpt, "
             f"{testbed.hosts} hosts, target {testbed.target}, preset {engine.preset}", "",
             "Each request ran on its host's vLLM with the kvswitch connector (the pool through the switch) and on "
             "the same host's vLLM without it (baseline), one after the other; vLLM's own prefix cache is off in "
             "both, so every cached token came from the pool.", "",
             f"- identical output (every token and its top-5 log-probabilities, tolerance {LOGPROB_TOLERANCE}): "
             f"**{summary['identical']} of {summary['requests']}** (largest log-probability difference "
             f"{_s(summary['max_logprob_diff'])})",
             f"- failed requests: {summary['failed']}",
             f"- external-hit tokens: {summary['external_hit_tokens']} in {summary['requests_with_hits']} requests",
             f"- mean TTFT: with the pool {_s(summary['mean_ttft_pool_s'])} s, without "
             f"{_s(summary['mean_ttft_baseline_s'])} s; requests with a pool hit: "
             f"{_s(summary['mean_ttft_pool_hits_s'])} s vs {_s(summary['mean_ttft_baseline_hits_s'])} s", "",
             "| request | host | prompt tokens | external-hit tokens | TTFT with pool s | TTFT without s | ratio | "
             "identical |", "|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        p, b = r["pool"], r["baseline"]
        ratio = (p["ttft_s"] / b["ttft_s"]) if p.get("ttft_s") and b.get("ttft_s") else None
        lines.append(f"| {r['i']} | {r['host']} | {r['prompt_tokens']} | {p.get('cached_tokens', '–')} | "
                     f"{_s(p.get('ttft_s'))} | {_s(b.get('ttft_s'))} | {'–' if ratio is None else f'{ratio:.2f}'} | "
                     f"{'yes' if r['identical'] else 'NO ' + str(p.get('error') or b.get('error') or '')} |")
    lines += ["", "## Calibration of the evaluator's TTFT model", "", *calibration_lines, "",
              "## Counters", "", "Storage node data interface during the replay: "
              + ", ".join(f"{k} {v}" for k, v in counters["storage"].items()), "",
              "Switch controllers (Prometheus, change during the replay):", ""]
    lines += [f"- `{k}`: {v:g}" for k, v in counters["switch"].items() if v] or ["- (no metrics endpoint)"]
    lines += ["", "Connectors (pool engines):", ""]
    for host, sides in counters["connectors"].items():
        for side, stats in sides.items():
            lines.append(f"- {host} {side}: `{json.dumps(stats, sort_keys=True)}`")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ok = [r for r in rows if r["pool"].get("ttft_s") and r["baseline"].get("ttft_s")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(ok))
    left.bar(x - 0.2, [r["baseline"]["ttft_s"] for r in ok], 0.4, label="without the pool")
    left.bar(x + 0.2, [r["pool"]["ttft_s"] for r in ok], 0.4, label="with the pool")
    left.set_xticks(x, [str(r["i"]) for r in ok], rotation=90, fontsize=7)
    left.set_xlabel("request (trace index)")
    left.set_ylabel("TTFT (s)")
    left.set_title("time to first token, same run")
    left.legend()
    right.scatter([r["pool"].get("cached_tokens") or 0 for r in ok],
                  [r["pool"]["ttft_s"] / r["baseline"]["ttft_s"] for r in ok])
    right.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    right.set_xlabel("external-hit tokens (from the pool)")
    right.set_ylabel("TTFT with / without the pool")
    right.set_title("what a pool hit buys")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---- the run -------------------------------------------------------------------------------------------------------

def run_engine_demo(testbed: TestbedOptions, engine: EngineOptions, options: EngineDemoOptions) -> str:
    """The whole demo; returns the report (also written to `options.out/report.md`)."""
    from connectors.presets import preset_config

    trace = load_excerpt(options.trace, 1 << 30)
    chosen = select_sharing(trace, options.requests, options.max_ids)
    if not chosen:
        raise TestbedError(f"{options.trace}: no requests share a prefix of two blocks")
    folder = options.out / "engine"
    folder.mkdir(parents=True, exist_ok=True)
    engine = dataclasses.replace(engine, baseline=True)
    model_name = f"kvswitch/{engine.preset}"
    bed = Testbed(testbed)
    hosts = [h.name for h in bed.plan.inference_hosts]
    rows: list[dict] = []
    with bed:
        start_engines(bed, engine, folder, progress=lambda m: print(m, file=sys.stderr, flush=True))
        clients = HostClients(bed, hosts, model_name, folder)
        try:
            print("calibrating: prefill sweep and pool reads", file=sys.stderr, flush=True)
            sweep: Sweep = {}
            prefill_sweep(bed, clients, hosts[0], options, 0, sweep)
            block_bytes = options.tokens_per_id * _kv_bytes_per_token(preset_config(engine.preset))
            read_sizes = [block_bytes]  # the blocks the engines read; a rate through the origin (`fit_pool_read`)
            wait_quiet(bed, options.settle_s, options.settle_max_s)  # the sweep's saves are done: reads alone
            reads = measure_pool_reads(bed, hosts[0], read_sizes, reads=8)
            storage_before, switch_before = _storage_traffic(bed), switch_metrics(bed)
            for n, index in enumerate(chosen):
                host = hosts[n % len(hosts)]
                prompt = prompt_of(trace[index], options)
                print(f"request {index} ({len(prompt)} tokens) on {host}", file=sys.stderr, flush=True)
                answer = clients.ask(host, {"i": index, "prompt": prompt, "max_tokens": options.max_tokens,
                                            "targets": [["baseline", BASELINE_PORT], ["pool", POOL_PORT]]})
                pool, baseline = answer["results"]["pool"], answer["results"]["baseline"]
                identical, worst = same_output(pool, baseline)
                rows.append({"i": index, "host": host, "prompt_tokens": len(prompt), "pool": pool,
                             "baseline": baseline, "identical": identical, "max_logprob_diff": worst})
                wait_quiet(bed, options.settle_s, options.settle_max_s)
                # one more calibration prefill between requests: the rates then see the replay's conditions
                lengths = options.calibration_lengths
                sweep_once(clients, host, options, 1000 + n, lengths[n % len(lengths)], sweep)
                wait_quiet(bed, options.settle_s, options.settle_max_s)
            storage = dataclasses.asdict(_storage_traffic(bed) - storage_before)
            print("calibrating again after the replay", file=sys.stderr, flush=True)
            prefill_sweep(bed, clients, hosts[0], options, options.calibration_repeats, sweep)
            wait_quiet(bed, options.settle_s, options.settle_max_s)
            reads += measure_pool_reads(bed, hosts[-1], read_sizes, reads=8)
            switch_after = switch_metrics(bed)
            switch = {k: v - switch_before.get(k, 0.0) for k, v in switch_after.items()}
            stats = {e.host: connector_stats(e) for e in _pool_endpoints(hosts, folder)}
        finally:
            clients.close()
    summary = summarise(rows)
    counters = {"storage": storage, "switch": switch, "connectors": stats}
    measured: dict[str, object] = {"prefill_sweep": sweep, "pool_reads": reads}
    raw = {"summary": summary, "requests": rows, "counters": counters, "calibration": measured}
    (options.out / "results.json").write_text(json.dumps(raw, indent=2) + "\n")  # before anything can fail
    calibration_lines, calibration_json = calibrate(engine.preset, _kv_dtype_bytes(stats), sweep, reads,
                                                    engine_load_rate(stats), rows, options.tokens_per_id)
    measured.update(calibration_json)
    report = render(summary, rows, dataclasses.replace(testbed, hosts=len(hosts)), engine, calibration_lines,
                    counters)
    (options.out / "report.md").write_text(report)
    (options.out / "results.json").write_text(json.dumps(raw, indent=2) + "\n")
    plot(rows, options.out / "ttft.png")
    return report + f"\nwritten: {options.out / 'report.md'}, {options.out / 'results.json'}, {options.out / 'ttft.png'}"


def engine_load_rate(stats: dict[str, dict[str, dict]]) -> float | None:
    """Bytes/s the pool engines' connectors loaded at, from their counters (loaded bytes over seconds loading)."""
    loaded = seconds = 0.0
    for sides in stats.values():
        for side in sides.values():
            loaded += (side.get("counters") or {}).get("loaded_bytes", 0)
            seconds += (side.get("seconds") or {}).get("load", 0.0)
    return loaded / seconds if loaded and seconds else None


def calibrate(preset: str, kv_dtype_bytes: int | None, sweep: Sweep, reads: list[tuple[int, float]],
              load_rate: float | None, rows: list[dict], tokens_per_id: int) -> tuple[list[str], dict]:
    """The calibration table's lines and figures. Each engine's prefill rate and fixed cost are fitted on its own
    sweep (each length's median): the baseline's for the requests without the pool, the pool engine's (whose
    sweep prompts miss the pool, so they carry the connector's cost of a miss) for those with it. The pool read
    rate is the one the engines' connectors loaded at (`load_rate`, their counters): a client reading alone is
    faster (fitted on `reads`, reported beside it) than a connector reading inside a busy engine process."""
    from connectors.presets import preset_config

    model = model_from_hf_config(preset, preset_config(preset))
    if kv_dtype_bytes is not None:  # the engine's KV dtype
        model = dataclasses.replace(model, dtype_bytes=kv_dtype_bytes)
    samples = {role: [PrefillSample(n, s) for n, s in _medians(pairs)] for role, pairs in sweep.items()}
    try:
        client_rate, client_per_block = fit_pool_read(_medians(reads))
        read_rate, per_block = (load_rate, 0.0) if load_rate else (client_rate, client_per_block)
        fitted = {role: Calibration(model, *fit_prefill(model, samples[role]), read_rate, per_block)
                  for role in ("baseline", "pool")}
    except (ValueError, KeyError) as exc:
        return [f"Calibration failed: {exc!r}"], {"error": repr(exc)}
    ok = [r for r in rows if r["pool"].get("ttft_s") and r["baseline"].get("ttft_s")]
    pairs = [
        (fitted["baseline"], compare("without the pool (baseline engines)", fitted["baseline"],
                                     [{"tokens": r["prompt_tokens"], "ttft_s": r["baseline"]["ttft_s"]} for r in ok])),
        (fitted["pool"], compare("with the pool (pool engines)", fitted["pool"],
                                 [{"tokens": r["prompt_tokens"], "cached_tokens": r["pool"].get("cached_tokens") or 0,
                                   "cached_blocks": (r["pool"].get("cached_tokens") or 0) // tokens_per_id,
                                   "ttft_s": r["pool"]["ttft_s"]} for r in ok])),
    ]
    lines = [f"Measured on this testbed: pool loads by the engines' connectors {read_rate / 1e6:.1f} MB/s "
             f"(+ {per_block * 1e3:.1f} ms per block; a client reading fresh blocks alone: "
             f"{client_rate / 1e6:.1f} MB/s + {client_per_block * 1e3:.1f} ms per block); full prefills of fresh "
             "prompts, per engine (medians): "
             + "; ".join(f"{role}: " + ", ".join(f"{s.tokens} tokens {s.seconds * 1e3:.0f} ms" for s in samples[role])
                         for role in ("baseline", "pool")) + ".", "", *render_calibration(pairs)]
    return lines, {"pool_bytes_per_s": read_rate, "pool_request_s": per_block, "client_read_bytes_per_s": client_rate,
                   "client_read_s_per_block": client_per_block,
                   "fits": {role: c.as_dict() for role, c in fitted.items()},
                   "prefill_medians": {role: [dataclasses.asdict(s) for s in v] for role, v in samples.items()},
                   "comparisons": [{"name": c.name, "measured_s": c.measured_s, "predicted_s": c.predicted_s,
                                    "error": c.error, "within": c.within} for _, c in pairs]}


def _medians(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(size, median seconds) per size: a busy machine adds outliers that a least-squares fit would follow."""
    by_size: dict[int, list[float]] = {}
    for size, seconds in pairs:
        by_size.setdefault(int(size), []).append(float(seconds))
    return [(size, statistics.median(v)) for size, v in sorted(by_size.items())]


def _kv_dtype_bytes(stats: dict[str, dict[str, dict]]) -> int | None:
    """Bytes per KV element as the pool engines' connectors report their identity."""
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2}
    for sides in stats.values():
        for side in sides.values():
            dtype = (side.get("identity") or {}).get("dtype")
            if dtype in sizes:
                return sizes[dtype]
    return None


def _kv_bytes_per_token(config: dict) -> int:
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2}
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * sizes[config["torch_dtype"]]


def _pool_endpoints(hosts: list[str], folder: Path) -> list[EngineEndpoint]:
    return [EngineEndpoint(h, "pool", POOL_PORT, folder / f"vllm-{h}-pool.log", folder / f"stats-{h}")
            for h in hosts]
