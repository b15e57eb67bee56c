"""The evaluator's TTFT model, calibrated on a testbed where a real engine ran.

`evaluation.ttft` prices a request as fetch + prefill: the reused prefix's bytes over the links it crosses
(`costs.fetch_seconds`) and the prefill FLOPs of the rest over an achieved FLOP rate (`costs.prefill_seconds`),
plus a fixed per-request overhead (`CostModel.request_overhead_s`). Calibrating it means measuring, on the
machine the engine runs on:

* the prefill rate: TTFTs of full prefills of several prompt lengths, fitted as
  `seconds = overhead + prefill_flops(tokens) / flops_per_s` (least squares; `fit_prefill`);
* the pool read rate: bytes/s of whole blocks read from the pool by one reader (`fit_pool_read`).

`cost_model` turns them into a `CostModel` (an accelerator of `flops_per_s` at full utilisation, every link at
the pool read rate), and `predict` prices requests exactly as `evaluation.ttft.estimate` does
(`evaluation.ttft.request_ttft`). `compare` checks the prediction against the mean TTFTs an engine measured with
and without the pool (the demo: `make demo ENGINE=vllm`, docs/engines.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.costs import GPU, FetchPlan, Links
from evaluation.model import ModelConfig
from evaluation.ttft import CostModel, request_ttft

TOLERANCE = 0.25
"""How far (relative) a predicted mean TTFT may be from the measured one for the model to count as calibrated."""


def model_from_hf_config(name: str, config: Mapping[str, object]) -> ModelConfig:
    """A `ModelConfig` from a Llama-family Hugging Face config (the repo's presets): shapes, and the parameter
    count of its matrices and norms (embeddings, attention, MLP, LM head unless tied)."""
    def number(key: str) -> int:
        value = config[key]
        assert isinstance(value, int | float), key
        return int(value)

    hidden, layers, heads = number("hidden_size"), number("num_hidden_layers"), number("num_attention_heads")
    kv_heads = number("num_key_value_heads") if "num_key_value_heads" in config else heads
    head_dim = number("head_dim") if "head_dim" in config else hidden // heads
    vocab, inter = number("vocab_size"), number("intermediate_size")
    dtype = str(config.get("torch_dtype", "bfloat16"))
    dtype_bytes = {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    params = float(layers * per_layer + embeddings + hidden)
    return ModelConfig(name, layers=layers, attention_heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                       dtype_bytes=dtype_bytes, params=params, source=f"preset {name} (generated, seeded)")


@dataclass(frozen=True, slots=True)
class PrefillSample:
    """One measured time to first token of a request that prefilled tokens [cached_tokens, tokens)."""

    tokens: int
    seconds: float
    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the testbed measured, in the cost model's units."""

    model: ModelConfig
    flops_per_s: float
    """Achieved prefill FLOP/s (the fitted slope's inverse)."""
    overhead_s: float
    """Fixed seconds per request (the fit's intercept: scheduling, sampling, the HTTP round trip)."""
    pool_bytes_per_s: float
    """Pool read rate of one reader, bytes/s."""
    pool_request_s: float = 0.0
    """Fixed seconds per block read from the pool (its round trips), the read fit's intercept."""

    def as_dict(self) -> dict[str, float | str]:
        return {"model": self.model.name, "flops_per_s": self.flops_per_s, "overhead_s": self.overhead_s,
                "pool_bytes_per_s": self.pool_bytes_per_s, "pool_request_s": self.pool_request_s,
                "prefill_tokens_per_s_at_1024": 1024 / (self.model.prefill_flops(0, 1024) / self.flops_per_s)}


def _line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of y = a + b x (slope only through the origin when x has one value)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size == 0:
        raise ValueError("no samples to fit")
    if np.ptp(xs) == 0:
        return 0.0, float(ys.mean() / xs[0])
    slope, intercept = np.polyfit(xs, ys, 1)
    if slope <= 0:
        raise ValueError("the samples do not grow with their size: measure a wider range")
    return float(intercept), float(slope)


def fit_prefill(model: ModelConfig, samples: Sequence[PrefillSample]) -> tuple[float, float]:
    """(flops_per_s, overhead_s) from full or partial prefills: seconds = overhead + FLOPs / flops_per_s."""
    intercept, slope = _line([model.prefill_flops(s.cached_tokens, s.tokens) for s in samples],
                             [s.seconds for s in samples])
    return 1.0 / slope, max(0.0, intercept)


def fit_pool_read(reads: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(bytes_per_s, seconds per block) from (block bytes, seconds) of whole-block reads."""
    intercept, slope = _line([b for b, _ in reads], [s for _, s in reads])
    return 1.0 / slope, max(0.0, intercept)


def cost_model(calibration: Calibration) -> CostModel:
    """The evaluator's cost model with this testbed's rates: an accelerator of `flops_per_s` at full
    utilisation, and every link (node NIC, storage NIC, switch port) at the pool read rate."""
    gbps = calibration.pool_bytes_per_s * 8 / 1e9
    return CostModel(model=calibration.model,
                     gpu=GPU("testbed", peak_flops=calibration.flops_per_s, utilisation=1.0),
                     links=Links(node_nic_gbps=gbps, storage_nic_gbps=gbps, switch_port_gbps=gbps),
                     request_overhead_s=calibration.overhead_s)


def predict(calibration: Calibration, tokens: int, cached_tokens: int = 0, cached_blocks: int = 0) -> float:
    """Predicted TTFT of one request of `tokens` tokens whose first `cached_tokens` come from the pool in
    `cached_blocks` block reads (one storage reader: the demo's requests do not overlap on one engine)."""
    cost = cost_model(calibration)
    plan = FetchPlan(storage_bytes=cached_tokens * calibration.model.kv_bytes_per_token)
    return request_ttft(cost, plan, 1, cached_tokens, tokens) + cached_blocks * calibration.pool_request_s


@dataclass(frozen=True, slots=True)
class Comparison:
    """Predicted against measured mean TTFT of one set of requests."""

    name: str
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    @property
    def within(self) -> bool:
        return abs(self.error) <= TOLERANCE


def compare(name: str, calibration: Calibration, requests: Sequence[Mapping[str, float]]) -> Comparison:
    """Mean measured vs mean predicted TTFT over `requests`, each {"tokens", "cached_tokens", "cached_blocks",
    "ttft_s"}."""
    if not requests:
        raise ValueError(f"{name}: no requests to compare")
    measured = float(np.mean([r["ttft_s"] for r in requests]))
    predicted = float(np.mean([predict(calibration, int(r["tokens"]), int(r.get("cached_tokens", 0)),
                                       int(r.get("cached_blocks", 0))) for r in requests]))
    return Comparison(name, measured, predicted)


def render(rows: Sequence[tuple[Calibration, Comparison]]) -> list[str]:
    """The report's calibration table (markdown lines): per set of requests, the rates it was priced with and
    the predicted against the measured mean TTFT."""
    lines = ["| requests | prefill GFLOP/s (tokens/s at 1,024) | fixed ms | pool MB/s | measured mean TTFT s | "
             f"predicted (evaluation.ttft) s | error | within {TOLERANCE:.0%} |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for calibration, comp in rows:
        tokens_per_s = 1024 / (calibration.model.prefill_flops(0, 1024) / calibration.flops_per_s)
        lines.append(f"| {comp.name} | {calibration.flops_per_s / 1e9:.2f} ({tokens_per_s:.0f}) | "
                     f"{calibration.overhead_s * 1e3:.1f} | {calibration.pool_bytes_per_s / 1e6:.1f} | "
                     f"{comp.measured_s:.3f} | {comp.predicted_s:.3f} | {comp.error:+.1%} | "
                     f"{'yes' if comp.within else 'NO'} |")
    return lines
