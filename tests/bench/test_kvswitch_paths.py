"""bench.kvswitch_paths measures what it names: its span GETs open coalescing entries and the block's stream, its
span replies match them (the last one frees the entry), its probe replies match nothing, every frame leaves once
towards its addressee; and the derived reader/probe bound is computed as documented."""

from __future__ import annotations

import pytest

from bench.kvswitch_paths import (
    READER_PORT,
    SPAN,
    STORAGE_PORT,
    build_frames,
    configured_switch,
    derived,
    run_classes,
)


def events(sw, counter: str, enum: str) -> dict[str, int]:
    t = sw.program.type(enum)
    return {m: sw.counter_read(counter, t.value_of(m))[0] for m in t.members}


@pytest.mark.parametrize("burst", [1, 8])
def test_each_class_takes_its_path(burst: int) -> None:
    sw = configured_switch()
    frames = build_frames(16)
    tallies = run_classes(sw, frames, burst)
    assert {name: (t.frames, t.outputs) for name, t in tallies.items()} == {
        "span_get": (16, 16), "span_reply": (16 * SPAN, 16 * SPAN), "probe_reply": (16 * SPAN, 16 * SPAN)}
    coalesce = events(sw, "MyIngress.coalesce_events", "coalesce_event_t")
    assert coalesce["PENDING"] == 16, "every span GET opened an entry"
    assert coalesce["REPLIED"] == 16, "every span's last reply freed its entry (the probes matched none)"
    assert sum(coalesce.values()) == 32, coalesce
    assert events(sw, "MyEgress.stream_events", "stream_event_t")["OPENED"] == 1, "one block, one stream"


def test_frames_reach_their_addressee_once() -> None:
    sw = configured_switch()
    frames = build_frames(1)
    get, replies = frames.spans[0]
    assert [p for p, _ in sw.process_burst([(READER_PORT, get)])] == [STORAGE_PORT]
    assert [p for p, _ in sw.process_burst([(STORAGE_PORT, r) for r in replies])] == [READER_PORT] * SPAN
    assert [p for p, _ in sw.process_burst([(STORAGE_PORT, p) for p in frames.probes])] == [READER_PORT] * SPAN


def test_reader_bound_is_probe_over_reply_plus_a_span_share_of_a_get() -> None:
    results = {"probe_reply x8": {"us_per_frame": 20.0}, "span_reply x8": {"us_per_frame": 22.0},
               "span_get x8": {"us_per_frame": 32.0}}
    reader = 22.0 + 32.0 / SPAN  # one reply and the span GET's share, at the client's default span
    assert derived(results) == {"reader_chunk_us": pytest.approx(reader), "probe_chunk_us": 20.0,
                                "probe_over_reader_cost": pytest.approx(20 / reader, abs=1e-3)}
