"""Model presets: Hugging Face configs of small Llama-family models whose weights `connectors.models` generates.

* `tiny`: 4 layers, 2 KV heads x 64, float32 (4 KiB of K and V per token): for tests; `initializer_range` 0.1 so
  its greedy output depends on the prompt (with the usual 0.02 it hardly does, and a wrong cache goes unseen).
* `llama3-8b-kv`: Llama-3-8B's KV shape (32 layers, 8 KV heads x 128, bfloat16: 128 KiB per token, 32 MiB per
  256-token block) around a small hidden size, so it runs on a CPU with real block sizes.
* `prefill-bound`: a Llama-family model whose prefill costs what a real deployment's does per byte of KV it
  produces: hidden 2,048, intermediate 8,192 (4x), 32 query heads but one KV head x 64, 4 layers, float32
  (2 KiB of K and V per token, 512 KiB per 256-token block). On the testbed the pool delivers KV through the
  Python softswitch at ~10 MB/s; `tiny` prefills so fast (~11,000 tokens/s) that recomputing beats loading, the
  opposite of a GPU serving an 8B model. This preset moves the ratio of prefill time to KV bytes to where a real
  deployment has it (measured figures in docs/engines.md "Which preset").

All have a 2,048-token vocabulary and no tokenizer: engines load them with `skip_tokenizer_init=True` and take
prompts as token ids.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

PRESETS = ("tiny", "llama3-8b-kv", "prefill-bound")


def preset_config(name: str) -> dict[str, Any]:
    """The Hugging Face config (a dict) of preset `name`."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    return json.loads(resources.files(__name__).joinpath(f"{name}.json").read_text())
