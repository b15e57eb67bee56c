"""The demo's trace excerpt, work split, report and burst section on small hand-made data (no network); then
the demo with its burst on a real testbed (Mininet, root: counts, not timings)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kvpool.prefix_hash import block_id_prefix_hashes
from topo.cli import build_parser
from topo.demo import DemoOptions, block_tokens, deal, load_excerpt, render, run_demo, summarise
from topo.host_replay import block_data
from topo.switches import TestbedError
from topo.testbed import TestbedOptions, stop_recorded

from .conftest import free_port


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


# ---- the burst: every host reads one shared block at once, with and without coalescing --------------------

def _reader(host, verified=True, switch=0):
    return {"host": host, "returncode": 0, "verified": verified, "bytes": 16, "retries": 0, "seconds": 1.5,
            "chunks_by_status": {"HIT_SERVER": 2 - switch, **({"HIT_SWITCH": switch} if switch else {})}}


def _burst(coalesced_gets=3, bypass_gets=8, verified=True):
    from topo.demo import InterfaceCounters, burst_mode

    return {"prefix_hash": "0x00000000000000aa", "version": 1, "block_bytes": 16384, "chunk_bytes": 8192,
            "chunks": 2, "hosts": 4, "sample_chunks": 2,
            "modes": {"coalescing": burst_mode([_reader(f"h{i}", verified) for i in range(1, 5)],
                                               InterfaceCounters(coalesced_gets, coalesced_gets, 3 * 8300), 3, 2),
                      "bypass": burst_mode([_reader(f"h{i}") for i in range(1, 5)],
                                           InterfaceCounters(bypass_gets, bypass_gets, 8 * 8300), 8, 2)}}


def test_sampled_chunks_spread_over_the_block_with_both_ends():
    from topo.demo import sample_chunks

    picked = sample_chunks(2048, 16)
    assert len(picked) == 16 and picked[0] == 0 and picked[-1] == 2047 and picked == sorted(set(picked))
    assert sample_chunks(3, 16) == [0, 1, 2]


def test_a_reader_is_verified_only_by_the_blocks_hash():
    import hashlib

    from topo.demo import reader_record

    log = ("  chunk 0: HIT_SWITCH 40 µs (1 tries)\n  chunk 1: HIT_SERVER 90 µs (3 tries)\n"
           "released 100.000000 done 102.500000\n")
    good = reader_record("h1", log, b"abcd", hashlib.sha256(b"abcd").hexdigest(), 0)
    assert good["verified"] and good["chunks_by_status"] == {"HIT_SWITCH": 1, "HIT_SERVER": 1}
    assert good["retries"] == 2 and good["seconds"] == 2.5
    assert not reader_record("h1", log, b"abce", hashlib.sha256(b"abcd").hexdigest(), 0)["verified"]
    assert not reader_record("h1", "", None, hashlib.sha256(b"").hexdigest(), 1)["verified"]


def test_burst_section_reports_fan_in_and_bytes_of_both_bursts():
    s = summarise([], {}, hot=1)
    s["burst"] = _burst()
    text = render(s, TestbedOptions(hosts=4))
    assert "## Burst: 4 hosts read one 0 MiB block at once" in text
    assert "| coalescing (switch) | 4/4 | 3 | 3 |" in text and "| bypass (no coalescing) | 4/4 | 8 | 8 |" in text
    assert "cut what the storage node sent 2.7×" in text
    assert not _burst(verified=False)["modes"]["coalescing"]["all_verified"]


def test_demo_plot_shows_the_burst(tmp_path):
    from topo.demo import plot

    s = summarise([], {}, hot=1)
    s["burst"] = _burst()
    plot(s, tmp_path / "demo.png")
    assert (tmp_path / "demo.png").stat().st_size > 0


def test_demo_burst_size_option_reaches_the_demo():
    assert build_parser().parse_args(["demo"]).burst_mib == 16
    assert build_parser().parse_args(["demo", "--burst-mib", "0"]).burst_mib == 0


# ---- on a real testbed (Mininet, root): the demo with its burst, counts only ------------------------------

BURST_ROWS = [{"timestamp": t * 100, "input_length": 1024, "output_length": 1, "hash_ids": [0, t % 3 + 1]}
        for t in range(8)]


@pytest.mark.slow
@pytest.mark.mininet
@pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root")
@pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed")
def test_burst_readers_all_verify_and_coalescing_cuts_the_storage_fan_in(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in BURST_ROWS))
    options = TestbedOptions(state_dir=tmp_path / "state", build_dir=tmp_path / "build", grpc_base=free_port(),
                             api_base=free_port(), metrics_base=0)
    out = tmp_path / "demo"
    try:
        run_demo(options, DemoOptions(trace=trace, out=out, requests=len(BURST_ROWS), duration=1.0,
                                      burst_bytes=4 << 20))
    finally:
        stop_recorded(options.state_dir)
    burst = json.loads((out / "results.json").read_text())["burst"]
    coalesced, bypass = burst["modes"]["coalescing"], burst["modes"]["bypass"]
    assert burst["hosts"] >= 2 and burst["chunks"] == 512
    for mode in (coalesced, bypass):
        assert len(mode["readers"]) == burst["hosts"] and all(r["verified"] for r in mode["readers"])
    # what the storage node sent (a span GET asks for several chunks: GET datagrams are fewer than chunks)
    assert bypass["storage_replies"] >= burst["hosts"] * burst["chunks"]
    assert coalesced["storage_replies"] < bypass["storage_replies"]
    assert "## Burst" in (out / "report.md").read_text()
