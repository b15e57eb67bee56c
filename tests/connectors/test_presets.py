"""`connectors.presets`: every shipped preset loads, and `prefill-bound` keeps its KV small per token."""

from __future__ import annotations

import pytest

from connectors.presets import PRESETS, preset_config


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_is_a_llama_config(name: str) -> None:
    config = preset_config(name)
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_attention_heads"] % config["num_key_value_heads"] == 0


def test_prefill_bound_has_a_large_hidden_size_and_2_kib_of_kv_per_token() -> None:
    config = preset_config("prefill-bound")
    kv_bytes = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * 4  # fp32
    assert config["torch_dtype"] == "float32" and kv_bytes == 2048
    assert config["hidden_size"] >= 2048 and config["intermediate_size"] == 4 * config["hidden_size"]


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        preset_config("nope")
