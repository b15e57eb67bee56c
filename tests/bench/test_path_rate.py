"""bench.path_rate's own pieces: the probe's datagrams are the replies a storage node sends, and the figures it
derives from CPU times (the machine-independent bound) are computed as documented."""

from __future__ import annotations

import os
import threading

import pytest

from bench.path_rate import (
    _cpu_seconds,
    _sustained_reads,
    block_data,
    probe_frames,
    read_agent_args,
    switch_bound_ratio,
    table,
)
from kvpool.client import ClientOptions, KVPClient
from kvpool.constants import KVP_HEADER_LEN, Flag, Opcode
from kvpool.server import StorageNode, StorageOptions
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


def test_table_row_leads_with_the_sustained_rate_and_any_unverified_read_marks_it():
    read = {"payload_MB_per_s": 15.0, "vs_switch": 0.3, "resent": 0, "verified": True, "switch_bound_ratio": 0.33,
            "cpu_us_per_chunk": {"switch": 60.0, "storage_node": 20.0, "reader": 40.0}}
    steady = {**read, "payload_MB_per_s": 35.0, "vs_switch": 0.7, "resent": 2, "switch_bound_ratio": 0.5,
              "cpu_us_per_chunk": {"switch": 40.0, "storage_node": 10.0, "reader": 30.0}}
    row = {"mtu": 1500, "chunk_bytes": 1024,
           "switch": {"payload_MB_per_s": 50.0, "frames_per_s": 48828.0, "switch_cpu_us_per_frame": 20.0},
           "reader": {"cold": read, "warm": read, "sustained": steady}}
    line = table([row]).splitlines()[-1]
    assert line == ("| 1500 | 1024 | 50.0 (48,828) | 20.0 | **35.0 (0.70)** | 15.0 (0.30) | 15.0 (0.30) | "
                    "40 / 10 / 30 | 0.50 | 0/0/2 | yes |"), "the CPU figures are the sustained reads'"
    for which in ("cold", "warm", "sustained"):
        unverified = {**row, "reader": {**row["reader"], which: {**row["reader"][which], "verified": False}}}
        assert table([unverified]).splitlines()[-1].endswith("| NO |"), which


def test_the_reader_keeps_the_client_defaults_unless_the_run_sets_one():
    default = read_agent_args("10.0.0.2", 7, 1 << 20, None)
    assert default == ["--agent", "read", "--server", "10.0.0.2", "--ph", "7", "--size", str(1 << 20)]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, 16) == [*default, "--get-span", "16"]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, None, 64) == [*default, "--window", "64"]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, 16, 64) == [*default, "--get-span", "16", "--window", "64"]
    assert read_agent_args("10.0.0.2", 7, 1 << 20, None, None, 3.0) == [*default, "--sustain", "3.0"]


def test_sustained_reads_go_on_for_the_time_asked_and_check_every_block():
    node = StorageNode(StorageOptions(host="127.0.0.1", port=0, capacity=4 << 20))
    sock = node.bind()
    stop = threading.Event()
    thread = threading.Thread(target=node.serve, args=(sock, stop, 0.05), daemon=True)
    thread.start()
    client = KVPClient(ClientOptions(server=sock.getsockname(), chunk_size=1024))
    try:
        data = block_data(7, 64 << 10)
        client.put_block(7, data, version=1)
        got = _sustained_reads(client, 7, data, 0.2)
        assert got["seconds"] >= 0.2 and got["blocks"] >= 1 and got["verified"]
        assert got["chunks"] == 64 * got["blocks"]
        assert got["payload_MB_per_s"] == pytest.approx(got["blocks"] * len(data) / 1e6 / got["seconds"])
        assert got["sent"] >= got["blocks"] * 64 // 16, "the requests of these reads only (span GETs of 16)"
        assert not _sustained_reads(client, 7, block_data(8, 64 << 10), 0.01)["verified"], "other bytes"
    finally:
        client.close()
        stop.set()
        thread.join(timeout=2)
        node.close()
