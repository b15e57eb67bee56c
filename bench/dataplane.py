"""Data plane end to end on veth pairs: switch hits against storage-node hits, and the incast the pool absorbs.

The bed is `kvtesting.vethnet.VethNet` (the same as `tests/integration/`): client and storage node in their own
network namespaces, `python -m softswitch` running kvswitch.p4 between them, entries written with
p4runtime-shell. Everything below is measured in one run, so the ratios compare like with like:

* **latency and rate**: one client reads a one-chunk block, one GET outstanding at a time, alternating rounds
  of a block the switch holds (HIT_SWITCH: one pass through the switch) and a block it does not index
  (HIT_SERVER: switch → storage node → switch). Latency is the client's send-to-reply time of each GET;
  requests/s is GETs over the wall time of the loop. Each is measured twice: with GETs packed by
  `kvpool.wire` (the data path alone) and through `kvpool.client.KVPClient` (what an inference node sees,
  including Scapy building and dissecting every message).
* **incast**: N concurrent readers (threads in the client namespace, one socket each) read one hot block of
  four chunks R times each, once with the switch pool (the block is admitted, slots cold at the start) and
  once without (every GET carries F_BYPASS), then once more with the slots already filled (warm). The
  storage node's STAT counts give the requests it served per block read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kvtesting.vethnet import VethNet, VethNetOptions

NAME = "dataplane"
TENANT = 0
"""The agent's tenant; part of every index entry."""
HIT_BLOCK, MISS_BLOCK = 0xD00D_0001, 0xD00D_0002
"""One-chunk blocks of the latency phase: admitted to the pool, and never admitted."""
HOT_WITH, HOT_WITHOUT = 0xD00D_0003, 0xD00D_0004
"""The incast phase's hot blocks (one per run, so each starts from a cold slot and a zero STAT count)."""


@dataclass(frozen=True)
class Sizes:
    """How much to measure."""

    gets: int
    """Single-chunk GETs per kind (switch hit, server hit) in the latency phase."""
    rounds: int
    """The latency phase alternates hit and miss rounds this many times (load drift hits both alike)."""
    readers: int
    """Concurrent readers of the hot block (the N of N-to-1)."""
    reads: int
    """Block reads per reader."""
    hot_block_bytes: int = 512
    """Size of the hot block: four 128-byte chunks."""


FULL = Sizes(gets=1000, rounds=5, readers=8, reads=25)
QUICK = Sizes(gets=100, rounds=2, readers=8, reads=3)


def _block(seed: int, size: int) -> str:
    return bytes((seed * 29 + i * 13) & 0xFF for i in range(size)).hex()


