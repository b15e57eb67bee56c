"""Process level on veth: N-to-1 reads with the client's defaults through the softswitch process.

The bed is `bench._incast_bed.Bed` (client and storage node in their own namespaces, the softswitch between them on
veth pairs, coalescing configured as the controller does); each reader is its own process with default
`ClientOptions`, released at one instant, and checks its block's SHA-256 (`bench.incast._realistic_readers`).
"""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and veth pairs need root")]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    from bench._incast_bed import Bed

    with Bed(tmp_path_factory.mktemp("incast-veth"), tag="ivt") as bed:
        bed.coalescing(True)
        yield bed


def write_blocks(bed, mtu: int, phs: list[int], size: int) -> int:
    from kvpool.blocks import chunk_len_for_mtu

    bed.set_mtu(mtu)
    chunk = chunk_len_for_mtu(mtu)
    for ph in phs:
        bed.agent("storage", "--agent", "write", "--ph", str(ph), "--size", str(size), "--seed", str(ph & 0xFFFF),
                  "--chunk", str(chunk))
    return chunk


def test_sixteen_readers_of_sixteen_different_cold_blocks_all_finish_with_verified_bytes(bed):
    from bench.incast import measure_realistic

    phs = [0x7E57_0000 + i for i in range(16)]
    size = 1 << 20
    chunk = write_blocks(bed, 1500, phs, size)
    assert chunk == 1024, "the default chunk of a 1,500-byte path"
    row = measure_realistic(bed, 1500, "own-blocks", 16, 0.0, phs, size, chunk)
    assert row["failed_readers"] == 0, row["errors"]
    assert len(row["reader_MB_per_s"]) == 16


def test_four_readers_of_their_own_block_under_5_percent_loss_per_hop_all_finish(bed):
    from bench.incast import measure_realistic

    phs = [0x7E58_0000 + i for i in range(4)]
    size = 1 << 20
    chunk = write_blocks(bed, 1500, phs, size)
    row = measure_realistic(bed, 1500, "own-blocks", 4, 5.0, phs, size, chunk)
    assert row["failed_readers"] == 0, row["errors"]
    assert row["resent_gets"] > 0, "the loss was there"


def test_the_spread_table_quick_run_gives_every_system_and_spread_with_no_failed_or_wrong_reader(tmp_path):
    """`bench incast`'s spread table, quick (N = 4 readers each in its own namespace, starts 0 and 50 ms apart,
    1 MiB): its JSON has a row per system and spread, the controller ran, every reader's bytes verified."""
    import dataclasses
    import json

    from bench import _incast_spread
    from bench._incast_bed import stream_join_available
    from bench.incast import Realistic, run

    result = run(tmp_path, quick=True, realistic=Realistic(readers=()),
                 spread=dataclasses.replace(_incast_spread.SPREAD_QUICK, bed_tag="ist"))
    spread = json.loads((tmp_path / "incast.json").read_text())["spread"]
    assert spread == json.loads(json.dumps(result["spread"]))
    systems = {r["system"] for r in spread["rows"]}
    assert "no switch function" in systems and any(s.startswith("kvswitch") for s in systems)
    assert spread["stream_join"] == stream_join_available()
    assert sorted((r["system"], r["spread_s"]) for r in spread["rows"]) == sorted(
        (s, x) for s in systems for x in _incast_spread.SPREAD_QUICK.spreads_s)
    for r in spread["rows"]:
        assert (r["readers"], r["verified"], r["failed"]) == (4, 4, 0), r["errors"]
        assert r["busiest_blocks_per_read"] > 0 and r["storage_gets_per_chunk"] > 0
        assert r["controller_cpu_s"] is not None and r["controller_cpu_s"] >= 0
    assert (tmp_path / "incast-spread.png").is_file() and "| system |" in (tmp_path / "incast.md").read_text()


def test_with_the_devices_first_the_switch_and_the_node_run_at_fifo_and_readers_still_finish(tmp_path):
    """The benchmarks' scheduling (`Bed(realtime_devices=True)`, `kvtesting.realtime`): the switch and the storage
    node, with every thread, at SCHED_FIFO, the readers under the fair scheduler, and 8 readers of their own
    blocks all finish with verified bytes."""
    from bench._incast_bed import Bed
    from bench.incast import measure_realistic
    from kvtesting.realtime import fifo_allowed, is_realtime
    from kvtesting.vethnet import DEVICES

    if not fifo_allowed():
        pytest.skip("this kernel gives no SCHED_FIFO here (no real-time budget in this cgroup)")
    with Bed(tmp_path, tag="irt", realtime_devices=True) as rt_bed:
        rt_bed.coalescing(True)
        assert rt_bed.net.realtime
        devices = [p.popen.pid for p in rt_bed.net.processes if p.name in DEVICES]
        assert len(devices) == 2 and all(is_realtime(pid) for pid in devices)
        assert "SCHED_FIFO" in rt_bed.scheduling()
        phs = [0x7E59_0000 + i for i in range(8)]
        size = 1 << 20
        chunk = write_blocks(rt_bed, 1500, phs, size)
        row = measure_realistic(rt_bed, 1500, "own-blocks", 8, 0.0, phs, size, chunk)
        assert row["failed_readers"] == 0, row["errors"]
        assert len(row["reader_MB_per_s"]) == 8
