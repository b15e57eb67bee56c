"""A lone reader against the switch process's own forwarding rate, at MTU 1500 and 9000, in one run.

The goal (docs/status.md): a reader with the client's DEFAULT options reads at >= 60% of what the softswitch
process itself forwards, in payload bytes. Both are measured here on the same bed, one after the other, per MTU:

* **switch**: the softswitch process's own forwarding rate of KVP GET_REPLY datagrams the size the client's
  default chunk gives at that MTU (1 KiB chunks at 1500, 8 KiB at 9000). A sender in the storage namespace
  sends well-formed GET_REPLYs (source port 7420, so the switch parses and checks them as replies, as it does
  a storage node's) through the switch to a receiver in the client namespace, which counts them. The sender is
  paced by delivery, not by a fixed rate: at most `WINDOW` datagrams are outstanding (sent and not yet counted by
  the receiver, which it learns through shared memory, not through the switch), so the switch's input queue
  never overflows and what is measured is how fast the switch forwards, not how fast it drops. Datagrams that
  never arrive (after `STALL_S` without progress) are written off and counted as lost.
* **reader**: one reader process in the client namespace with `ClientOptions` defaults (chunk size from the
  path MTU, congestion window, RTO from the round trip) reads a 16 MiB block written in that chunk size, cold
  (the first read after the write) and warm (a later read), verifying its bytes; goodput = block bytes / time.
  Then the same client reads the block again and again, back to back, for `Plan.read_seconds` (3 s, as long as
  the switch's own rate is measured): its **sustained** rate, the rate an inference node's connector reading one
  block after another has. Only the reads are timed; every block is compared with what was written.

Switch rate and warm reads alternate `Plan.repeats` times, so both meet the same load; the best of each is the
row's figure (another process on the machine only ever slows either), and every trial is in the JSON.

The ratio sustained reader / switch is the goal's figure: two steady rates over seconds. A single read of a
16 MiB block at MTU 9000 lasts about 0.1 s, the start-up of a fresh client process included (a slow start, the
first round-trip samples, first-touch page faults of the block's buffer); it is in the table beside it.

Also per phase: CPU seconds of the switch process and of the storage node (from /proc), so the per-chunk cost of
each is on the table (for the warm rounds, over every read of the reader process, mostly the sustained ones): with
span GETs (the client's default, 16 chunks per GET, docs/protocol.md *Span GETs*) a reader costs the switch
1 + 1/16 packets per chunk (one GET per span and each reply), the switch's own rate is measured with one (the
reply); with one GET per chunk (`get_span` 1) it was two, which bounded the ratio near 1/2. The "switch-bound ratio" is that bound as this run
measured it: the switch's CPU per forwarded frame over its CPU per chunk read, a figure that does not move with
the machine's load as the rates do.

    sudo .venv/bin/python -m bench path_rate --out out/bench
    sudo .venv/bin/python -m bench.path_rate --mtus 1500 --mib 4 --out out/bench     (reduced)
    sudo .venv/bin/python -m bench.path_rate --get-span 16 --out out/bench           (another span width)
    sudo .venv/bin/python -m bench.path_rate --window 64 --out out/bench             (another largest window)

The bed is `bench._incast_bed.Bed` (`kvtesting.vethnet.VethNet`: client and storage node in their own namespaces,
`python -m softswitch` between them on veth pairs), tag `prt`. As in `bench incast`'s realistic rows, the switch and
the storage node run at SCHED_FIFO once they are up, the reader and the probe's sender and receiver under the fair
scheduler (`kvtesting.realtime`); `--fair` schedules every process fairly. Both figures of a row, the switch's
own rate and the reader's, are measured in the same scheduling. The probe's sender uses a second address of the
storage namespace (`PROBE_SOURCE`), because the storage node holds port 7420 of its own address.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = "path_rate"
TENANT = 0
KVP_PORT = 7420
PROBE_SOURCE = "10.0.0.3"
"""The probe sender's address in the storage namespace (added for the probe, removed after)."""
PROBE_PORT = 47420
"""The probe receiver's UDP port in the client namespace."""
WINDOW = 64
"""Probe datagrams outstanding at most: the client's own default window is of this order, and 64 frames of
9 KiB stay far below the switch's 4 MiB socket buffers."""
STALL_S = 0.05
"""No datagram counted for this long with some outstanding: those are written off as lost."""
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Plan:
    """What one run measures."""

    mtus: tuple[int, ...] = (1500, 9000)
    block_mib: int = 16
    probe_seconds: float = 3.0
    """Seconds the switch's forwarding rate is measured for (after a warm-up of a quarter of that)."""
    read_seconds: float = 3.0
    """Seconds of back-to-back warm reads per round (the reader's sustained rate, the goal's figure); as long as
    the switch's own rate is measured, so both are steady rates, not a start-up."""
    repeats: int = 3
    """Rounds of (switch rate, warm reads) per MTU; the best of each is reported."""
    get_span: int | None = None
    """The reader's `ClientOptions.get_span`; None: the client's default (what the goal is about)."""
    window: int | None = None
    """The reader's `ClientOptions.window` (its largest congestion window); None: the client's default."""
    realtime_devices: bool = True
    """The switch and the storage node at SCHED_FIFO (`kvtesting.realtime`); False: all under the fair scheduler."""


