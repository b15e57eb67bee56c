"""Run prompts (token ids) through one fresh vLLM engine, with or without the pool, and write what came out.

    python -m connectors.engine_run --model DIR --prompts prompts.json --out result.json \
        [--pool HOST:PORT] [--extra '{"block_tokens": 256}'] [--max-tokens 8] [--logprobs 5] [--repeat 1]

One engine per process (vLLM's in-process engine core), prompts one at a time in order, so each request's
latency is its own: `latency_s` is the wall time of a request from submission to its last token (with
`--max-tokens 1`, its time to first token). vLLM's own prefix cache is off: every hit a request gets comes
from the pool. Written for the engine tests and `bench/engine_ttft.py`; needs the engine environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

KV_CACHE_BYTES = 256 << 20
"""KV cache vLLM reserves: room for 64 Ki tokens of the tiny preset, far less than the CPU backend's default."""


def kv_transfer_config(pool: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The `--kv-transfer-config` that puts `KVSwitchConnector` on `pool` (what a user writes)."""
    return {"kv_connector": "KVSwitchConnector", "kv_connector_module_path": "connectors.vllm",
            "kv_role": "kv_both", "kv_connector_extra_config": {"pool": pool, **extra}}


def run(model: str, prompts: list[list[int]], pool: str | None, extra: dict[str, Any], max_tokens: int,
        logprobs: int, repeat: int = 1, dtype: str = "auto", kv_cache_bytes: int = KV_CACHE_BYTES,
        max_model_len: int = 4096) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    kwargs: dict[str, Any] = {}
    if pool is not None:
        kwargs["kv_transfer_config"] = kv_transfer_config(pool, extra)
    llm = LLM(model=model, skip_tokenizer_init=True, dtype=dtype, enforce_eager=True, enable_prefix_caching=False,
              kv_cache_memory_bytes=kv_cache_bytes, max_model_len=max_model_len, seed=0, **kwargs)
    start_s = time.perf_counter() - started
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, logprobs=logprobs or None, detokenize=False,
                            ignore_eos=True)
    requests = []
    for _ in range(repeat):
        for prompt in prompts:
            begin = time.perf_counter()
            (out,) = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
            latency = time.perf_counter() - begin
            completion = out.outputs[0]
            first = completion.logprobs[0] if completion.logprobs else {}
            requests.append({"prompt_tokens": len(prompt), "tokens": list(completion.token_ids),
                             "first_logprobs": {str(t): lp.logprob for t, lp in first.items()},
                             "num_cached_tokens": out.num_cached_tokens or 0, "latency_s": latency})
    del llm
    return {"start_s": start_s, "requests": requests}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.engine_run", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", type=Path, required=True, help="JSON list of prompts, each a list of token ids")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pool", default=None, help="HOST:PORT of the pool; none: no connector")
    parser.add_argument("--extra", default="{}", help="more kv_connector_extra_config, as JSON")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--logprobs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1, help="run the prompt list this many times")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--kv-cache-bytes", type=int, default=KV_CACHE_BYTES,
                        help="KV cache vLLM reserves (llama3-8b-kv: 128 KiB per token)")
    parser.add_argument("--max-model-len", type=int, default=4096)
    args = parser.parse_args(argv)
    result = run(args.model, json.loads(args.prompts.read_text()), args.pool, json.loads(args.extra),
                 args.max_tokens, args.logprobs, args.repeat, args.dtype, args.kv_cache_bytes, args.max_model_len)
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
