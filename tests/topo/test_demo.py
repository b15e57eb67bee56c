"""The demo's trace excerpt, work split and report, on small hand-made data (no network)."""

from __future__ import annotations

import json

import pytest

from kvpool.prefix_hash import block_id_prefix_hashes
from topo.cli import build_parser
from topo.demo import block_tokens, deal, load_excerpt, render, summarise
from topo.replay import block_data
from topo.switches import TestbedError
from topo.testbed import TestbedOptions


def write_trace(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]},
        {"timestamp": 3000, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]},
        {"timestamp": 6000, "input_length": 100, "output_length": 1, "hash_ids": [0]}]


def test_excerpt_takes_the_first_requests(tmp_path):
    reqs = load_excerpt(write_trace(tmp_path / "t.jsonl", ROWS), 2)
    assert [r.hash_ids for r in reqs] == [(0, 1, 2), (0, 3)]


def test_bad_trace_line_names_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{\"timestamp\": 1}\n")
    with pytest.raises(TestbedError, match=r"t.jsonl:2: not a Mooncake trace line"):
        load_excerpt(path, 10)


def test_missing_trace_is_a_clear_error(tmp_path):
    with pytest.raises(TestbedError, match="trace not found"):
        load_excerpt(tmp_path / "nope.jsonl", 10)


def test_trace_folder_instead_of_a_file_is_a_clear_error(tmp_path):
    with pytest.raises(TestbedError, match="not a file"):
        load_excerpt(tmp_path, 10)


def test_demo_runs_on_the_topology_it_is_given():
    args = build_parser().parse_args(["demo", "--topology", "leaf-spine", "--trace", "t.jsonl", "--out", "o"])
    assert args.topology == "leaf-spine"
    text = render(summarise([], {}, hot=1), TestbedOptions(hosts=4, topology="leaf-spine"))
    assert "4 hosts, leaf-spine topology" in text


def test_last_block_covers_the_remaining_tokens(tmp_path):
    reqs = load_excerpt(write_trace(tmp_path / "t.jsonl", ROWS), 3)
    assert [block_tokens(r) for r in reqs] == [[512, 512, 76], [512, 88], [100]]


def test_requests_are_dealt_round_robin_with_scaled_times_and_prefix_hashes(tmp_path):
    reqs = load_excerpt(write_trace(tmp_path / "t.jsonl", ROWS), 3)
    work = deal(reqs, ["h1", "h2"], duration=10.0)
    assert [w["i"] for w in work["h1"]] == [0, 2] and [w["i"] for w in work["h2"]] == [1]
    assert [w["t"] for w in work["h1"]] == [0.0, 10.0] and work["h2"][0]["t"] == 5.0
    assert work["h2"][0]["blocks"] == block_id_prefix_hashes([0, 3])


def test_block_contents_depend_on_the_prefix_hash():
    assert len(block_data(1, 300)) == 300 and block_data(1, 16) != block_data(2, 16)


def test_summary_counts_switch_hits_and_compares_with_storage_stats():
    records = [{"gets": [{"ph": 7, "outcome": "HIT_SWITCH", "us": 50, "correct": True,
                          "chunks": [["HIT_SWITCH", 40], ["HIT_SWITCH", 60]]},
                         {"ph": 8, "outcome": "MISS", "us": 300}], "puts": 1, "inserts": 1, "errors": 0},
               {"gets": [{"ph": 7, "outcome": "HIT_SERVER", "us": 500, "correct": True,
                          "chunks": [["HIT_SERVER", 400], ["HIT_SERVER", 450]]}], "puts": 0, "inserts": 0,
                "errors": 0}]
    s = summarise(records, {7: 1, 8: 1}, hot=5)
    assert s["switch_hit_ratio_chunks"] == 0.5 and s["switch_hit_ratio_blocks"] == pytest.approx(1 / 3)
    assert s["hot_blocks"][0] == {"prefix_hash": f"{7:#018x}", "client_gets": 2, "storage_gets": 1}
    text = render(s, TestbedOptions(hosts=2))
    assert "switch hit ratio: 0.500 of chunks" in text and "| HIT_SWITCH | 2 |" in text


@pytest.mark.parametrize("argv", [["run", "--hosts", "0"], ["run", "--target", "tofino"], ["demo", "--requests", "many"],
                                  ["launch"]])
def test_bad_command_lines_print_usage(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2 and "usage:" in capsys.readouterr().err


def test_demo_defaults_to_the_shipped_excerpt():
    args = build_parser().parse_args(["demo"])
    assert args.trace.is_file() and args.trace.parent.name == "traces" and not args.resume
    assert len(load_excerpt(args.trace, 5)) == 5


def test_controller_policy_and_metrics_options_reach_the_controller_command_line():
    from topo.cli import _options
    from topo.testbed import Testbed

    args = build_parser().parse_args(["run", "--admission", "always", "--param", "admission.threshold=0.5",
                                      "--param", "model.x=1", "--metrics-base", "9999"])
    bed = Testbed(_options(args))
    assert bed._controller_policy_args() == ["--admission", "always", "--param", "admission.threshold=0.5",
                                             "--param", "model.x=1"]
    assert bed.metrics_url(2) == "http://127.0.0.1:10000/metrics"
    assert Testbed(_options(build_parser().parse_args(["run", "--metrics-base", "0"]))).metrics_url(1) is None


def test_fresh_start_removes_only_this_topologys_node_folders(tmp_path):
    from topo.testbed import Testbed

    for name in ("s1", "st1", "mine"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "controller.sqlite").write_text("old")
    assert Testbed(TestbedOptions(state_dir=tmp_path))._remove_last_run() == ["s1/", "st1/"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_bridge_target_refuses_leaf_spine():
    from topo.testbed import Testbed

    with pytest.raises(TestbedError, match="L2 loop"):
        Testbed(TestbedOptions(target="bridge", topology="leaf-spine"))
