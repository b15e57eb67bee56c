"""One host's side of `make demo ENGINE=vllm`: send each request to the host's engines, time the first token.

Runs inside an inference host's namespace (standard library only). Reads one JSON request per line on stdin:

    {"i": 7, "prompt": [token ids], "max_tokens": 8, "targets": [["baseline", 8001], ["pool", 8000]]}

sends it to each target in turn (`/v1/completions` on 127.0.0.1:PORT, streamed, greedy, 5 top log-probabilities
per token, tokens as ids) and writes one JSON line per request to stdout: per target the time to first token
(seconds from sending the request to the first streamed token), the generated token ids, each token's top
log-probabilities, the prompt tokens the engine reported cached (`usage.prompt_tokens_details`) and any error.
The driver (`topo.engine_demo`) feeds the hosts one request at a time, in trace order.
"""

from __future__ import annotations

import http.client
import json
import sys
import time

TOP_LOGPROBS = 5


def complete(port: int, model: str, prompt: list[int], max_tokens: int, timeout: float = 300.0) -> dict:
    """One streamed greedy completion; never raises (an error is recorded)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
                       "logprobs": TOP_LOGPROBS, "return_tokens_as_token_ids": True, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    tokens: list[str] = []
    top: list[dict[str, float]] = []
    cached = None
    ttft = None
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            return {"error": f"HTTP {response.status}: {response.read()[:300].decode(errors='replace')}"}
        for raw in response:
            line = raw.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for choice in chunk.get("choices", []):
                logprobs = choice.get("logprobs") or {}
                if logprobs.get("tokens"):
                    if ttft is None:
                        ttft = time.perf_counter() - start
                    tokens += logprobs["tokens"]
                    top += [dict(t or {}) for t in logprobs.get("top_logprobs") or []]
            usage = chunk.get("usage")
            if usage:
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        conn.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"ttft_s": ttft, "seconds": time.perf_counter() - start, "tokens": [_id(t) for t in tokens],
            "top_logprobs": [{str(_id(k)): v for k, v in t.items()} for t in top], "cached_tokens": cached}


def _id(token: str) -> int:
    """vLLM writes a token as "token_id:123" with `return_tokens_as_token_ids`."""
    return int(token.rpartition(":")[2])


def main() -> int:
    model = sys.argv[1]
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        results = {role: complete(int(port), model, request["prompt"], int(request["max_tokens"]))
                   for role, port in request["targets"]}
        print(json.dumps({"i": request["i"], "results": results}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
