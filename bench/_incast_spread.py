"""`bench incast`'s spread table: N readers of one hot cold block whose starts spread apart, four systems.

Readers of a newly hot block do not start together: scheduling, queueing and batch boundaries put them
milliseconds to seconds apart, less than the block's transfer time, so they overlap in time (an incast) but not
within one storage round trip (what request coalescing merges). Per row, N ∈ {8, 16, 32} readers of one fresh
16 MiB block, reader i starting at t0 + i × spread / (N - 1), spread ∈ {0, 50 ms, 500 ms, one lone reader's block
time (measured in the same run, per system)}, on four systems:

* **no switch function**: the pool through the softswitch process, the controller with coalescing off
  (`--coalesce-timeout-ms 0`), plain forwarding;
* **kvswitch**: the same bed, the controller's defaults: request coalescing, and stream join where the data plane
  has it (docs/dataplane.md, "Stream join"); with the stream join, each of its rows is followed by the same row
  with the readers asking for the chunks they missed at once (`ClientOptions.immediate_patch`, "immediate
  patches": the client's behaviour before the patch pass) instead of in the stream's patch pass;
* **Mooncake** and **Mooncake, dynamic replication**: `bench mooncake_fanout`'s bed and rows (Mooncake Store's own
  client over TCP, two storage segments), run in the same invocation after the pool's rows.

The pool's bed is `bench._incast_bed.Bed` with one namespace per reader on its own switch port (`reader_net`), the
client's default options (chunk size from the path MTU: 8 KiB at 9000), one long-lived reader process per
namespace (`_reader`), each read by a fresh `KVPClient` verifying the block's SHA-256. Per row: bytes the busiest
storage node sent per block read (its namespace's veth transmit counter, read as `bench mooncake_fanout` reads
Mooncake's nodes: 1.0 = a whole block per reader), p50 / p99 completion (from each reader's own start), readers
verified and failed, GETs per chunk the storage node answered (STAT), the switch's coalescing and stream events,
and the controller's CPU seconds during the row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench._incast_bed import MTU, Bed, SwitchFunctions, block_data, percentile
from bench.mooncake_fanout import Agent

READERS = (8, 16, 32)
SPREADS_S = (0.0, 0.05, 0.5)
"""Start spreads; one lone reader's block time is added, measured on each system's bed."""
BLOCK_MIB = 16
LEAD_S = 1.0
"""Readers get their start time this far ahead, so each is waiting when the row starts."""
READ_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class SpreadPlan:
    readers: tuple[int, ...] = READERS
    spreads_s: tuple[float, ...] = SPREADS_S
    block_mib: int = BLOCK_MIB
    mtus: tuple[int, ...] = (MTU,)
    lone: bool = True
    """Add one lone reader's block time to the spreads."""
    mooncake: bool = True
    """Also `bench mooncake_fanout`'s rows (same readers and spreads) after the pool's."""
    stream_join: bool = True
    """The kvswitch rows with stream join on, where the data plane and controller have it (off: coalescing alone,
    configured by the bed itself, with no controller and so no controller CPU)."""
    bed_tag: str = "isp"
    """Names of the pool's bed (`VethNetOptions.tag`): a test beside a benchmark run takes another."""
    immediate_patch: bool = True
    """With the stream join, each kvswitch row again with the readers' `ClientOptions.immediate_patch` (the
    client before the patch pass), right after the row with the client's defaults."""


SPREAD_FULL = SpreadPlan()
SPREAD_QUICK = SpreadPlan(readers=(4,), spreads_s=(0.0, 0.05), block_mib=1, lone=False, mooncake=False)


# ---- a reader: one process in its own namespace -----------------------------------------------------------