def _chunks(size: int) -> int:
    return max(1, -(-size // 128))


def _latency_summary(latencies: list[float], elapsed: float, statuses: dict[str, int], retries: int) -> dict:
    us = np.asarray(latencies) * 1e6
    return {"gets": len(latencies), "req_per_s": len(latencies) / elapsed if elapsed else 0.0,
            "latency_us": {"p50": float(np.percentile(us, 50)), "p90": float(np.percentile(us, 90)),
                           "p99": float(np.percentile(us, 99)), "mean": float(us.mean())},
            "statuses": statuses, "retries": retries}


LOOPS = {"wire": "wire_loop", "client": "get_loop"}
"""The two ways the latency phase sends GETs: packed with kvpool.wire (the data path alone), and through
kvpool.client.KVPClient (what an inference node sees, Scapy included)."""
PATHS = {"switch_hit": HIT_BLOCK, "server_hit": MISS_BLOCK}


def _latency_phase(net: VethNet, sizes: Sizes, progress) -> tuple[dict, dict[str, list[float]]]:
    """Alternating rounds of switch-hit and server-hit GETs of one chunk, for each way of sending."""
    assert net.switch is not None
    for ph, seed in ((HIT_BLOCK, 1), (MISS_BLOCK, 2)):
        net.request("put", ph=ph, data=_block(seed, 128), version=1)
    net.switch.index(TENANT, HIT_BLOCK, 0, slot=1, min_version=1)
    for ph in PATHS.values():  # the first fills the hit block's slot; both warm their path
        net.request("get_loop", ph=ph, chunks=1, count=20)
    acc = {(path, loop): {"latencies": [], "elapsed": 0.0, "statuses": {}, "retries": 0, "lost": 0}
           for path in PATHS for loop in LOOPS}
    per_round = max(1, sizes.gets // sizes.rounds)
    task = progress.add_task("latency: hit/miss rounds", total=sizes.rounds * len(acc))
    for _ in range(sizes.rounds):
        for (path, loop), a in acc.items():
            got = net.request(LOOPS[loop], ph=PATHS[path], chunks=1, count=per_round)
            a["latencies"] += got["latencies"]
            a["elapsed"] += got["elapsed"]
            a["retries"] += got["retries"]
            a["lost"] += got.get("lost", 0)
            for status, n in got["statuses"].items():
                a["statuses"][status] = a["statuses"].get(status, 0) + n
            progress.advance(task)
    summary = {path: {loop: {**_latency_summary(a["latencies"], a["elapsed"], a["statuses"], a["retries"]),
                             "lost": a["lost"]}
                      for (p, loop), a in acc.items() if p == path}
               for path in PATHS}
    return summary, {f"{path}/{loop}": a["latencies"] for (path, loop), a in acc.items()}


def _incast_run(net: VethNet, sizes: Sizes, ph: int, bypass: bool, fresh: bool = True) -> dict:
    """N readers of one block; storage-node GETs per block read from the node's own STAT counts.

    `fresh`: write and admit the block first (its slots start cold); else reuse it as the last run left it.
    """
    assert net.switch is not None
    chunks = _chunks(sizes.hot_block_bytes)
    if fresh:
        net.request("put", ph=ph, data=_block(ph & 0xFF, sizes.hot_block_bytes), version=1)
        for idx in range(chunks):  # admitted in every run: without the pool, F_BYPASS keeps the switch out
            net.switch.index(TENANT, ph, idx, slot=100 + (ph & 0xF) * 8 + idx, min_version=1)
    before = net.request("stat", ph=ph, chunks=chunks)["counts"]
    hits_before = net.switch.event("GET_HIT")
    got = net.request("readers", ph=ph, chunks=chunks, readers=sizes.readers, reads=sizes.reads, bypass=bypass)
    after = net.request("stat", ph=ph, chunks=chunks)["counts"]
    storage_gets = sum(after) - sum(before)
    return {"block_reads": got["block_reads"], "chunk_gets": sum(got["statuses"].values()),
            "storage_gets": storage_gets,
            "storage_gets_per_block_read": storage_gets / got["block_reads"] if got["block_reads"] else None,
            "switch_answers": net.switch.event("GET_HIT") - hits_before, "statuses": got["statuses"],
            "retries": got["retries"], "errors": got["errors"], "elapsed_s": got["elapsed"]}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _ratios(hit: dict, miss: dict) -> dict:
    """Hit over miss for the rate, miss over hit for latencies: > 1 means the switch hit is better."""
    return {"req_per_s_hit_over_miss": _ratio(hit["req_per_s"], miss["req_per_s"]),
            **{f"{p}_hit_over_miss": _ratio(miss["latency_us"][p], hit["latency_us"][p])
               for p in ("p50", "p90", "p99")}}


def _table(result: dict) -> str:
    lat, inc = result["latency"], result["incast"]
    lines = [
        "| GETs of one chunk (sequential, one client) | sent with | req/s | p50 µs | p90 µs | p99 µs |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for loop, sent_with in (("wire", "kvpool.wire"), ("client", "KVPClient")):
        for path, label in (("switch_hit", "switch hit (HIT_SWITCH)"),
                            ("server_hit", "server hit (HIT_SERVER, through the switch)")):
            s = lat[path][loop]
            p = s["latency_us"]
            lines.append(f"| {label} | {sent_with} | {s['req_per_s']:.0f} | {p['p50']:.0f} | {p['p90']:.0f} | "
                         f"{p['p99']:.0f} |")
        r = result["ratios"][loop]
        lines.append(f"| **hit vs miss** (req/s hit/miss; latency miss/hit) | {sent_with} | "
                     f"{r['req_per_s_hit_over_miss']:.2f}× | {r['p50_hit_over_miss']:.2f}× | "
                     f"{r['p90_hit_over_miss']:.2f}× | {r['p99_hit_over_miss']:.2f}× |")
    lines += [
        "",
        f"Incast: {inc['readers']} concurrent readers × {inc['reads_per_reader']} reads of one "
        f"{inc['chunks_per_block']}-chunk block.",
        "",
        "| run | block reads | storage-node GETs | per block read | answered by the switch |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, s in (("without switch pool (F_BYPASS)", inc["without_pool"]),
                     ("with switch pool (cold slots)", inc["with_pool"]),
                     ("with switch pool (warm: same block again)", inc["with_pool_warm"])):
        per = s["storage_gets_per_block_read"]
        lines.append(f"| {label} | {s['block_reads']} | {s['storage_gets']} | "
                     f"{'n/a' if per is None else f'{per:.3f}'} | {s['switch_answers']} |")
    red = inc["storage_gets_reduction"]
    lines.append(f"| **reduction** without / with (cold) | | | {'n/a' if red is None else f'{red:.1f}×'} | |")
    return "\n".join(lines) + "\n"


def _plot(latencies: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, label, color in (("switch_hit", "switch hit", "tab:blue"), ("server_hit", "server hit", "tab:red")):
        for loop, style in (("wire", "-"), ("client", "--")):
            us = np.sort(np.asarray(latencies[f"{kind}/{loop}"]) * 1e6)
            ax.plot(us, np.arange(1, len(us) + 1) / len(us), style, color=color,
                    label=f"{label}, sent with {'kvpool.wire' if loop == 'wire' else 'KVPClient'}")
    ax.set_xscale("log")
    ax.set_xlabel("GET latency (µs, client send → reply)")
    ax.set_ylabel("fraction of GETs")
    ax.set_title("kvswitch on veth: one-chunk GET latency")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(out_dir: Path, quick: bool = False) -> dict:
    """Build the veth bed, measure, tear it down; writes dataplane.json, dataplane.md and dataplane.png."""
    from rich.progress import Progress

    sizes = QUICK if quick else FULL
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with Progress(transient=True) as progress:
        setup = progress.add_task("starting switch, storage node, client (veth + netns)", total=None)
        with VethNet(VethNetOptions(tag="b")) as net:
            progress.remove_task(setup)
            latency, latencies = _latency_phase(net, sizes, progress)
            task = progress.add_task(f"incast: {sizes.readers} readers, without / with pool", total=3)
            without = _incast_run(net, sizes, HOT_WITHOUT, bypass=True)
            progress.advance(task)
            with_pool = _incast_run(net, sizes, HOT_WITH, bypass=False)
            progress.advance(task)
            warm = _incast_run(net, sizes, HOT_WITH, bypass=False, fresh=False)
            progress.advance(task)
    result = {
        "benchmark": NAME,
        "quick": quick,
        "sizes": asdict(sizes),
        "latency": latency,
        "ratios": {loop: _ratios(latency["switch_hit"][loop], latency["server_hit"][loop]) for loop in LOOPS},
        "incast": {
            "readers": sizes.readers, "reads_per_reader": sizes.reads,
            "chunks_per_block": _chunks(sizes.hot_block_bytes),
            "without_pool": without, "with_pool": with_pool, "with_pool_warm": warm,
            "storage_gets_reduction": _ratio(without["storage_gets_per_block_read"],
                                             with_pool["storage_gets_per_block_read"]),
        },
        "notes": "latency ratios are miss/hit (how many times faster a switch hit is); req/s includes the "
                 "client's Scapy cost in the KVPClient rows; the kvpool.wire rows measure the data path alone; softswitch is pure Python, so absolute figures are not BMv2's or an ASIC's",
    }
    (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / f"{NAME}.md").write_text(_table(result))
    _plot(latencies, out_dir / f"{NAME}.png")
    return result
