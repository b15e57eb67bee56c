"""Time to first token of a vLLM engine on the pool: a 1,024-token prefix from the pool vs a full prefill, and
what the connector costs a request the pool cannot help.

    python -m bench engine_ttft [--quick]        (or: python -m bench.engine_ttft OUT_DIR)

A storage node serves on loopback (in this process, in a thread); the engines are fresh vLLM processes of the
engine environment (`.venv-engine`, `python -m connectors.engine_run`, tiny preset, float32, vLLM's own prefix
cache off). Three engines run in turn:

1. a writer with the connector stores the 1,024-token prefixes of the "hit" prompts in the pool;
2. an engine with the connector runs the "hit" prompts (same prefix, another suffix: 1,024 tokens come from the
   pool, the suffix is computed) alternating with "miss" prompts whose prefixes the pool never saw (it asks,
   misses, computes everything, and saves in the background);
3. an engine without a connector runs the very same prompts (full prefills);

and 2 and 3 run again (ROUNDS in all), alternating, with new "miss" prompts each round.

Each engine first serves a few warm-up prompts (its first requests pay one-off kernel set-up). A request asks
for one token, so its latency is its time to first token. Figures are medians over the requests of each kind.
Goals (docs/engines.md): a hit's TTFT <= 0.5 x the full prefill's; the connector adds <= 5 % to a miss.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from kvpool.server import StorageNode, StorageOptions

NAME = "engine_ttft"
REPO = Path(__file__).resolve().parents[1]
ENGINE_PYTHON = Path(os.environ.get("KVSWITCH_ENGINE_PYTHON", REPO / ".venv-engine" / "bin" / "python"))
"""The engine environment's python (KVSWITCH_ENGINE_PYTHON overrides)."""
PREFIX_TOKENS = 1024
SUFFIX_TOKENS = 64
WARMUP = 3
ROUNDS = 2
"""Times each engine (with the connector, without) runs the measured prompts, alternating."""


def _prompts(count: int) -> dict[str, list[list[int]]]:
    rng = random.Random(1024)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(3, 2048) for _ in range(n)]

    prefixes = [tokens(PREFIX_TOKENS) for _ in range(count)]
    length = PREFIX_TOKENS + SUFFIX_TOKENS
    return {"warmup": [tokens(length) for _ in range(WARMUP)],
            "store": [p + tokens(SUFFIX_TOKENS) for p in prefixes],
            "hit": [p + tokens(SUFFIX_TOKENS) for p in prefixes],
            "miss": [[tokens(length) for _ in range(count)] for _ in range(ROUNDS)]}


def _engine(work: Path, name: str, prompts: list[list[int]], pool: str | None, model: Path) -> list[dict[str, Any]]:
    (work / f"{name}.prompts.json").write_text(json.dumps(prompts))
    command = [str(ENGINE_PYTHON), "-m", "connectors.engine_run", "--model", str(model), "--dtype", "float32",
               "--prompts", str(work / f"{name}.prompts.json"), "--out", str(work / f"{name}.json"),
               "--max-tokens", "1", "--logprobs", "0"]
    if pool is not None:
        command += ["--pool", pool, "--extra", json.dumps({"stats_dir": str(work / f"{name}.stats")})]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"})
    if done.returncode:
        raise RuntimeError(f"engine {name} failed: {done.stderr[-2000:]}")
    return json.loads((work / f"{name}.json").read_text())["requests"]