FULL = Plan()
QUICK = Plan(block_mib=2, probe_seconds=1.0, read_seconds=1.0, repeats=1)


# ---- the probe: runs as its own process (no gRPC threads to fork), its two children join the namespaces ----

def _enter_netns(name: str) -> None:
    """Move this process into the network namespace `ip netns` calls `name`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
    finally:
        os.close(fd)


def probe_frames(chunk: int, count: int = 256) -> list[bytes]:
    """`count` distinct well-formed GET_REPLYs of `chunk`-byte values (one block's first chunks)."""
    from kvpool.constants import Opcode
    from kvpool.wire import Header, encode

    rng = random.Random(chunk)
    shift = chunk.bit_length() - 1
    return [encode(Header(Opcode.GET_REPLY, tenant=TENANT, req_id=i + 1, prefix_hash=0x9A7E_0000 + chunk,
                          chunk_idx=i, chunk_count=count, chunk_shift=shift, version=1), rng.randbytes(chunk))
            for i in range(count)]


def _receiver(netns: str, address: tuple[str, int], counted: Any, notify_w: int, ready_w: int) -> None:
    _enter_netns(netns)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(address)
    os.write(ready_w, b"r")
    buf = bytearray(65535)
    n = 0
    while True:
        got = sock.recv_into(buf)
        if got == 1:  # the sender's stop datagram (from another port: not KVP, so the switch forwards it as is)
            return
        n += 1
        counted.value = n
        if n % 8 == 0:
            os.write(notify_w, b"x")


def _sender(netns: str, source: tuple[str, int], dest: tuple[str, int], frames: list[bytes], counted: Any,
            notify_r: int, seconds: float, result: Any) -> None:
    _enter_netns(netns)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(source)
    sent = lost = 0
    warm_until = time.monotonic() + seconds / 4
    end = warm_until + seconds
    mark: tuple[float, int] | None = None
    last_progress = time.monotonic()
    seen = 0
    while True:
        now = time.monotonic()
        if mark is None and now >= warm_until:
            mark = (now, counted.value)
        if now >= end:
            break
        outstanding = sent - lost - counted.value
        while outstanding < WINDOW:
            sock.sendto(frames[sent % len(frames)], dest)
            sent += 1
            outstanding += 1
        ready, _, _ = select.select([notify_r], [], [], STALL_S)
        if ready:
            os.read(notify_r, 4096)
        if counted.value != seen:
            seen, last_progress = counted.value, time.monotonic()
        elif time.monotonic() - last_progress >= STALL_S:
            lost += sent - lost - counted.value  # nothing for a while: what is out is not coming
            last_progress = time.monotonic()
    stop = time.monotonic()
    assert mark is not None
    result[0] = counted.value - mark[1]
    result[1] = stop - mark[0]
    result[2] = sent
    result[3] = lost
    time.sleep(STALL_S)
    result[4] = counted.value
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as plain:
        plain.bind((source[0], 0))
        for _ in range(3):
            plain.sendto(b"\0", dest)


def _probe(args: argparse.Namespace) -> int:
    """Measure the switch's forwarding rate of `--chunk`-sized GET_REPLYs; print one JSON line."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    counted = ctx.RawValue("q", 0)
    result = ctx.RawArray("d", 5)
    notify_r, notify_w = os.pipe()
    ready_r, ready_w = os.pipe()
    frames = probe_frames(args.chunk)
    receiver = ctx.Process(target=_receiver, args=(args.dst_ns, (args.dst, PROBE_PORT), counted, notify_w,
                                                   ready_w), daemon=True)
    receiver.start()
    if not select.select([ready_r], [], [], 30)[0]:
        raise RuntimeError("the probe receiver did not start")
    sender = ctx.Process(target=_sender, args=(args.src_ns, (args.src, KVP_PORT), (args.dst, PROBE_PORT), frames,
                                               counted, notify_r, args.seconds, result))
    sender.start()
    sender.join()
    receiver.join(timeout=2)
    if receiver.is_alive():
        receiver.kill()
    delivered, elapsed, sent, lost, total = result[:]
    print(json.dumps({"chunk_bytes": args.chunk, "datagram_bytes": len(frames[0]), "seconds": elapsed,
                      "delivered": int(delivered), "sent": int(sent), "written_off": int(lost),
                      "arrived_in_all": int(total),
                      "frames_per_s": delivered / elapsed if elapsed else 0.0,
                      "payload_MB_per_s": delivered * args.chunk / 1e6 / elapsed if elapsed else 0.0}))
    return 0


# ---- agents in the hosts' namespaces: write a block, read it with the client's defaults -----------------

def block_data(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _agent(args: argparse.Namespace) -> int:
    from kvpool.client import ClientOptions, KVPClient

    data = block_data(args.ph & 0xFFFF, args.size)
    if args.agent == "write":
        options = ClientOptions(server=(args.server, KVP_PORT), tenant=TENANT, chunk_size=args.chunk)
        with KVPClient(options) as client:
            client.put_block(args.ph, data, version=1)
        print(json.dumps({"ok": True}))
        return 0
    asked = {"get_span": args.get_span, "window": args.window}
    overrides = {name: value for name, value in asked.items() if value is not None}  # defaults unless a run asks
    client = KVPClient(ClientOptions(server=(args.server, KVP_PORT), tenant=TENANT, **overrides))
    cpu = time.process_time()
    began = time.monotonic()
    block = client.get_block(args.ph)
    elapsed = time.monotonic() - began
    cpu_s = time.process_time() - cpu  # the read's own CPU: taken before the check below compares the block
    result: dict[str, Any] = {"seconds": elapsed, "verified": block.data == data, "chunks": len(block.chunks),
                              "sent": client.sent, "resent": client.resent, "cpu_s": cpu_s,
                              "payload_MB_per_s": args.size / 1e6 / elapsed}
    if args.sustain:
        result["sustained"] = _sustained_reads(client, args.ph, data, args.sustain)
    print(json.dumps(result))
    client.close()
    return 0


def _sustained_reads(client: Any, ph: int, data: bytes, seconds: float) -> dict:
    """The same client reads the block again and again, back to back, for at least `seconds`: the reader's
    steady rate, as an inference node's connector reading one block after another has it (its path state,
    window and round-trip estimate, carried from read to read). Only the reads are timed; each block is compared
    with what was written between two reads, outside the timing."""
    sent, resent = client.sent, client.resent
    blocks = chunks = 0
    reading = cpu = 0.0
    verified = True
    while reading < seconds:
        cpu_before, began = time.process_time(), time.monotonic()
        block = client.get_block(ph)
        reading += time.monotonic() - began
        cpu += time.process_time() - cpu_before
        blocks += 1
        chunks += len(block.chunks)
        verified = verified and block.data == data
    return {"blocks": blocks, "chunks": chunks, "seconds": reading, "verified": verified, "cpu_s": cpu,
            "sent": client.sent - sent, "resent": client.resent - resent,
            "payload_MB_per_s": blocks * len(data) / 1e6 / reading}


# ---- the run -----------------------------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Meter:
    """CPU seconds the switch process and the storage node spend inside a `with` block."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.spent: dict[str, float] = {}

    def __enter__(self) -> _Meter:
        self._before = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.spent = {name: round(_cpu_seconds(pid) - self._before[name], 3) for name, pid in self.pids.items()}


