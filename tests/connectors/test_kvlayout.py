"""Pool-block payloads gathered from and scattered into paged KV caches, bit for bit."""

from __future__ import annotations

import pytest
import torch

from connectors.kvlayout import PagedKV, layer_order
from connectors.options import ConnectorOptions

NUM_BLOCKS = 12


def caches(dtype: torch.dtype, fill: bool = True) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {f"model.layers.{i}.self_attn.attn": (torch.randn(NUM_BLOCKS, 2, 32, 128, generator=generator)
                                                 if fill else torch.zeros(NUM_BLOCKS, 2, 32, 128)).to(dtype)
            for i in (0, 1, 2, 10)}


def test_layers_in_model_order() -> None:
    assert layer_order(["l.10.a", "l.2.a", "l.1.a"]) == ["l.1.a", "l.2.a", "l.10.a"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_then_scatter_is_bit_exact(dtype: torch.dtype) -> None:
    source, target = caches(dtype), caches(dtype, fill=False)
    payload = PagedKV(source, NUM_BLOCKS).gather([3, 7])
    assert len(payload) == PagedKV(source, NUM_BLOCKS).payload_bytes(2) == 4 * 2 * 2 * 32 * 128 * source[
        "model.layers.0.self_attn.attn"].element_size()
    PagedKV(target, NUM_BLOCKS).scatter([5, 1], payload)
    for name in source:
        assert torch.equal(target[name][5], source[name][3]) and torch.equal(target[name][1], source[name][7])
        assert not target[name][0].any()


def test_scatter_from_first_leaves_the_engines_own_blocks_alone() -> None:
    source, target = caches(torch.float32), caches(torch.float32, fill=False)
    PagedKV(target, NUM_BLOCKS).scatter([5, 1], PagedKV(source, NUM_BLOCKS).gather([3, 7]), first=1)
    for name in source:
        assert not target[name][5].any() and torch.equal(target[name][1], source[name][7])


def test_payload_of_another_size_is_refused() -> None:
    kv = PagedKV(caches(torch.float32), NUM_BLOCKS)
    with pytest.raises(ValueError, match="payload"):
        kv.scatter([1, 2], kv.gather([1, 2])[:-4])


def test_cache_without_block_dimension_is_refused() -> None:
    with pytest.raises(ValueError, match="blocks"):
        PagedKV({"l.0": torch.zeros(3, 4)}, NUM_BLOCKS)


def test_options_refuse_unknown_keys_and_a_missing_pool() -> None:
    assert ConnectorOptions.from_mapping({"pool": "h:1", "block_tokens": 512}).block_tokens == 512
    with pytest.raises(ValueError, match="block_token"):
        ConnectorOptions.from_mapping({"pool": "h:1", "block_token": 512})
    with pytest.raises(ValueError, match="pool"):
        ConnectorOptions.from_mapping({"block_tokens": 256})
    with pytest.raises(ValueError, match="probe"):
        ConnectorOptions.from_mapping({"pool": "h:1", "probe": "get"})
