"""Fresh vLLM engines (tiny preset, one per process) on one storage node: reuse, bad blocks, a down pool.

Five engine runs share the module: C without a connector (the reference), A with the connector and an empty pool
(it saves), then, after some of A's blocks were damaged in the pool, B with the connector (it loads), and E with
the connector pointed at a closed port. Each check compares a request's generated tokens and its first token's
top log-probabilities with C's.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors import blockcodec
from connectors.identity import ModelIdentity, block_hashes
from connectors.models import ensure
from connectors.store import PoolStore
from kvpool.client import ClientOptions, KVPClient, parse_address

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # five engine starts: minutes on a busy 2-core host

REPO = Path(__file__).resolve().parents[2]
LOGPROB_TOLERANCE = 1e-5
"""Loaded KV is bit-identical to computed KV; log-probabilities may differ only in the last float bits."""


def _prompts() -> dict[str, list[int]]:
    rng = random.Random(20)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(3, 2048) for _ in range(n)]

    shared = tokens(1100)
    return {"first": shared + tokens(150), "second": shared + tokens(120),
            "checksum": tokens(1100), "foreign": tokens(1100), "short": tokens(1100)}


PROMPTS = _prompts()
DAMAGED = ("checksum", "foreign", "short")
LATER = ("second", *DAMAGED)


@dataclass
class Run:
    requests: dict[str, dict[str, Any]]
    stats: dict[str, dict[str, Any]]
    """"scheduler" / "worker": the connector's counters (none without a connector)."""


def _engine(model: Path, names: tuple[str, ...], out: Path, pool: str | None) -> Run:
    out.mkdir(parents=True)
    (out / "prompts.json").write_text(json.dumps([PROMPTS[n] for n in names]))
    command = [sys.executable, "-m", "connectors.engine_run", "--model", str(model), "--dtype", "float32",
               "--prompts", str(out / "prompts.json"), "--out", str(out / "result.json"), "--max-tokens", "8"]
    if pool is not None:
        # the saver at the engine's priority: on a busy host a niced one may not finish before A exits
        command += ["--pool", pool, "--extra", json.dumps({"stats_dir": str(out / "stats"), "timeout_s": 0.1,
                                                            "saver_nice": 0})]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads((out / "result.json").read_text())
    stats = {path.name.split("-")[0]: json.loads(path.read_text()) for path in (out / "stats").glob("*.json")} \
        if pool is not None else {}
    return Run(dict(zip(names, result["requests"], strict=True)), stats)


def _damage(address: str, identity: ModelIdentity) -> None:
    """Replace the first pool block of each DAMAGED prompt with a newer version that must be refused."""
    other = ModelIdentity(**{**vars_of(identity), "name": "another/model"})
    with KVPClient(ClientOptions(server=parse_address(address), tenant=identity.tenant(), chunk_size=8192)) as client:
        for name in DAMAGED:
            key = block_hashes(PROMPTS[name], identity)[0]
            blob = bytearray(client.get_block(key).data)
            if name == "checksum":
                blob[blockcodec.HEADER_LEN + 5000] ^= 0x40
            elif name == "foreign":
                blob = bytearray(blockcodec.encode(other, blockcodec.decode(identity, bytes(blob), key), key))
            else:
                blob = blob[:20]
            client.put_block(key, bytes(blob), version=2)


def vars_of(identity: ModelIdentity) -> dict[str, Any]:
    return {f: getattr(identity, f) for f in identity.__dataclass_fields__}


def _wait_stored(address: str, identity: ModelIdentity, keys: list[int]) -> None:
    with PoolStore(address, tenant=identity.tenant()) as store:
        deadline = time.monotonic() + 120
        while store.leading_hits(keys) < len(keys):
            assert time.monotonic() < deadline, "engine A's saves never reached the pool"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def runs(module_node, tmp_path_factory, closed_port_module) -> dict[str, Run]:
    model = ensure("tiny", REPO / "build" / "models" / "tiny")
    work = tmp_path_factory.mktemp("engines")
    runs = {"C": _engine(model, LATER, work / "C", None),
            "A": _engine(model, ("first", *DAMAGED), work / "A", module_node.address)}
    identity = ModelIdentity(**runs["A"].stats["worker"]["identity"])
    _wait_stored(module_node.address, identity, block_hashes(PROMPTS["first"], identity)[:4])
    for name in DAMAGED:
        _wait_stored(module_node.address, identity, block_hashes(PROMPTS[name], identity)[:1])
    _damage(module_node.address, identity)
    runs["B"] = _engine(model, LATER, work / "B", module_node.address)
    runs["E"] = _engine(model, ("second",), work / "E", closed_port_module)
    return runs


@pytest.fixture(scope="module")
def closed_port_module() -> str:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        host, port = sock.getsockname()
    return f"{host}:{port}"


def _assert_same_output(got: dict[str, Any], reference: dict[str, Any]) -> None:
    assert got["tokens"] == reference["tokens"]
    assert got["first_logprobs"].keys() == reference["first_logprobs"].keys()
    for token, logprob in reference["first_logprobs"].items():
        assert abs(got["first_logprobs"][token] - logprob) <= LOGPROB_TOLERANCE


def test_first_engine_misses_and_saves_its_blocks(runs) -> None:
    a = runs["A"]
    assert all(r["num_cached_tokens"] == 0 for r in a.requests.values())
    worker = a.stats["worker"]["counters"]
    assert worker["saved_blocks"] == 4 + 3 * 4  # every full block of every prompt, once
    assert worker.get("loaded_blocks", 0) == 0


def test_second_engine_reuses_the_prefix_with_identical_output(runs) -> None:
    b, c = runs["B"], runs["C"]
    assert b.requests["second"]["num_cached_tokens"] >= 1024
    _assert_same_output(b.requests["second"], c.requests["second"])
    saved = runs["A"].stats["worker"]["counters"]
    loaded = b.stats["worker"]["counters"]
    assert loaded["loaded_blocks"] == 4
    assert loaded["loaded_bytes"] == 4 * saved["saved_bytes"] // saved["saved_blocks"]  # the bytes stored


@pytest.mark.parametrize("name,reason", [("checksum", "checksum"), ("foreign", "foreign identity"),
                                         ("short", "short")])
def test_bad_block_is_refused_and_recomputed(runs, name: str, reason: str) -> None:
    _assert_same_output(runs["B"].requests[name], runs["C"].requests[name])
    worker = runs["B"].stats["worker"]
    assert worker["counters"][f"load_failed.{reason}"] == 1
    assert worker["counters"]["rejected"] == len(DAMAGED)
    assert runs["B"].stats["scheduler"]["counters"]["requests_load_failed"] == len(DAMAGED)


def test_down_pool_gives_a_full_prefill_and_the_same_output(runs) -> None:
    e = runs["E"]
    assert e.requests["second"]["num_cached_tokens"] == 0
    _assert_same_output(e.requests["second"], runs["C"].requests["second"])
    assert e.stats["scheduler"]["lookup_store"]["failures"] == 1