def _reader(server: str) -> int:
    """`python -m bench._incast_spread _reader SERVER`: per input line `{"ph", "at", "sha256"}` read the block with
    a fresh client of default options (`"immediate_patch": true` in the line: that option on), starting at wall
    clock `at`; answer start, end, verified, counters."""
    from kvpool.client import ClientOptions, KVPClient

    print(json.dumps({"ready": server}), flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        options = ClientOptions(server=(server, 7420), tenant=0)  # the defaults, nothing tuned
        if order.get("immediate_patch"):
            options = dataclasses.replace(options, immediate_patch=True)
        client = KVPClient(options)
        delay = order["at"] - time.time()
        if delay > 0:
            time.sleep(delay)
        start = time.time()
        answer: dict = {"start": start, "ok": False, "error": ""}
        try:
            block = client.get_block(order["ph"])
            answer["ok"] = hashlib.sha256(block.data).hexdigest() == order["sha256"]
            answer["bytes"] = len(block.data)
        except Exception as exc:  # a failed reader is a row's figure, not the end of the run
            answer["error"] = repr(exc)[:300]
        answer["end"] = time.time()
        answer.update(sent=client.sent, resent=client.resent, busy=client.busy,
                      pushed=getattr(client, "pushed", None),  # a client without stream join has no such counter
                      pushed_duplicates=getattr(client, "pushed_duplicates", None),
                      stream_quiet=getattr(client, "stream_quiet", None), stream_holes=getattr(client, "stream_holes", None),
                      stream_missed=getattr(client, "stream_missed", None),
                      rto_s=client.path.rto.rto, srtt_s=client.path.rto.smoothed)
        client.close()
        print(json.dumps(answer), flush=True)
    return 0


# ---- the pool's rows ----------------------------------------------------------------------------------------

class PoolRows:
    """The pool's side of the table on one `Bed` with reader namespaces."""

    def __init__(self, bed: Bed, block_bytes: int) -> None:
        self.bed = bed
        self.block_bytes = block_bytes
        self.agents = [Agent(bed.spawn(host, "bench._incast_spread", "_reader", bed.net.options.storage.ip),
                             host.ip) for host in bed.readers]
        for agent in self.agents:
            agent.answer(180)
        self.ph = 0x5B00_0000 + (int(time.time()) & 0xFFF) * 0x1000

    def close(self) -> None:
        for agent in self.agents:
            agent.stop()

    def fresh_block(self, chunk: int) -> tuple[int, str]:
        """Write a new block from the storage node's own namespace (cold: never read); its key and digest."""
        self.ph += 1
        seed = self.ph & 0xFFFF
        self.bed.agent("storage", "--agent", "write", "--ph", str(self.ph), "--size", str(self.block_bytes),
                       "--seed", str(seed), "--chunk", str(chunk))
        return self.ph, hashlib.sha256(block_data(seed, self.block_bytes)).hexdigest()

    def read(self, readers: int, spread_s: float, chunk: int, immediate_patch: bool = False) -> dict:
        bed = self.bed
        storage = bed.net.options.storage
        ph, digest = self.fresh_block(chunk)
        events, streams = bed.events(), bed.stream_events()
        cpu, sent = bed.controller_cpu_s(), bed.tx_bytes(storage)
        began = time.monotonic()
        t0 = time.time() + LEAD_S
        for i, agent in enumerate(self.agents[:readers]):
            agent.ask({"ph": ph, "at": t0 + (spread_s * i / (readers - 1) if readers > 1 else 0.0),
                       "sha256": digest, "immediate_patch": immediate_patch})
        got = [agent.answer(READ_TIMEOUT_S) for agent in self.agents[:readers]]
        sent = bed.tx_bytes(storage) - sent
        cpu_after = bed.controller_cpu_s()
        wall = time.monotonic() - began
        chunks = -(-self.block_bytes // chunk)
        gets = bed.agent("storage", "--agent", "stat", "--ph", str(ph), "--size", str(self.block_bytes),
                         "--seed", "0", "--chunk", str(chunk))["gets"]
        after_events, after_streams = bed.events(), bed.stream_events()
        times = [g["end"] - g["start"] for g in got]
        return {"readers": readers, "spread_s": spread_s, "block_bytes": self.block_bytes, "chunk_bytes": chunk,
                "node_bytes": [sent], "busiest_blocks_sent": sent / self.block_bytes,
                "busiest_blocks_per_read": sent / (self.block_bytes * readers),
                "total_blocks_per_read": sent / (self.block_bytes * readers),
                "p50_s": percentile(times, 50), "p99_s": percentile(times, 99),
                "verified": sum(1 for g in got if g["ok"]), "failed": sum(1 for g in got if not g["ok"]),
                "errors": sorted({g["error"] for g in got if g["error"]})[:3],
                "start_spread_s": max(g["start"] for g in got) - min(g["start"] for g in got),
                "storage_gets_per_chunk": gets / chunks,
                "resent_gets": sum(g["resent"] for g in got), "busy_replies": sum(g["busy"] for g in got),
                "pushed_chunks": sum(g["pushed"] or 0 for g in got),
                "pushed_duplicates": sum(g.get("pushed_duplicates") or 0 for g in got),
                "coalesce_events": _delta(events, after_events), "stream_events": _delta(streams, after_streams),
                "controller_cpu_s": None if cpu is None or cpu_after is None else cpu_after - cpu,
                "wall_s": wall,
                "per_reader": [{"start_s": g["start"] - t0, "time_s": g["end"] - g["start"],
                                **{k: g.get(k) for k in ("sent", "resent", "pushed", "pushed_duplicates",
                                                         "stream_quiet", "stream_holes", "stream_missed", "rto_s",
                                                         "srtt_s")}} for g in got]}

    def lone_block_time(self, chunk: int, repeats: int = 3) -> float:
        """Median time one reader alone takes to read a fresh block."""
        times = []
        for _ in range(repeats):
            row = self.read(1, 0.0, chunk)
            if row["failed"]:
                raise RuntimeError(f"a lone reader failed: {row['errors']}")
            times.append(row["p50_s"])
        return sorted(times)[len(times) // 2]


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}


def pool_systems(plan: SpreadPlan, streams_available: bool) -> list[SwitchFunctions]:
    kvswitch = SwitchFunctions(coalescing=True, streams=plan.stream_join and streams_available)
    return [SwitchFunctions(coalescing=False), kvswitch]


def measure_pool(plan: SpreadPlan, workdir: Path, streams_available: bool) -> dict:
    """Every pool row of `plan`: per MTU, per system, the lone reader's time, then N × spread."""
    from kvpool.blocks import chunk_len_for_mtu

    rows: list[dict] = []
    lone_s: dict[str, float] = {}
    idle: dict[str, float | None] = {}
    size = plan.block_mib << 20
    # The controller runs the stream join whenever it coalesces: coalescing alone needs the bed's own writes.
    controller = plan.stream_join or not streams_available
    with Bed(workdir, tag=plan.bed_tag, readers=max(plan.readers), controller=controller) as bed:
        pool = PoolRows(bed, size)
        try:
            for mtu in plan.mtus:
                bed.set_mtu(mtu)
                chunk = chunk_len_for_mtu(mtu)
                for functions in pool_systems(plan, streams_available):
                    bed.configure(functions)
                    system = functions.label()
                    idle[f"{system}, MTU {mtu}"] = bed.controller_idle_share()
                    spreads = list(plan.spreads_s)
                    if plan.lone:
                        lone = pool.lone_block_time(chunk)
                        lone_s[f"{system}, MTU {mtu}"] = lone
                        spreads.append(lone)
                    # with the stream join, the client before the patch pass too, row by row (the same load)
                    clients = (False, True) if functions.streams and plan.immediate_patch else (False,)
                    for n in plan.readers:
                        for s, spread in enumerate(spreads):
                            for immediate in clients:
                                row = pool.read(n, spread, chunk, immediate_patch=immediate)
                                row.update(system=system + (", immediate patches" if immediate else ""), mtu=mtu,
                                           spread_label="lone block time" if s == len(plan.spreads_s)
                                           else f"{1000 * spread:g} ms")
                                rows.append(row)
                                print(f"   {table_lines([row])[-1]}", flush=True)
        finally:
            pool.close()
    return {"rows": rows, "lone_block_time_s": lone_s, "controller_idle_share": idle}


def mooncake_rows(plan: SpreadPlan, log: IO[str]) -> dict:
    """`bench mooncake_fanout`'s rows for the same readers and spreads, in the table's shape."""
    from bench import mooncake_fanout

    result = mooncake_fanout.measure(plan.readers, plan.spreads_s, mooncake_fanout.SEGMENTS, log, lone=plan.lone)
    rows = []
    for r in result["rows"]:
        if "again" in r["spread_label"]:
            continue  # a warm second read, not a row of this table
        system = "Mooncake" if r["replication"] == "off" else "Mooncake, dynamic replication"
        rows.append({**r, "system": system, "mtu": 1500, "block_bytes": result["block_bytes"],
                     "busiest_blocks_sent": max(r["node_bytes"]) / result["block_bytes"],
                     "controller_cpu_s": None, "storage_gets_per_chunk": None})
    return {"rows": rows, "lone_block_time_s": {("Mooncake" if k == "off" else "Mooncake, dynamic replication"): v
                                                for k, v in result["lone_block_time_s"].items()}}


# ---- output ------------------------------------------------------------------------------------------------

def _events_cell(r: dict) -> str:
    merged = {**r.get("coalesce_events", {}), **{f"stream.{k}": v for k, v in r.get("stream_events", {}).items()}}
    return " ".join(f"{k}={v}" for k, v in merged.items()) or "–"


def _cpu_share(cpu: float | None, wall: float | None) -> str:
    if cpu is None:
        return "–"
    return f"{cpu:.2f} ({100 * cpu / wall:.1f}%)" if wall else f"{cpu:.2f}"


def table_lines(rows: list[dict]) -> list[str]:
    lines = ["| system | MTU | N | start spread | busiest node: blocks sent (per reader) | GETs per chunk | p50 s | "
             "p99 s | verified / failed | pushed chunks | controller CPU s (% of a core) | switch events |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        spread = r["spread_label"] + (f" ({1000 * r['spread_s']:.0f} ms)" if r["spread_label"].startswith("lone")
                                      else "")
        gets = r.get("storage_gets_per_chunk")
        cpu = r.get("controller_cpu_s")
        lines.append(f"| {r['system']} | {r['mtu']} | {r['readers']} | {spread} | "
                     f"{r['busiest_blocks_per_read'] * r['readers']:.2f} ({r['busiest_blocks_per_read']:.3f}) | "
                     f"{'–' if gets is None else f'{gets:.2f}'} | {r['p50_s']:.2f} | {r['p99_s']:.2f} | "
                     f"{r['verified']} / {r['failed']} | {r.get('pushed_chunks', '–')} | "
                     f"{_cpu_share(cpu, r.get('wall_s'))} | {_events_cell(r)} |")
    return lines


def side_by_side(rows: list[dict]) -> list[str]:
    """One line per (MTU of the pool, N, spread), one column per system: busiest node's blocks sent for the N
    readers and p99 completion; failed readers named where any."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    pool_mtus = sorted({r["mtu"] for r in rows if not r["system"].startswith("Mooncake")}) or [0]
    cells: dict[tuple[int, int, str, str], dict] = {}
    for r in rows:
        for mtu in (pool_mtus if r["system"].startswith("Mooncake") else [r["mtu"]]):
            cells[mtu, r["readers"], r["spread_label"], r["system"]] = r
    keys = list(dict.fromkeys((m, n, label) for m, n, label, _ in cells))
    lines = ["| pool MTU | N | start spread | " + " | ".join(systems) + " |",
             "|---:|---:|---|" + "---:|" * len(systems)]
    for mtu, n, label in keys:
        out = []
        for system in systems:
            cell = cells.get((mtu, n, label, system))
            if cell is None:
                out.append("–")
                continue
            failed = f", **{cell['failed']} failed**" if cell["failed"] else ""
            out.append(f"{cell['busiest_blocks_per_read'] * cell['readers']:.2f} / {cell['p99_s']:.2f} s{failed}")
        lines.append(f"| {mtu} | {n} | {label} | " + " | ".join(out) + " |")
    return lines


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    groups: dict[tuple[str, int, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["mtu"], r["readers"]), []).append(r)
    styles = {"no switch function": "o--", "Mooncake": "^:", "Mooncake, dynamic replication": "v-."}
    for (system, mtu, n), group in sorted(groups.items()):
        group = sorted(group, key=lambda r: r["spread_s"])
        xs = [1000 * r["spread_s"] for r in group]
        style = styles.get(system, "s-")
        label = f"{system}, N={n}" + (f", MTU {mtu}" if not system.startswith("Mooncake") else "")
        left.plot(xs, [r["busiest_blocks_per_read"] * r["readers"] for r in group], style, label=label)
        right.plot(xs, [r["p99_s"] for r in group], style, label=label)
    left.axhline(1.5, color="grey", lw=0.5)  # the goal: at most 1.5 blocks for the N readers' read
    left.set(yscale="log", ylabel="busiest storage node: blocks sent for the N readers",
             title="one hot cold 16 MiB block")
    right.set(yscale="log", ylabel="p99 completion (s)")
    left.legend(fontsize=6)
    for ax in (left, right):
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(left=0)
        ax.set_xlabel("start spread (ms)")
        ax.grid(True, alpha=0.3)
    left.set_ylim(bottom=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(plan: SpreadPlan, out: Path, streams_available: bool) -> dict:
    """The pool's rows, then Mooncake's (when `plan.mooncake`); table, plot and JSON part of `bench incast`."""
    started = time.perf_counter()
    pool = measure_pool(plan, out / "incast-spread-bed", streams_available)
    rows = list(pool["rows"])
    lone = dict(pool["lone_block_time_s"])
    if plan.mooncake:
        with (out / "incast-spread-mooncake.log").open("w") as log:
            mooncake = mooncake_rows(plan, log)
        rows += mooncake["rows"]
        lone.update(mooncake["lone_block_time_s"])
    if rows:
        plot(rows, out / "incast-spread.png")
    return {"plan": {**plan.__dict__}, "rows": rows, "lone_block_time_s": lone,
            "controller_idle_share": pool["controller_idle_share"],
            "stream_join": plan.stream_join and streams_available, "wall_s": time.perf_counter() - started}


def markdown(result: dict) -> str:
    lone = ", ".join(f"{k}: {1000 * v:.0f} ms" for k, v in result["lone_block_time_s"].items())
    idle = ", ".join(f"{k}: {100 * v:.1f}%" for k, v in result.get("controller_idle_share", {}).items()
                     if v is not None)
    return ("## Readers that arrive apart: one hot cold block, N × start spread × system\n\n"
            f"Lone reader's block time: {lone or '–'}. Stream join "
            f"{'on' if result['stream_join'] else 'not in this data plane'} in the kvswitch rows. "
            f"The controller with no reader: {idle or '–'} of a core. "
            "Busiest node: the blocks' worth of bytes it sent for the row's N reads (its namespace's veth "
            "transmit counter; the goal is at most 1.5), in brackets per reader (1.000: a whole block each).\n\n"
            "Side by side: busiest node's blocks sent for the N readers / p99 completion.\n\n"
            + "\n".join(side_by_side(result["rows"])) + "\n\nEvery row:\n\n"
            + "\n".join(table_lines(result["rows"])) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["_reader"]:
        sys.exit(_reader(sys.argv[2]))
    sys.exit("python -m bench._incast_spread _reader SERVER (run by `bench incast`)")
