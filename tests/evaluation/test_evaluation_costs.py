"""Cost model: hand-computed block sizes, FLOPs and transfer times."""

import pytest

from evaluation.costs import (
    GPU,
    ControlCosts,
    FetchPlan,
    Links,
    fetch_seconds,
    prefill_seconds,
    storage_share_bytes_per_s,
)
from evaluation.model import ModelConfig, model_preset

TINY = ModelConfig("tiny", layers=2, attention_heads=4, kv_heads=2, head_dim=8, dtype_bytes=2, params=1000,
                   source="test")
GPU_1K = GPU("unit", peak_flops=2000.0, utilisation=0.5, host_bytes_per_s=100.0)  # 1,000 FLOP/s achieved


@pytest.mark.parametrize(
    ("name", "kv_bytes_per_token"),
    [
        ("llama-3-8b", 2 * 32 * 8 * 128 * 2),  # 131,072 B: 64 MiB per 512-token block
        ("llama-3-70b", 2 * 80 * 8 * 128 * 2),
        ("qwen2.5-7b", 2 * 28 * 4 * 128 * 2),
        ("mistral-7b", 2 * 32 * 8 * 128 * 2),
    ],
)
def test_kv_bytes_follow_layers_kv_heads_head_dim_and_dtype(name, kv_bytes_per_token):
    model = model_preset(name)
    assert model.kv_bytes_per_token == kv_bytes_per_token
    assert model.block_bytes(512) == 512 * kv_bytes_per_token


def test_llama_3_8b_block_is_64_mebibytes():
    assert model_preset("Llama-3-8B").block_bytes() == 64 * 2**20


def test_prefill_flops_hand_computed():
    # 3 tokens from scratch: linear 2*1000*3 = 6000; attention 4*2*4*8 * (1+2+3) = 256*6 = 1536.
    assert TINY.prefill_flops(0, 3) == 6000 + 1536
    # Positions 2..3 with 2 cached: linear 2*1000*2 = 4000; attention 256 * (3+4) = 1792.
    assert TINY.prefill_flops(2, 4) == 4000 + 1792
    assert TINY.prefill_flops(5, 5) == 0
    with pytest.raises(ValueError):
        TINY.prefill_flops(4, 2)


def test_prefill_seconds_divide_by_achieved_throughput():
    assert prefill_seconds(TINY, GPU_1K, 0, 3) == pytest.approx(7.536)


def test_storage_nic_is_shared_fairly_but_never_beyond_the_node_nic():
    links = Links(node_nic_gbps=8.0, storage_nic_gbps=32.0)  # 1 GB/s node, 4 GB/s storage
    assert storage_share_bytes_per_s(links, 1) == 1e9
    assert storage_share_bytes_per_s(links, 4) == 1e9
    assert storage_share_bytes_per_s(links, 8) == 0.5e9
    with pytest.raises(ValueError):
        storage_share_bytes_per_s(links, 0)


def test_fetch_time_adds_pcie_switch_and_contended_storage_transfers():
    links = Links(node_nic_gbps=8.0, storage_nic_gbps=8.0, switch_port_gbps=16.0)  # 1, 1, 2 GB/s
    control = ControlCosts(lookup_s=0.001)
    plan = FetchPlan(hbm_bytes=10**9, dram_bytes=200, switch_bytes=10**9, storage_bytes=10**9, switch_blocks=2)
    # HBM free; DRAM 200 B / 100 B/s = 2 s; switch 1 GB at min(1, 2) GB/s = 1 s + 2 lookups;
    # storage 1 GB at 1 GB/s / 4 readers = 4 s.
    assert fetch_seconds(plan, GPU_1K, links, 4, control) == pytest.approx(2 + 1 + 0.002 + 4)


def test_unknown_presets_name_the_known_ones():
    with pytest.raises(ValueError, match="llama-3-8b"):
        model_preset("gpt-9")
