"""`make demo ENGINE=vllm`'s pure parts: trace ids → prompts, the requests it picks, the output comparison, the
engines' command lines (the Mininet run itself is the demo)."""

from __future__ import annotations

import json
from pathlib import Path

from topo.demo import TraceRequest
from topo.engine_demo import EngineDemoOptions, prompt_of, same_output, select_sharing, tokens_of
from topo.engines import EngineOptions, kv_transfer_config, vllm_argv

OPTIONS = EngineDemoOptions(trace=Path("unused"), out=Path("unused"), tokens_per_id=4, max_ids=3, vocab=50)


def request(*ids: int) -> TraceRequest:
    return TraceRequest(0, tuple(ids), 512 * len(ids))


def test_a_hash_id_is_always_the_same_tokens_and_ids_differ():
    assert tokens_of(7, 16, 2048) == tokens_of(7, 16, 2048)
    assert tokens_of(7, 16, 2048) != tokens_of(8, 16, 2048)
    assert all(3 <= t < 2048 for t in tokens_of(7, 1000, 2048))


def test_requests_sharing_hash_ids_share_a_token_prefix_of_as_many_blocks():
    a, b = prompt_of(request(0, 1, 2), OPTIONS), prompt_of(request(0, 1, 9), OPTIONS)
    assert a[:8] == b[:8] and a[8:] != b[8:]
    assert len(prompt_of(request(0, 1, 2, 3, 4), OPTIONS)) == 3 * 4  # capped at max_ids


def test_select_takes_sharing_requests_with_the_one_they_share_with():
    trace = [request(0, 1, 2), request(0, 5), request(0, 1, 2, 3), request(0, 6), request(0, 5, 7),
             request(0, 1, 8)]
    # 2 shares [0, 1, 2] with 0; 4 shares [0, 5] with 1; 5 shares [0, 1] with 2 (the latest); 3 shares only 0
    assert select_sharing(trace, 10, max_ids=3) == [0, 1, 2, 4, 5]
    assert select_sharing(trace, 2, max_ids=3) == [0, 2]
    assert select_sharing([request(0, 1), request(0, 2)], 10, max_ids=3) == []


def answer(tokens, top):
    return {"ttft_s": 0.1, "tokens": tokens, "top_logprobs": top, "cached_tokens": 0}


def test_same_output_needs_the_same_tokens_and_top_logprobs_within_tolerance():
    top = [{"5": -0.1, "6": -2.0}, {"7": -0.5, "8": -1.0}]
    assert same_output(answer([5, 7], top), answer([5, 7], top)) == (True, 0.0)
    close = [{"5": -0.1004, "6": -2.0}, {"7": -0.5, "8": -1.0}]
    assert same_output(answer([5, 7], close), answer([5, 7], top))[0]
    far = [{"5": -0.2, "6": -2.0}, {"7": -0.5, "8": -1.0}]
    assert not same_output(answer([5, 7], far), answer([5, 7], top))[0]
    other_top = [{"5": -0.1, "9": -2.0}, {"7": -0.5, "8": -1.0}]
    assert not same_output(answer([5, 7], other_top), answer([5, 7], top))[0]
    assert not same_output(answer([5, 8], top), answer([5, 7], top))[0]
    assert not same_output({"error": "HTTP 500"}, answer([5, 7], top))[0]


def test_pool_engine_command_line_carries_the_connector_config():
    options = EngineOptions(python=Path("/x/python"))
    config = json.loads(kv_transfer_config("10.0.0.200:7420", options, Path("/s")))
    assert config["kv_connector"] == "KVSwitchConnector"
    assert config["kv_connector_module_path"] == "connectors.vllm"
    assert config["kv_connector_extra_config"]["pool"] == "10.0.0.200:7420"
    assert config["kv_connector_extra_config"]["chunk_size"] == 8192
    argv = vllm_argv(options, Path("/m"), 8000, json.dumps(config))
    assert argv[argv.index("--kv-transfer-config") + 1] == json.dumps(config)
    assert "--no-enable-prefix-caching" in argv and "--skip-tokenizer-init" in argv
    assert argv[argv.index("--dtype") + 1] == "float32"  # the tiny preset's own, not the CPU's bfloat16
    assert "--kv-transfer-config" not in vllm_argv(options, Path("/m"), 8001, None)


def test_an_engine_testbed_has_two_hosts_unless_told_otherwise():
    from topo.cli import _options, build_parser

    parse = build_parser().parse_args
    assert _options(parse(["demo", "--engine", "vllm"])).hosts == 2
    assert _options(parse(["demo", "--engine", "vllm", "--hosts", "3"])).hosts == 3
    assert _options(parse(["demo"])).hosts is None  # the default demo is unchanged
    assert _options(parse(["run", "--engine", "vllm"])).hosts == 2


def test_engine_load_rate_sums_the_connectors_loads():
    from topo.engine_demo import engine_load_rate

    stats = {"h1": {"worker-1": {"counters": {"loaded_bytes": 3_000_000}, "seconds": {"load": 1.0}},
                    "scheduler-1": {"counters": {"hit_tokens": 5}, "seconds": {"lookup": 0.2}}},
             "h2": {"worker-2": {"counters": {"loaded_bytes": 1_000_000}, "seconds": {"load": 1.0}}}}
    assert engine_load_rate(stats) == 2_000_000
    assert engine_load_rate({"h1": {"worker-1": {"counters": {}}}}) is None


def test_the_prefill_bound_preset_gets_a_smaller_demo_and_other_presets_the_defaults():
    from topo.engine_demo import options_for_preset

    slow = options_for_preset("prefill-bound", Path("t"), Path("o"))
    tiny = options_for_preset("tiny", Path("t"), Path("o"))
    assert (slow.requests, slow.max_ids, max(slow.calibration_lengths)) == (8, 8, 2048)
    assert slow.max_ids * slow.tokens_per_id <= max(slow.calibration_lengths)  # the sweep covers every prompt
    assert tiny == EngineDemoOptions(trace=Path("t"), out=Path("o"))
    assert options_for_preset("prefill-bound", Path("t"), Path("o"), requests=3).requests == 3


def test_the_engine_demo_defaults_to_prefill_bound_and_run_to_tiny():
    from topo.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["demo", "--engine", "vllm"]).preset == "prefill-bound"
    assert parser.parse_args(["demo", "--engine", "vllm"]).engine_requests is None  # the preset's own count
    assert parser.parse_args(["run", "--engine", "vllm"]).preset == "tiny"
