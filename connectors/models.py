"""Weights of the model presets, generated from a fixed seed by `transformers` (never downloaded).

    python -m connectors.models make tiny --out build/models/tiny [--seed 0]
    python -m connectors.models ensure tiny --out build/models/tiny      (make it unless it is there)

The folder holds `config.json` and `model.safetensors`, what vLLM and transformers load. The same preset and
seed give the same weights on every machine (torch's CPU generator), so two hosts that generated a preset
separately run the same model and may share its KV blocks. Needs the engine environment (torch, transformers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from connectors.presets import PRESETS, preset_config

DEFAULT_SEED = 0
STAMP = "kvswitch-preset.json"
"""Written last into a generated folder: which preset and seed it holds (a half-written folder has none)."""


def make(preset: str, out: Path, seed: int = DEFAULT_SEED) -> Path:
    """Generate preset `preset`'s weights with `seed` into `out` (created); returns `out`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config_dict = preset_config(preset)
    dtype = getattr(torch, config_dict["torch_dtype"])
    config = LlamaConfig(**{k: v for k, v in config_dict.items() if k not in ("model_type", "torch_dtype")})
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(dtype).eval()
    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP).unlink(missing_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # save_pretrained writes the dtype under its own name; keep the preset's config as vLLM reads it
    saved = json.loads((out / "config.json").read_text())
    saved.update(architectures=config_dict["architectures"], torch_dtype=config_dict["torch_dtype"])
    (out / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True))
    (out / STAMP).write_text(json.dumps({"preset": preset, "seed": seed}))
    return out


def ensure(preset: str, out: Path, seed: int = DEFAULT_SEED) -> Path:
    """`out` holding preset `preset` with `seed`: generated unless a complete folder of it is there."""
    stamp = out / STAMP
    if stamp.exists() and json.loads(stamp.read_text()) == {"preset": preset, "seed": seed}:
        return out
    return make(preset, out, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.models", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("make", "ensure"))
    parser.add_argument("preset", choices=PRESETS)
    parser.add_argument("--out", type=Path, required=True, help="folder to write config.json and weights into")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    out = (make if args.command == "make" else ensure)(args.preset, args.out, args.seed)
    print(f"{args.preset} (seed {args.seed}) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
