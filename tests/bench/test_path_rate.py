"""bench.path_rate's own pieces: the probe's datagrams are the replies a storage node sends, and the figures it
derives from CPU times (the machine-independent bound) are computed as documented."""

from __future__ import annotations

import os

import pytest

from bench.path_rate import _cpu_seconds, probe_frames, read_agent_args, switch_bound_ratio, table
from kvpool.constants import KVP_HEADER_LEN, Flag, Opcode
from kvpool.wire import Header, check


@pytest.mark.parametrize("chunk", [1024, 8192])
def test_probe_frames_are_well_formed_get_replies_of_one_chunk_each(chunk):
    frames = probe_frames(chunk, count=16)
    assert len(frames) == 16
    for i, frame in enumerate(frames):
        assert check(frame) is None, "the switch parses and forwards them as replies, not as malformed input"
        h = Header.unpack(frame)
        assert (h.opcode, h.chunk_idx, h.chunk_count, h.chunk_len) == (Opcode.GET_REPLY, i, 16, chunk)
        assert h.flags & Flag.VALUE and len(frame) == KVP_HEADER_LEN + chunk
    assert len(set(frames)) == 16, "distinct chunks, as a block's replies are"


def test_switch_bound_ratio_is_cpu_per_frame_over_cpu_per_chunk_read():
    assert switch_bound_ratio(20.0, 60.0) == pytest.approx(1 / 3)
    assert switch_bound_ratio(20.0, 40.0) == pytest.approx(0.5), "a GET as cheap as a reply: the two-packet bound"
    assert switch_bound_ratio(20.0, 0.0) != switch_bound_ratio(20.0, 0.0), "no chunk read: NaN, not a division error"


def test_cpu_seconds_of_a_process_grow_with_its_work():
    before = _cpu_seconds(os.getpid())
    deadline = before + 0.05
    while _cpu_seconds(os.getpid()) < deadline:
        sum(range(10_000))
    assert _cpu_seconds(os.getpid()) >= before + 0.05


def test_table_row_has_the_ratios_and_the_verdict():
    read = {"payload_MB_per_s": 15.0, "vs_switch": 0.3, "resent": 0, "verified": True, "switch_bound_ratio": 0.33,
            "cpu_us_per_chunk": {"switch": 60.0, "storage_node": 20.0, "reader": 40.0}}
    row = {"mtu": 1500, "chunk_bytes": 1024,
           "switch": {"payload_MB_per_s": 50.0, "frames_per_s": 48828.0, "switch_cpu_us_per_frame": 20.0},
           "reader": {"cold": read, "warm": {**read, "verified": False}}}
    line = table([row]).splitlines()[-1]
    assert line.startswith("| 1500 | 1024 | 50.0 (48,828) | 20.0 | 15.0 (0.30) | 15.0 (0.30) | 60 / 20 / 40 | 0.33 |")
    assert line.endswith("| NO |"), "one unverified read marks the row"


def test_the_reader_keeps_the_client_defaults_unless_the_run_sets_one():
    default = read_agent_args("10.0.0.2", 7, 1 << 20, None)
    assert default == ["--agent", "read", "--server", "10.0.0.2", "--ph", "7", "--size", str(1 << 20)]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, 16) == [*default, "--get-span", "16"]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, None, 64) == [*default, "--window", "64"]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, 16, 64) == [*default, "--get-span", "16", "--window", "64"]
