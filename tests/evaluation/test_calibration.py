"""The calibration arithmetic: fits recover known rates, predictions price requests as evaluation.ttft does."""

from __future__ import annotations

import pytest

from evaluation.calibration import (
    Calibration,
    Comparison,
    PrefillSample,
    compare,
    cost_model,
    fit_pool_read,
    fit_prefill,
    model_from_hf_config,
    predict,
    render,
)
from evaluation.costs import FetchPlan
from evaluation.ttft import request_ttft

TINY = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 2048, "tie_word_embeddings": False,
        "torch_dtype": "float32"}


def test_model_from_the_tiny_preset_has_its_kv_bytes_and_parameter_count():
    model = model_from_hf_config("tiny", TINY)
    assert model.kv_bytes_per_token == 2 * 4 * 2 * 64 * 4 == 4096
    attention = 256 * 4 * 64 * 2 + 256 * 2 * 64 * 2
    per_layer = attention + 3 * 256 * 512 + 2 * 256
    assert model.params == 4 * per_layer + 2 * 2048 * 256 + 256


def test_fit_prefill_recovers_rate_and_overhead_exactly():
    model = model_from_hf_config("tiny", TINY)
    flops_per_s, overhead = 3.0e9, 0.012
    samples = [PrefillSample(n, overhead + model.prefill_flops(0, n) / flops_per_s) for n in (256, 512, 1024, 2048)]
    samples.append(PrefillSample(1024, overhead + model.prefill_flops(768, 1024) / flops_per_s, cached_tokens=768))
    fitted_rate, fitted_overhead = fit_prefill(model, samples)
    assert fitted_rate == pytest.approx(flops_per_s, rel=1e-9)
    assert fitted_overhead == pytest.approx(overhead, abs=1e-9)


def test_fit_pool_read_recovers_rate_and_per_block_cost():
    rate, per_block = 80e6, 0.002
    reads = [(b, per_block + b / rate) for b in (1 << 20, 2 << 20, 4 << 20)]
    fitted_rate, fitted_per_block = fit_pool_read(reads)
    assert fitted_rate == pytest.approx(rate, rel=1e-9)
    assert fitted_per_block == pytest.approx(per_block, abs=1e-9)


@pytest.mark.parametrize("samples", [[], [(1 << 20, 0.5), (2 << 20, 0.25)]])
def test_fits_refuse_data_that_cannot_give_a_rate(samples):
    with pytest.raises(ValueError):
        fit_pool_read(samples)


def test_prediction_is_overhead_plus_fetch_plus_prefill_of_the_rest():
    model = model_from_hf_config("tiny", TINY)
    cal = Calibration(model, flops_per_s=2e9, overhead_s=0.01, pool_bytes_per_s=50e6, pool_request_s=0.001)
    tokens, cached = 1536, 1024
    by_hand = (0.01 + cached * 4096 / 50e6 + model.prefill_flops(cached, tokens) / 2e9 + 4 * 0.001)
    assert predict(cal, tokens, cached, cached_blocks=4) == pytest.approx(by_hand, rel=1e-12)
    assert predict(cal, tokens) == pytest.approx(0.01 + model.prefill_flops(0, tokens) / 2e9, rel=1e-12)
    # the same price as the evaluator's per-request formula (evaluation.ttft.estimate uses request_ttft)
    plan = FetchPlan(storage_bytes=cached * model.kv_bytes_per_token)
    assert predict(cal, tokens, cached) == request_ttft(cost_model(cal), plan, 1, cached, tokens)


def test_a_full_hit_still_prefills_its_last_token():
    model = model_from_hf_config("tiny", TINY)
    cal = Calibration(model, flops_per_s=1e9, overhead_s=0.0, pool_bytes_per_s=1e12)
    assert predict(cal, 512, 512) == pytest.approx(model.prefill_flops(511, 512) / 1e9 + 512 * 4096 / 1e12)


def test_compare_means_and_the_25_percent_verdict():
    model = model_from_hf_config("tiny", TINY)
    cal = Calibration(model, flops_per_s=1e9, overhead_s=0.02, pool_bytes_per_s=1e8)
    requests = [{"tokens": 1024, "cached_tokens": 0, "ttft_s": predict(cal, 1024) * 1.2},
                {"tokens": 2048, "cached_tokens": 0, "ttft_s": predict(cal, 2048) * 1.2}]
    comp = compare("no pool", cal, requests)
    assert comp.predicted_s == pytest.approx((predict(cal, 1024) + predict(cal, 2048)) / 2)
    assert comp.error == pytest.approx(1 / 1.2 - 1)
    assert comp.within
    assert not Comparison("x", measured_s=1.0, predicted_s=1.26).within
    assert Comparison("x", measured_s=1.0, predicted_s=0.75).within
    table = "\n".join(render([(cal, comp)]))
    assert "| no pool |" in table and "yes" in table