def _in_ns(netns: str, *args: str, timeout: float = 900) -> dict:
    done = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-m", "bench.path_rate", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).parents[1])
    if done.returncode != 0:
        raise RuntimeError(f"{args[:2]} in {netns} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_mtu(bed: Any, mtu: int, plan: Plan, ph: int) -> dict:
    """One MTU's row: a lone reader cold (the first read after the write), then `plan.repeats` rounds of the
    switch's forwarding rate and a warm read, interleaved so that both meet the same load; the best of each is
    the row's figure (a busy machine only ever slows them), every trial is kept."""
    from kvpool.blocks import chunk_len_for_mtu

    net = bed.net
    client_ns, storage_ns = net.netns(net.options.client), net.netns(net.options.storage)
    pids = {p.name.replace(" ", "_"): p.popen.pid for p in net.processes if p.name in ("switch", "storage node")}
    bed.set_mtu(mtu)
    chunk = chunk_len_for_mtu(mtu)
    size = plan.block_mib << 20
    _in_ns(storage_ns, "--agent", "write", "--server", net.options.storage.ip, "--ph", str(ph), "--size",
           str(size), "--chunk", str(chunk))

    def probe() -> dict:
        with _Meter(pids) as meter:
            got = json.loads(subprocess.run(
                [sys.executable, "-m", "bench.path_rate", "--probe", "--src-ns", storage_ns, "--dst-ns", client_ns,
                 "--src", PROBE_SOURCE, "--dst", net.options.client.ip, "--chunk", str(chunk), "--seconds",
                 str(plan.probe_seconds)], capture_output=True, text=True, check=True, timeout=300,
                cwd=Path(__file__).parents[1]).stdout.strip().splitlines()[-1])
        got["cpu_s"] = meter.spent
        got["switch_cpu_us_per_frame"] = 1e6 * meter.spent["switch"] / max(1, got["arrived_in_all"])
        return got

    def read(sustain: float) -> dict:
        """One reader process: a read, then (`sustain` > 0) back-to-back reads for that long. The CPU figures
        cover every read of the process (with `sustain`, mostly the sustained ones)."""
        with _Meter(pids) as meter:
            got = _in_ns(client_ns, *read_agent_args(net.options.storage.ip, ph, size, plan.get_span, plan.window,
                                                     sustain))
        sustained = got.get("sustained", {"chunks": 0, "cpu_s": 0.0})
        chunks = got["chunks"] + sustained["chunks"]
        got["cpu_s"] = {**meter.spent, "reader": round(got.pop("cpu_s") + sustained["cpu_s"], 3)}
        got["cpu_us_per_chunk"] = {k: round(1e6 * v / chunks, 1) for k, v in got["cpu_s"].items()}
        return got

    cold = read(0.0)
    probes, warms = [], []
    for _ in range(plan.repeats):
        probes.append(probe())
        warms.append(read(plan.read_seconds))
    switch = max(probes, key=lambda t: t["payload_MB_per_s"])
    best = max(warms, key=lambda t: t["sustained"]["payload_MB_per_s"])
    reads = {"cold": cold, "warm": max(warms, key=lambda t: t["payload_MB_per_s"]),
             "sustained": {**best["sustained"], "cpu_s": best["cpu_s"], "cpu_us_per_chunk": best["cpu_us_per_chunk"]}}
    for r in reads.values():
        r["vs_switch"] = r["payload_MB_per_s"] / switch["payload_MB_per_s"]
        r["switch_bound_ratio"] = switch_bound_ratio(switch["switch_cpu_us_per_frame"],
                                                     r["cpu_us_per_chunk"]["switch"])
    return {"mtu": mtu, "chunk_bytes": chunk, "block_bytes": size, "switch": switch, "reader": reads,
            "trials": {"switch": probes, "warm": warms}}


def read_agent_args(server: str, ph: int, size: int, get_span: int | None, window: int | None = None,
                    sustain: float = 0.0) -> list[str]:
    """The reader agent's arguments: the client's defaults but for the span width and the largest window when a
    run sets them; with `sustain`, back-to-back reads for that many seconds after the first."""
    span = [] if get_span is None else ["--get-span", str(get_span)]
    cap = [] if window is None else ["--window", str(window)]
    more = ["--sustain", str(sustain)] if sustain > 0 else []
    return ["--agent", "read", "--server", server, "--ph", str(ph), "--size", str(size), *span, *cap, *more]


def switch_bound_ratio(us_per_frame: float, us_per_chunk_read: float) -> float:
    """The ratio a reader would reach if the switch's CPU were the only limit: its CPU per forwarded frame over
    its CPU per chunk a reader reads (the GET and the reply). Independent of how busy the machine is."""
    return us_per_frame / us_per_chunk_read if us_per_chunk_read > 0 else float("nan")


def table(rows: list[dict]) -> str:
    lines = ["| MTU | chunk | switch forwards (MB/s payload, frames/s) | switch µs CPU per frame | "
             "**reader sustained MB/s (× switch)** | reader, one cold read (× switch) | reader, one warm read "
             "(× switch) | µs CPU per chunk, sustained: switch / storage / reader | switch-bound ratio (CPU) | "
             "resent (cold/warm/sustained) | verified |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for r in rows:
        s, cold, warm, steady = r["switch"], r["reader"]["cold"], r["reader"]["warm"], r["reader"]["sustained"]
        per = steady["cpu_us_per_chunk"]
        verified = cold["verified"] and warm["verified"] and steady["verified"]
        lines.append(f"| {r['mtu']} | {r['chunk_bytes']} | {s['payload_MB_per_s']:.1f} ({s['frames_per_s']:,.0f}) | "
                     f"{s['switch_cpu_us_per_frame']:.1f} | **{steady['payload_MB_per_s']:.1f} "
                     f"({steady['vs_switch']:.2f})** | {cold['payload_MB_per_s']:.1f} ({cold['vs_switch']:.2f}) | "
                     f"{warm['payload_MB_per_s']:.1f} ({warm['vs_switch']:.2f}) | "
                     f"{per.get('switch', 0):.0f} / {per.get('storage_node', 0):.0f} / {per.get('reader', 0):.0f} | "
                     f"{steady['switch_bound_ratio']:.2f} | {cold['resent']}/{warm['resent']}/{steady['resent']} | "
                     f"{'yes' if verified else 'NO'} |")
    return "\n".join(lines)


def run(out: Path, quick: bool = False, plan: Plan | None = None) -> dict:
    from bench._incast_bed import Bed

    plan = plan or (QUICK if quick else FULL)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    ph = 0x2A7E_0000 + (int(time.time()) & 0xFFFF) * 0x10
    started = time.perf_counter()
    with Bed(out / "path-rate-bed", tag="prt", realtime_devices=plan.realtime_devices) as bed:
        scheduling = bed.scheduling()
        bed.coalescing(True)
        storage_ns, storage_if = bed.net.netns(bed.net.options.storage), bed.net.host_if(bed.net.options.storage)
        subprocess.run(["ip", "-n", storage_ns, "addr", "add", f"{PROBE_SOURCE}/32", "dev", storage_if], check=True)
        for i, mtu in enumerate(plan.mtus):
            rows.append(measure_mtu(bed, mtu, plan, ph + i))
            print(f"   {table(rows[-1:]).splitlines()[-1]}", flush=True)
    result = {"bench": NAME, "plan": plan.__dict__, "rows": rows, "window": WINDOW, "scheduling": scheduling,
              "wall_s": time.perf_counter() - started,
              "note": "switch = the softswitch process forwarding GET_REPLY datagrams (one packet per chunk); a "
                      "reader costs it 1 + 1/span packets per chunk (a span GET, then each reply)"}
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2))
    (out / f"{NAME}.md").write_text(scheduling + "\n\n" + table(rows) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.path_rate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mtus", help="e.g. 1500,9000")
    parser.add_argument("--mib", type=int, help="block size in MiB")
    parser.add_argument("--seconds", type=float, help="probe seconds")
    parser.add_argument("--repeats", type=int, help="rounds of (switch rate, warm reads) per MTU")
    parser.add_argument("--read-seconds", type=float, help="seconds of back-to-back warm reads per round")
    parser.add_argument("--get-span", type=int, help="the reader's ClientOptions.get_span (default: the client's)")
    parser.add_argument("--window", type=int, help="the reader's ClientOptions.window (default: the client's)")
    parser.add_argument("--fair", action="store_true",
                        help="the switch and the node under the fair scheduler too (default: SCHED_FIFO)")
    # internal: the probe and the namespace agents
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--agent", choices=("write", "read"), help=argparse.SUPPRESS)
    for name in ("--src-ns", "--dst-ns", "--src", "--dst", "--server"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--chunk", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ph", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sustain", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        return _probe(args)
    if args.agent:
        return _agent(args)
    base = QUICK if args.quick else FULL
    plan = Plan(mtus=tuple(int(m) for m in args.mtus.split(",")) if args.mtus else base.mtus,
                block_mib=args.mib or base.block_mib, probe_seconds=args.seconds or base.probe_seconds,
                read_seconds=args.read_seconds or base.read_seconds,
                repeats=args.repeats or base.repeats, get_span=args.get_span, window=args.window,
                realtime_devices=not args.fair)
    run(args.out, plan=plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
