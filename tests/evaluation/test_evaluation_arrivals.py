"""Arrival spread of shared blocks and the reads each sharing mechanism merges, on inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.arrivals import read_starts, spread
from evaluation.sharing import Sharing, sends_for
from evaluation.stream import BlockStream
from evaluation.traces import Request, Trace

# Block 1 read at 0, 2 ms, 10 ms and 1 s; block 2 at 5 s and 5.5 s; block 3 once.
READS = ((0.0, 1), (0.002, 1), (0.010, 1), (1.0, 1), (5.0, 2), (5.5, 2), (6.0, 3))


def stream_of(reads: tuple[tuple[float, int], ...]) -> BlockStream:
    return BlockStream.from_trace(Trace("known", tuple(Request(t, 512, 1, (b,)) for t, b in reads)))


def test_read_starts_keeps_blocks_read_at_least_min_reads_times_sorted() -> None:
    starts = read_starts(stream_of(READS))
    assert sorted(s.tolist() for s in starts) == [[0.0, 0.002, 0.010, 1.0], [5.0, 5.5]]
    assert [s.tolist() for s in read_starts(stream_of(READS), min_reads=3)] == [[0.0, 0.002, 0.010, 1.0]]
    assert read_starts(stream_of(((1.0, 4),))) == []


def test_spread_gives_gap_percentiles_overlap_and_merged_shares() -> None:
    mechanisms = {"rt": (Sharing("round-trip", round_trip_s=0.004), 0.02),
                  "join": (Sharing("stream-join", round_trip_s=0.004), 0.02),
                  "window": (Sharing("incast-window", incast_window_s=1.0), 0.02)}
    got = spread("known", stream_of(READS), {"9 ms": 0.009, "0.6 s": 0.6}, mechanisms)
    assert (got.blocks, got.reads, got.repeat_reads) == (2, 6, 4)
    gaps = [0.002, 0.008, 0.99, 0.5]
    assert got.gap_p50_s == pytest.approx(float(np.percentile(gaps, 50)))
    assert got.gap_p50_s == pytest.approx(0.254)
    assert got.gap_p99_s == pytest.approx(float(np.percentile(gaps, 99)))
    assert got.overlap == {"9 ms": 0.5, "0.6 s": 0.75}
    # Round trip: only the read 2 ms after the first merges. Stream join: the 10 ms one too, paying half a
    # block (10 of 20 ms missed). Incast window: everything in the same second, block 2's pair included.
    assert got.merged == {"rt": 0.25, "join": 0.5, "window": 0.75}
    assert got.sends_per_read["rt"] == pytest.approx(5 / 6)
    assert got.sends_per_read["join"] == pytest.approx(4.5 / 6)
    assert got.sends_per_read["window"] == pytest.approx(3 / 6)
    assert got.as_dict()["repeat_reads"] == 4


def test_sends_for_round_trip_counts_a_block_per_reader_outside_one_round_trip() -> None:
    rt = Sharing("round-trip", round_trip_s=0.004)
    assert sends_for([0.0] * 8, rt, 0.1) == 1.0
    assert sends_for([0.05 * i for i in range(8)], rt, 0.1) == 8.0
    assert sends_for([0.003, 0.0, 0.0045], rt, 0.1) == 2.0  # the third is 4.5 ms after the first: its own send


def test_stream_join_with_immediate_patches_charges_each_missed_part_and_starts_a_new_stream_after_the_transfer(
) -> None:
    join = Sharing("stream-join", round_trip_s=0.0, patch_pass=False)
    # Eight readers 50 ms apart on a 200 ms stream: 1 + 0.25 + 0.5 + 0.75, then a new stream at 200 ms, ...
    assert sends_for([0.05 * i for i in range(8)], join, 0.2) == pytest.approx(2 * (1 + 0.25 + 0.5 + 0.75))
    assert sends_for([0.0, 0.5], join, 0.2) == 2.0


def test_the_patch_pass_sends_the_longest_missed_part_once_and_lives_on_for_readers_that_come_during_it() -> None:
    join = Sharing("stream-join", round_trip_s=0.0)
    # Four readers 50 ms apart on a 200 ms stream: 1 for the first pass, then the patch pass sends the longest
    # missed part once (0.75), each subscriber paying what it adds to it (0.25 each)
    assert sends_for([0.05 * i for i in range(4)], join, 0.2) == pytest.approx(1.75)
    # Four more, 200-350 ms: the stream is in its patch pass (0.2 + 0.75 x 0.2 = 0.35 s). The first of them
    # joins at the block's end (the patch pass now covers the whole block: 0.25 more) and the patch front is
    # at 0; the next ones find it at 0.25, 0.5, 0.75 of the block: what the patch pass had sent before they came
    # nests too, so the node sends the longest of it (0.75) once more for all three, not 0.25 + 0.5 + 0.75
    assert sends_for([0.05 * i for i in range(8)], join, 0.2) == pytest.approx(1.75 + 0.25 + 0.75)
    assert sends_for([0.0, 0.5], join, 0.2) == 2.0  # after the first pass and no patch pass: a new stream
    # in step: nobody missed anything, no patch pass
    assert sends_for([0.0] * 8, join, 0.2) == 1.0


def test_incast_window_merges_within_aligned_windows_only() -> None:
    window = Sharing("incast-window", incast_window_s=1.0)
    assert sends_for([0.1, 0.9, 0.99], window, 0.0) == 1.0
    assert sends_for([0.9, 1.1], window, 0.0) == 2.0


def test_unknown_mechanism_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown sharing mechanism"):
        Sharing("multicast-magic")
    with pytest.raises(ValueError):
        Sharing("round-trip", round_trip_s=-1.0)


@pytest.mark.parametrize("mechanism", ["round-trip", "incast-window", "stream-join"])
def test_block_sends_quick_paths_agree_with_shared_reads(mechanism: str) -> None:
    from evaluation.arrivals import block_sends
    from evaluation.sharing import SharedReads

    rng = np.random.default_rng(5)
    starts = [np.sort(rng.exponential(0.01, size=n).cumsum()) for n in (2, 5, 30, 200)]
    sharing = Sharing(mechanism, round_trip_s=0.004, incast_window_s=0.05)
    own = 0
    sent = 0.0
    for times in starts:
        shared = SharedReads(sharing, 0.02)
        for t in times.tolist():
            cost = shared.read(0, 0, t)
            sent += cost
            own += cost == 1.0
    assert block_sends(starts, sharing, 0.02) == (own, pytest.approx(sent))


def test_study_gives_a_row_per_trace_and_threshold_with_every_link_and_mechanism() -> None:
    from evaluation.arrivals import study

    hot = tuple((0.001 * i, 9) for i in range(8))  # block 9: eight reads 1 ms apart
    got = study({"known": stream_of(READS + hot)}, 16 << 20, (100.0,), {"rt": Sharing("round-trip")}, 100.0)
    assert [(r["trace"], r["min_reads"], r["blocks"]) for r in got["rows"]] == [("known", 2, 3), ("known", 8, 1)]
    assert set(got["transfer_s"]) == {"100 Gb/s", "testbed 16 MiB"}
    assert got["transfer_s"]["100 Gb/s"] == pytest.approx((16 << 20) * 8 / 100e9)
    hot_row = got["rows"][1]
    # 1 ms apart against a 4 ms round trip: reads 1-3 join the first, 4 starts a stream, 5-7 join it.
    assert hot_row["merged"]["rt"] == pytest.approx(6 / 7)
    assert hot_row["overlap"]["testbed 16 MiB"] == 1.0


def test_coarse_stamps_are_counted_and_spread_over_the_step() -> None:
    from evaluation.arrivals import spread_stamps, stamps

    times = [0.0, 0.0, 0.0, 3.0, 3.0, 6.0]
    assert stamps(times) == (2.0, 3.0)
    assert spread_stamps(times).tolist() == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.5, 6.0])
    assert stamps([0.0, 0.5, 2.0]) == (1.0, pytest.approx(1.0))
    assert spread_stamps([0.0, 0.5, 2.0]).tolist() == [0.0, 0.5, 2.0]


def test_study_adds_spread_stamp_rows_for_a_coarsely_stamped_trace() -> None:
    from evaluation.arrivals import study

    # Ten readers of block 5 stamped together at 0 s, the next stamp 3 s later: as stamped, 9 of 9 repeat reads
    # merge within one round trip; spread over the 3 s step (300 ms apart), none does.
    reads = tuple((0.0, 5) for _ in range(10)) + ((3.0, 6),) * 10
    got = study({"coarse": stream_of(reads)}, 16 << 20, (100.0,), {"rt": Sharing("round-trip")}, 100.0, (8,))
    names = [r["trace"] for r in got["rows"]]
    assert names == ["coarse", "coarse, stamps spread over 3 s"]
    assert got["rows"][0]["merged"]["rt"] == 1.0 and got["rows"][1]["merged"]["rt"] == 0.0
    assert got["rows"][0]["requests_per_stamp"] == 10.0


def test_the_default_mechanism_is_the_built_stream_join_bounded_at_64_subscribers() -> None:
    from evaluation.sharing import MECHANISMS, STREAM_SUBSCRIBERS

    assert Sharing().mechanism == "stream-join" and MECHANISMS[0] == "stream-join"
    assert Sharing().max_subscribers == STREAM_SUBSCRIBERS == 64
    assert "as built" in Sharing().label() and "coalescing only" in Sharing("round-trip").label()
    with pytest.raises(ValueError):
        Sharing(max_subscribers=-1)


def test_a_full_stream_forwards_later_readers_whole_and_the_next_stream_starts_after_it() -> None:
    from evaluation.sharing import SharedReads

    reads = SharedReads(Sharing("stream-join", round_trip_s=0.0, max_subscribers=2, patch_pass=False), transfer_s=1.0)
    costs = [reads.read(0, 0, t) for t in (0.0, 0.25, 0.5, 0.75)]
    # Origin, two subscribers paying what they missed, then the third late reader finds the stream full.
    assert costs == pytest.approx([1.0, 0.25, 0.5, 1.0])
    # The full stream's extra reader did not become an origin: the stream still ends 1 s after the first.
    assert reads.read(0, 0, 0.9) == 1.0
    assert reads.read(0, 0, 1.2) == 1.0  # the stream ended: this reader is the next one's origin ...
    assert reads.read(0, 0, 1.3) == pytest.approx(0.1)  # ... and this one subscribes to it
    # Another node or block has streams of its own.
    assert reads.read(1, 0, 0.3) == 1.0 and reads.read(0, 1, 0.3) == 1.0


def test_with_the_bound_at_64_sixty_five_joiners_cost_one_block_more() -> None:
    starts = [0.0] + [0.5] * 65  # 65 readers half-way through a 1 s stream
    immediate = Sharing("stream-join", round_trip_s=0.0, patch_pass=False)
    assert sends_for(starts, immediate, 1.0) == pytest.approx(1.0 + 64 * 0.5 + 1.0)
    # with the patch pass the 64 subscribers' missed half is sent once
    assert sends_for(starts, Sharing("stream-join", round_trip_s=0.0), 1.0) == pytest.approx(1.0 + 0.5 + 1.0)


def test_a_full_stream_in_its_patch_pass_still_forwards_later_readers_whole() -> None:
    from evaluation.sharing import SharedReads

    reads = SharedReads(Sharing("stream-join", round_trip_s=0.0, max_subscribers=2), transfer_s=1.0)
    assert [reads.read(0, 0, t) for t in (0.0, 0.25, 0.5, 0.75)] == pytest.approx([1.0, 0.25, 0.25, 1.0])
    assert reads.read(0, 0, 1.2) == 1.0  # the patch pass (to 1.5 s) is full too: a block of its own
    assert reads.read(0, 0, 1.6) == 1.0  # the stream ended: the next one's origin ...
    assert reads.read(0, 0, 1.7) == pytest.approx(0.1)  # ... and a subscriber of it


def test_late_share_counts_repeat_reads_past_the_heat_window() -> None:
    got = spread("known", stream_of(READS), {}, {})
    # Block 1: 2 ms, 10 ms, 1 s after its first (1 s is not past the window); block 2: 0.5 s: none is late.
    assert got.late_share == 0.0
    late = spread("late", stream_of(((0.0, 1), (0.3, 1), (1.5, 1), (4.0, 1))), {}, {})
    assert late.late_share == pytest.approx(2 / 3)
    assert late.as_dict()["late_share"] == pytest.approx(2 / 3)


def test_a_stream_costs_one_block_plus_its_last_joiners_missed_part_whatever_the_members() -> None:
    from evaluation.sharing import SharedReads

    join = Sharing("stream-join", round_trip_s=0.0)
    # Readers at 0.1, 0.3, 0.6 s of a 1 s stream: 1 + J / count with J the last joiner's 0.6, for 4 or 40
    # members joining at those points
    assert sends_for([0.0, 0.1, 0.3, 0.6], join, 1.0) == pytest.approx(1.6)
    assert sends_for([0.0] + [0.1, 0.3, 0.6] * 13, join, 1.0) == pytest.approx(1.6)
    # Each subscriber pays what its missed part adds to the longest so far
    reads = SharedReads(join, 1.0)
    assert [reads.read(0, 0, t) for t in (0.0, 0.3, 0.1, 0.6)] == pytest.approx([1.0, 0.3, 0.0, 0.3])


def test_a_switch_that_copies_slower_than_a_lone_reader_slows_the_stream_so_later_readers_join_its_first_pass(
) -> None:
    from evaluation.sharing import SharedReads

    join = Sharing("stream-join", round_trip_s=0.0)
    # A lone reader reads the block in 0.1 s (10 blocks/s); the switch delivers 10 blocks/s in all, so with m
    # members the stream moves at 10 / m. Readers at 0, 50 and 100 ms: the second joins at 0.5 (the stream was
    # alone), the third at 0.5 + 0.05 x 5 = 0.75, still in the first pass: 1 + 0.75 blocks.
    slow = SharedReads(join, 0.1, delivery=lambda members: 10.0)
    assert [slow.read(0, 0, t) for t in (0.0, 0.05, 0.1)] == pytest.approx([1.0, 0.5, 0.25])
    # At line rate the stream ends at 100 ms: the third reader finds its patch pass (at 0), which now covers
    # the whole block: 2 blocks.
    fast = SharedReads(join, 0.1)
    assert sum(fast.read(0, 0, t) for t in (0.0, 0.05, 0.1)) == pytest.approx(2.0)
    # A delivery faster than the lone pace changes nothing: a stream never moves faster than a lone reader
    capped = SharedReads(join, 0.1, delivery=lambda members: 1000.0)
    assert sum(capped.read(0, 0, t) for t in (0.0, 0.05, 0.1)) == pytest.approx(2.0)


def test_members_finish_when_the_next_pass_reaches_their_join_point() -> None:
    from evaluation.sharing import SharedReads

    reads = SharedReads(Sharing("stream-join", round_trip_s=0.0, max_subscribers=2), 1.0, timed=True)
    for t in (0.0, 0.25, 0.5, 0.6):
        reads.read(0, 0, t)
    # The origin with the first pass (1 s); the subscribers when the patch pass (from 1 s, to 0.5) reaches the
    # points they joined at; the third late reader found the stream full and read on its own (None)
    assert reads.finish_times() == pytest.approx([1.0, 1.25, 1.5, None])  # type: ignore[arg-type]
    # With immediate patches a subscriber fetches its missed part at once and finishes with the stream
    immediate = SharedReads(Sharing("stream-join", round_trip_s=0.0, patch_pass=False), 1.0, timed=True)
    for t in (0.0, 0.5):
        immediate.read(0, 0, t)
    assert immediate.finish_times() == pytest.approx([1.0, 1.0])
    # Behind a switch delivering 1 block/s in all, two members move at 0.5 block/s: the subscriber that joined
    # at 0.5 (the origin alone until then) has the rest by 1.5 s and its missed half by 2.5 s
    slow = SharedReads(Sharing("stream-join", round_trip_s=0.0), 1.0, delivery=lambda members: 1.0, timed=True)
    for t in (0.0, 0.5):
        slow.read(0, 0, t)
    assert slow.finish_times() == pytest.approx([1.5, 2.5])
    with pytest.raises(ValueError, match="timed"):
        SharedReads(Sharing(), 1.0).finish_times()  # untimed (the cluster replays): costs only