def _model() -> Path:
    model = REPO / "build" / "models" / "tiny"
    subprocess.run([str(ENGINE_PYTHON), "-m", "connectors.models", "ensure", "tiny", "--out", str(model)],
                   cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"})
    return model


def run(out_dir: Path, quick: bool = False) -> dict:
    if not ENGINE_PYTHON.exists():
        raise RuntimeError(f"no engine environment at {ENGINE_PYTHON}: run `make setup`")
    out_dir.mkdir(parents=True, exist_ok=True)
    count = 3 if quick else 7
    prompts = _prompts(count)
    model = _model()
    node = StorageNode(StorageOptions(host="127.0.0.1", port=0, capacity=512 << 20))
    sock = node.bind()
    stop = threading.Event()
    thread = threading.Thread(target=node.serve, args=(sock, stop, 0.05), daemon=True)
    thread.start()
    host, port = sock.getsockname()
    pool = f"{host}:{port}"
    try:
        with tempfile.TemporaryDirectory(prefix="engine_ttft.") as tmp:
            work = Path(tmp)
            _engine(work, "writer", prompts["store"], pool, model)
            with_pool: list[dict[str, Any]] = []
            without: list[dict[str, Any]] = []
            for round_ in range(ROUNDS):  # engines alternate, so a change in the host's load hits both alike
                # hit and miss requests alternate too
                measured = prompts["warmup"] + [p for pair in zip(prompts["hit"], prompts["miss"][round_],
                                                                  strict=True) for p in pair]
                with_pool += _engine(work, f"connector{round_}", measured, pool, model)[WARMUP:]
                without += _engine(work, f"plain{round_}", measured, None, model)[WARMUP:]
            stats = {f"{path.parent.stem}/{path.stem}": json.loads(path.read_text())
                     for path in work.glob("connector*.stats/*.json")}
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()
        node.close()

    def median_ms(requests: list[dict[str, Any]]) -> float:
        return statistics.median(r["latency_s"] for r in requests) * 1e3

    hit, miss = with_pool[0::2], with_pool[1::2]
    hit_plain, miss_plain = without[0::2], without[1::2]
    result = {
        "preset": "tiny", "prefix_tokens": PREFIX_TOKENS, "suffix_tokens": SUFFIX_TOKENS,
        "requests": count * ROUNDS,
        "ttft_ms": {"hit_with_pool": median_ms(hit), "same_prompts_full_prefill": median_ms(hit_plain),
                    "miss_with_connector": median_ms(miss), "same_prompts_no_connector": median_ms(miss_plain)},
        "external_hit_tokens": [r["num_cached_tokens"] for r in hit],
        "ttft_ms_each": {name: [round(r["latency_s"] * 1e3, 1) for r in requests] for name, requests in
                         (("hit_with_pool", hit), ("same_prompts_full_prefill", hit_plain),
                          ("miss_with_connector", miss), ("same_prompts_no_connector", miss_plain))},
        "same_tokens": [a["tokens"] for a in with_pool] == [b["tokens"] for b in without],
        "connector_stats": stats,
    }
    result["connector_ms_per_request"] = _connector_costs(stats, count)
    ttft = result["ttft_ms"]
    result["hit_over_full_prefill"] = ttft["hit_with_pool"] / ttft["same_prompts_full_prefill"]
    result["miss_overhead"] = ttft["miss_with_connector"] / ttft["same_prompts_no_connector"] - 1
    (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    (out_dir / f"{NAME}.md").write_text(_table(result))
    print(_table(result))
    return result


def _connector_costs(stats: dict[str, dict[str, Any]], count: int) -> dict[str, float]:
    """The connector's own time on the engine's path, per measured request: its pool probe (every request),
    copying a miss's 4 new blocks out of the cache, and loading a hit's 4 blocks (medians of the rounds; the
    warm-up requests are counted in, so these are upper bounds)."""
    per_round: dict[str, list[float]] = {"probe": [], "copy_out": [], "load": []}
    for name, side in stats.items():
        seconds = side.get("seconds", {})
        if name.split("/")[1].startswith("scheduler"):
            per_round["probe"].append(seconds.get("lookup", 0.0) / (2 * count + WARMUP))
        else:
            per_round["copy_out"].append(seconds.get("save_copy", 0.0) / count)
            per_round["load"].append(seconds.get("load", 0.0) / count)
    return {what: round(statistics.median(values) * 1e3, 2) for what, values in per_round.items() if values}


def _table(r: dict) -> str:
    t = r["ttft_ms"]
    c = r.get("connector_ms_per_request", {})
    return "\n".join([
        f"vLLM (CPU), tiny preset, {r['prefix_tokens']}-token prefix + {r['suffix_tokens']}-token suffix, "
        f"median of {r['requests']} requests each; pool on loopback. Same tokens with and without the pool: "
        f"{r['same_tokens']}.",
        "",
        "| request | TTFT (ms) | vs without the pool | goal |",
        "|---|---:|---:|---|",
        f"| prefix in the pool ({min(r['external_hit_tokens'])}+ external-hit tokens) | {t['hit_with_pool']:.1f} "
        f"| {r['hit_over_full_prefill']:.2f} x | <= 0.5 x |",
        f"| same prompts, full prefill, no connector | {t['same_prompts_full_prefill']:.1f} | 1.00 x | |",
        f"| no pool hit, connector on | {t['miss_with_connector']:.1f} | {r['miss_overhead']:+.1%} | <= +5 % |",
        f"| same prompts, no connector | {t['same_prompts_no_connector']:.1f} | | |",
        "",
        f"Connector's own time in the engine's step loop per request (ms): pool probe {c.get('probe', 0):.2f}, "
        f"copying a miss's new blocks out {c.get('copy_out', 0):.2f}, loading a hit's blocks {c.get('load', 0):.2f}. "
        "Writes run in a niced saver process. On a shared 2-core host TTFTs vary several-fold from request to "
        "request (every TTFT is in the JSON): compare the medians, and these per-request costs, not single runs.",
        "",
    ])


if __name__ == "__main__":
    run(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/bench"))
