"""The model-versus-testbed predictions on rows with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.sharing import Sharing
from evaluation.testbed import compare, predict, processor_sharing, starts_over


def test_processor_sharing_splits_the_rate_among_active_jobs() -> None:
    # Two blocks at 1 block/s starting together both end at 2 s; a third starting at 2 s ends at 3 s.
    assert processor_sharing([0.0, 0.0, 2.0], [1.0, 1.0, 1.0], 1.0) == pytest.approx([2.0, 2.0, 3.0])
    # One block alone for 0.5 s, then shared: the first ends at 1.5 s, the second at 2 s.
    assert processor_sharing([0.0, 0.5], [1.0, 1.0], 1.0) == pytest.approx([1.5, 2.0])
    assert processor_sharing([0.0, 0.1], [1.0, 0.0], 1.0) == pytest.approx([1.0, 0.1])
    # A node of 4 blocks/s, no stream above 1 block/s: two blocks together take 1 s, not 0.5 s.
    assert processor_sharing([0.0, 0.0], [1.0, 1.0], 4.0, cap=1.0) == pytest.approx([1.0, 1.0])


def test_without_merging_every_read_costs_a_block_and_readers_queue() -> None:
    p = predict(4, 0.0, 0.1, None)
    assert p["busiest_blocks_per_read"] == 1.0
    assert p["p99_s"] == pytest.approx(0.4)
    apart = predict(4, 0.3, 0.1, None)  # 100 ms apart, 100 ms each: no overlap
    assert apart["p99_s"] == pytest.approx(0.1)


def test_readers_within_one_round_trip_share_one_stream() -> None:
    p = predict(8, 0.002, 0.1, Sharing("round-trip", round_trip_s=0.004))
    assert p["busiest_blocks_per_read"] == pytest.approx(1 / 8)
    assert p["p99_s"] == pytest.approx(0.1, abs=0.003)
    spread = predict(8, 0.5, 0.1, Sharing("round-trip", round_trip_s=0.004))
    assert spread["busiest_blocks_per_read"] == 1.0
    assert starts_over(3, 1.0) == [0.0, 0.5, 1.0]


def test_compare_reads_the_benchmarks_json(tmp_path: Path) -> None:
    assert compare(tmp_path, Sharing()) is None
    mooncake = {"lone_block_time_s": {"off": 0.1}, "rows": [
        {"replication": "off", "readers": 4, "spread_s": 0.0, "spread_label": "0 ms",
         "busiest_blocks_per_read": 1.0, "p99_s": 0.5},
        {"replication": "off", "readers": 4, "spread_s": 0.6, "spread_label": "600 ms",
         "busiest_blocks_per_read": 1.0, "p99_s": 0.1}]}
    incast = {"rows": [
        {"block_mib": 16, "readers": 1, "coalescing": "off", "reader_mode": "processes",
         "completion_s": {"p50": 0.1, "p99": 0.1}, "storage_gets_per_chunk": 1.0, "start_spread_ms": 0.0},
        {"block_mib": 16, "readers": 8, "coalescing": "on", "reader_mode": "in-step",
         "completion_s": {"p50": 0.1, "p99": 0.12}, "storage_gets_per_chunk": 1.0, "start_spread_ms": 1.0}]}
    (tmp_path / "mooncake_fanout.json").write_text(json.dumps(mooncake))
    (tmp_path / "incast.json").write_text(json.dumps(incast))
    rows = compare(tmp_path, Sharing("round-trip", round_trip_s=0.004))["rows"]  # type: ignore[index]
    assert [r["bench"] for r in rows] == ["mooncake_fanout", "mooncake_fanout", "incast"]
    # The node's rate is fitted on the narrowest 4-reader row (4 blocks by 0.5 s: 8 blocks/s), so that row fits
    # exactly; four readers 200 ms apart each get 8 blocks/s alone (below a lone reader's 10): 0.125 s.
    assert rows[0]["fitted"] and rows[0]["p99_error"] == pytest.approx(0.0)
    assert not rows[1]["fitted"] and rows[1]["p99_predicted_s"] == pytest.approx(0.125)
    assert rows[1]["p99_error"] == pytest.approx(0.25)
    assert rows[2]["busiest_predicted"] == pytest.approx(1 / 8) and rows[2]["busiest_error"] == pytest.approx(0.0)


def test_stream_join_rows_pay_the_part_before_the_join_and_a_slower_stream_lives_longer() -> None:
    # Eight readers over 50 ms of a 100 ms lone read, at line rate (no delivery bound):
    # with immediate patches, subscribers pay i × 50/7 ms of 100 ms each
    immediate = Sharing("stream-join", round_trip_s=0.0, patch_pass=False)
    p = predict(8, 0.05, 0.1, immediate)
    assert p["busiest_blocks_per_read"] == pytest.approx((1 + sum(0.5 * i / 7 for i in range(1, 8))) / 8)
    # as built, the patch pass sends the last joiner's missed half once for all of them: 1 + J / count
    built = predict(8, 0.05, 0.1, Sharing("stream-join", round_trip_s=0.0))
    assert built["busiest_blocks_per_read"] == pytest.approx((1 + 0.5) / 8)
    # A switch that delivers 20 blocks/s in all: the stream slows as members join, the joiners missed less
    slow = predict(8, 0.05, 0.1, immediate, delivery=lambda members: 20.0)
    assert slow["busiest_blocks_per_read"] < p["busiest_blocks_per_read"]
    # Readers spread over five lone reads: at line rate the stream ends after 100 ms and later readers find
    # its patch pass or open new streams; behind a switch of 2 blocks/s in all the stream moves at 2 / m and
    # lives for seconds, every reader joins its first pass: the last at 0.5 s, with the front at about 0.375
    spread = Sharing("stream-join", round_trip_s=0.0)
    assert predict(8, 0.5, 0.1, spread)["busiest_blocks_per_read"] > 0.3
    one = predict(8, 0.5, 0.1, spread, delivery=lambda members: 2.0)
    assert one["busiest_blocks_per_read"] == pytest.approx((1 + 0.375) / 8, rel=0.02)
    # The last member needs the rest of the first pass and its missed part at 2 / 8 blocks/s: 2.5 + 1.5 s
    assert one["p99_s"] == pytest.approx(4.0, rel=0.02)
    assert predict(8, 0.1, 0.1, Sharing("round-trip", round_trip_s=0.004))["busiest_blocks_per_read"] == 1.0


def test_bed_rate_interpolates_between_fitted_readers_and_is_flat_beyond() -> None:
    from evaluation.testbed import BedRate

    rate = BedRate(((8, 8.0), (16, 12.0)))
    assert [rate(1), rate(8), rate(12), rate(16), rate(64)] == pytest.approx([8.0, 8.0, 10.0, 12.0, 12.0])
    # processor sharing with a rate per active count: two jobs share 8 blocks/s, 4 each (below the cap of 5)
    assert processor_sharing([0.0, 0.0], [1.0, 1.0], rate, cap=5.0) == pytest.approx([0.25, 0.25])
    assert processor_sharing([0.0], [1.0], rate, cap=5.0) == pytest.approx([0.2])  # alone: the cap


def test_compare_reads_the_incast_spread_table(tmp_path: Path) -> None:
    def row(system: str, n: int, spread: float, busiest: float, p99: float, label: str) -> dict:
        return {"system": system, "mtu": 9000, "readers": n, "spread_s": spread, "spread_label": label,
                "busiest_blocks_per_read": busiest, "p99_s": p99}

    incast = {"spread": {"lone_block_time_s": {"no switch function, MTU 9000": 0.1,
                                               "kvswitch (coalescing + stream join), MTU 9000": 0.1,
                                               "Mooncake": 0.05},
                         "rows": [row("no switch function", 4, 0.0, 1.0, 0.4, "0 ms"),
                                  row("kvswitch (coalescing + stream join)", 4, 0.0, 0.26, 0.1, "0 ms"),
                                  row("kvswitch (coalescing)", 4, 0.3, 1.0, 0.1, "300 ms"),
                                  {**row("Mooncake", 4, 0.0, 1.0, 0.2, "0 ms"), "mtu": 1500}]}}
    (tmp_path / "incast.json").write_text(json.dumps(incast))
    rows = compare(tmp_path, Sharing())["rows"]  # type: ignore[index]
    assert [(r["bench"], r["setup"]) for r in rows] == [
        ("incast spread", "no switch function, MTU 9000"),
        ("incast spread", "kvswitch (coalescing + stream join), MTU 9000"),
        ("incast spread", "kvswitch (coalescing), MTU 9000"), ("incast spread", "Mooncake, MTU 1500")]
    assert rows[0]["fitted"] and rows[0]["busiest_predicted"] == 1.0
    assert rows[1]["busiest_predicted"] == pytest.approx(1 / 4)  # together: one stream, three joiners at 0
    assert rows[1]["busiest_error"] == pytest.approx(1 / 4 / 0.26 - 1)
    # Coalescing alone, readers 100 ms apart: a block each; the lone time falls back to the pool's.
    assert rows[2]["busiest_predicted"] == 1.0
    assert rows[3]["fitted"] and rows[3]["p99_error"] == pytest.approx(0.0)


def test_spread_rows_price_the_immediate_patch_rows_without_the_patch_pass() -> None:
    from evaluation.testbed import BedRate, spread_rows

    def row(system: str, busiest: float) -> dict:
        return {"system": system, "mtu": 9000, "readers": 8, "spread_s": 0.1, "spread_label": "100 ms",
                "busiest_blocks_per_read": busiest, "p99_s": 0.5}

    spread = {"lone_block_time_s": {"kvswitch (coalescing + stream join), MTU 9000": 0.1},
              "rows": [row("kvswitch (coalescing + stream join)", 0.2),
                       row("kvswitch (coalescing + stream join), immediate patches", 0.5)]}
    built, immediate = spread_rows(spread, Sharing("stream-join", round_trip_s=0.0))
    # the same readers, spread over one lone block time, the switch's delivery fitted on the as-built row (the
    # narrowest stream-join row of 8 readers: 8 blocks by 0.5 s): the patch pass sends the last joiner's missed
    # part once, immediate patches pay every joiner's own
    delivery = BedRate(((8, 16.0),))
    assert built["fitted"] and not immediate["fitted"]
    assert built["busiest_predicted"] == pytest.approx(predict(8, 0.1, 0.1, Sharing("stream-join", round_trip_s=0.0),
                                                               delivery=delivery)["busiest_blocks_per_read"])
    assert immediate["busiest_predicted"] == pytest.approx(predict(
        8, 0.1, 0.1, Sharing("stream-join", round_trip_s=0.0, patch_pass=False), delivery=delivery)
        ["busiest_blocks_per_read"])
    assert built["busiest_predicted"] < immediate["busiest_predicted"]


def _spread_row(system: str, n: int, spread: float, busiest: float, p99: float) -> dict:
    return {"system": system, "mtu": 9000, "readers": n, "spread_s": spread, "spread_label": f"{spread:g} s",
            "busiest_blocks_per_read": busiest, "p99_s": p99}


STREAM = "kvswitch (coalescing + stream join)"


def test_the_switchs_delivery_is_fitted_on_the_narrowest_stream_row_never_on_the_row_predicted() -> None:
    from evaluation.testbed import spread_rows

    def table(fit_p99: float, late_busiest: float, late_p99: float) -> dict:
        return {"lone_block_time_s": {f"{STREAM}, MTU 9000": 0.2, "no switch function, MTU 9000": 0.2},
                "rows": [_spread_row(STREAM, 16, 0.0, 0.07, fit_p99),
                         _spread_row(STREAM, 16, 0.5, late_busiest, late_p99)]}

    built = Sharing("stream-join", round_trip_s=0.0)
    fit, late = spread_rows(table(3.2, 0.1, 3.0), built)
    assert fit["fitted"] and not late["fitted"]
    # The spread-0 row delivers 16 blocks by 3.2 s: 5 blocks/s in all (a lone reader's pace for one member),
    # 5 / m with m members. Readers 33 ms apart join its first pass; the front moves 5 / m x 33 ms between
    # them, so the last joins at 0.167 x (1 + 1/2 + ... + 1/15) = 0.553 of the block: 1.553 blocks for 16
    assert late["busiest_predicted"] == pytest.approx(1.553 / 16, rel=0.02)
    assert late["p99_predicted_s"] == pytest.approx(3.2, rel=0.05)  # one block each at 5 / 16 blocks/s
    # the predicted row's own measurement never moves its prediction; the fitted row's does
    _, other = spread_rows(table(3.2, 0.5, 9.0), built)
    assert other["busiest_predicted"] == late["busiest_predicted"]
    assert other["p99_predicted_s"] == late["p99_predicted_s"]
    _, faster = spread_rows(table(0.4, 0.1, 3.0), built)  # a switch delivering 40 blocks/s: the lone pace
    assert faster["busiest_predicted"] > late["busiest_predicted"]
    assert faster["p99_predicted_s"] < late["p99_predicted_s"]


def test_spread_rows_start_readers_at_their_measured_starts() -> None:
    from evaluation.testbed import spread_rows

    row = _spread_row(STREAM, 2, 0.0, 0.5, 0.1)  # 20 blocks/s: the stream keeps the lone pace
    late = {**row, "spread_s": 0.01, "per_reader": [{"start_s": 10.0}, {"start_s": 10.05}]}  # 50 ms apart
    table = {"lone_block_time_s": {f"{STREAM}, MTU 9000": 0.1}, "rows": [row, late]}
    _, measured = spread_rows(table, Sharing("stream-join", round_trip_s=0.0))
    # as planned (10 ms) the second would miss 0.1 of the block; it started 50 ms after the first: 0.5
    assert measured["busiest_predicted"] == pytest.approx((1 + 0.5) / 2)
