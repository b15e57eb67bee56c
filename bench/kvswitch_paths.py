"""CPU time the softswitch spends per packet of each kind a lone reader's read and `bench.path_rate`'s probe make.

`bench.path_rate` compares a lone reader against the switch process's own forwarding rate (its probe: GET_REPLYs
that match no pending entry). What a reader's chunk costs the switch is one matched reply plus a span's share of a
span GET (1/16 at the client's default span); what the probe's costs is one unmatched reply. So the ratio rises only where the GET and the matched
reply come to cost what the probe's reply costs; this benchmark measures the three, in-process, on one core:

- `probe_reply`: a GET_REPLY from the storage port to a reader, no pending entry (path_rate's probe frames).
- `span_get`: a reader's F_STREAM GET of `SPAN` chunks (aux = SPAN, the client's default `get_span`) towards the
  storage node: opens a coalescing entry and feeds the block's stream (F_STREAM on a read of more than one chunk).
- `span_reply`: the storage node's SPAN replies to it (offsets 0..SPAN − 1: req_id + i, chunk_idx + i, aux = i,
  as kvpool/server.py sends them), each matching the entry; the last frees it.

each in bursts of 1 (one `process_burst` per frame) and of 8 (eight spans' GETs in one burst; a span's replies
in one burst; as many probe replies). The switch runs p4src/kvswitch.p4 configured as the bed's controller configures it
(bench/_incast_bed.py: routes, port roles, coalescing with the controller's multicast groups, the stream join, the
hot-key sketch), with 1 KiB chunks (path_rate's chunk at MTU 1500). Every figure is thread CPU time
(`time.thread_time_ns`) over a phase of several frames, the best of `repeats` runs, so other jobs on the machine's
cores do not raise it. Frames are built before timing; every output is counted so a path that silently drops
shows (`outputs_per_frame`).

    .venv/bin/python -m bench kvswitch_paths --out out/bench      (--quick: fewer spans and runs)
"""

from __future__ import annotations

import json
import pathlib
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.coalescing import CoalescingOptions, group_layouts
from controller.streaming import (
    CONFIG_ACTION as STREAM_CONFIG_ACTION,
)
from controller.streaming import (
    CONFIG_TABLE as STREAM_CONFIG_TABLE,
)
from controller.streaming import (
    STORAGE_PORT_ACTION,
    STORAGE_PORT_KEY,
    STORAGE_PORT_TABLE,
    StreamingOptions,
    session_of,
)
from kvpool.client import ClientOptions
from kvpool.constants import Flag, Opcode, Status
from kvpool.wire import Header, encode
from softswitch.runtime.switch import SoftSwitch
from softswitch.target import Exact, Lpm, Replica, TableEntry

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4src" / "kvswitch.p4"
CPU_PORT = 255
READER_PORT, STORAGE_PORT, OTHER_PORT = 1, 2, 3
PORTS = (READER_PORT, STORAGE_PORT, OTHER_PORT)
READER_IP, STORAGE_IP, OTHER_IP = "10.0.0.1", "10.0.0.100", "10.0.0.3"
READER_MAC, STORAGE_MAC, OTHER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:64", "02:00:00:00:00:03"
SWITCH_MAC = "02:00:00:00:00:fe"
KVP_PORT = 7420
READER_UDP = 40001
PROBE_UDP = 47420
"""bench.path_rate's probe receiver port on the reader's host."""
CHUNK = 1024
"""path_rate's chunk at MTU 1500."""
PROBE_FRAMES = 256
"""path_rate's probe cycles through 256 distinct replies: chunks 0..255 of a 256-chunk block."""
SPAN = ClientOptions().get_span
"""The client's default get_span."""
BLOCK_CHUNKS = 16384
"""A 16 MiB block of 1 KiB chunks (path_rate's reader's block)."""
TENANT = 0
PREFIX = 0x9A7E_0000_0000_0400
GROUP = 0x4B56
COALESCE_TIMEOUT_US = 250_000
"""bench/_incast_bed.py's pending-entry lifetime."""


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _ip(text: str) -> bytes:
    return bytes(int(b) for b in text.split("."))


def _udp_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int, dport: int, payload: bytes) -> bytes:
    """Ethernet / IPv4 (header checksum right) / UDP (checksum 0, as the kernel may send) around `payload`."""
    udp = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + (8 + len(payload)).to_bytes(2, "big") + b"\0\0"
    ip = bytearray(b"\x45\x00" + (28 + len(payload)).to_bytes(2, "big") + b"\x00\x00\x40\x00\x40\x11\x00\x00"
                   + _ip(src_ip) + _ip(dst_ip))
    total = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = (~total & 0xFFFF).to_bytes(2, "big")
    return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + bytes(ip) + udp + payload


def configured_switch() -> SoftSwitch:
    """kvswitch.p4 on the embedded target, configured as the incast/path_rate bed configures its switch."""
    from controller.codes import PortRole

    sw = SoftSwitch.load(PROGRAM, cpu_port=CPU_PORT)
    for ip, mac, port in ((READER_IP, READER_MAC, READER_PORT), (STORAGE_IP, STORAGE_MAC, STORAGE_PORT),
                          (OTHER_IP, OTHER_MAC, OTHER_PORT)):
        sw.table_insert(TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(int.from_bytes(_ip(ip), "big"), 32)},
                                   "MyIngress.ipv4_forward", {"dst_mac": int.from_bytes(_mac(mac), "big"),
                                                              "port": port}))
    sw.table_insert(TableEntry("MyIngress.port_role", {"ingress_port": Exact(STORAGE_PORT)},
                               "MyIngress.set_port_role", {"role": int(PortRole.STORAGE)}))
    coalescing = CoalescingOptions(timeout_us=COALESCE_TIMEOUT_US, epoch=1, mcast_group=GROUP)
    for group, layout in group_layouts(coalescing, PORTS).items():
        sw.mcast_group_set(group, [Replica(p, rid) for p, rid in layout])
    sw.table_set_default("MyIngress.coalesce_config", "MyIngress.set_coalesce_config", coalescing.config_params())
    for port in PORTS:
        sw.clone_session_set(session_of(port), [Replica(port)])
    sw.table_insert(TableEntry(STORAGE_PORT_TABLE, {STORAGE_PORT_KEY: Exact(STORAGE_PORT)}, STORAGE_PORT_ACTION, {}))
    sw.table_set_default(STREAM_CONFIG_TABLE, STREAM_CONFIG_ACTION, StreamingOptions(epoch=1).config_params())
    # the controller's hot-key sketch (DetectorOptions' threshold; it counts slot-sized chunks only, so these
    # 1 KiB chunks' GETs and replies pass it by, as on the bed)
    sw.table_set_default("MyIngress.sketch_config", "MyIngress.set_sketch_config", {"hot_threshold": 3, "epoch": 1})
    return sw


@dataclass(frozen=True)
class Frames:
    """Pre-built frames: `spans[i]` is (the span GET, its SPAN replies); `probes` path_rate-style replies."""

    spans: list[tuple[bytes, list[bytes]]]
    probes: list[bytes]


def build_frames(spans: int, seed: int = 1500) -> Frames:
    """`spans` consecutive span GETs of one block (chunk 0, SPAN, 2 SPAN, ...; wrapping), each with its storage node's
    replies, and as many probe replies as there are span replies."""
    rng = random.Random(seed)
    shift = CHUNK.bit_length() - 1
    out = []
    for s in range(spans):
        first = (s * SPAN) % BLOCK_CHUNKS
        req_id = 1 + s * SPAN
        get = Header(Opcode.GET, flags=int(Flag.STREAM), tenant=TENANT, req_id=req_id, prefix_hash=PREFIX,
                     chunk_idx=first, chunk_count=BLOCK_CHUNKS, chunk_shift=shift, aux=SPAN)
        get_frame = _udp_frame(READER_MAC, SWITCH_MAC, READER_IP, STORAGE_IP, READER_UDP, KVP_PORT, get.pack())
        replies = [
            _udp_frame(STORAGE_MAC, SWITCH_MAC, STORAGE_IP, READER_IP, KVP_PORT, READER_UDP, encode(
                Header(Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=TENANT, req_id=req_id + i,
                       prefix_hash=PREFIX, chunk_idx=first + i, chunk_count=BLOCK_CHUNKS, chunk_shift=shift,
                       version=1, aux=i), rng.randbytes(CHUNK)))
            for i in range(SPAN)]
        out.append((get_frame, replies))
    probes = [
        _udp_frame(STORAGE_MAC, SWITCH_MAC, STORAGE_IP, READER_IP, KVP_PORT, PROBE_UDP, encode(
            Header(Opcode.GET_REPLY, tenant=TENANT, req_id=i % PROBE_FRAMES + 1, prefix_hash=0x9A7E_0000 + CHUNK,
                   chunk_idx=i % PROBE_FRAMES, chunk_count=PROBE_FRAMES, chunk_shift=shift, version=1),
            rng.randbytes(CHUNK)))
        for i in range(spans * SPAN)]
    return Frames(out, probes)


@dataclass
class Tally:
    """CPU ns, frames and outputs of one packet class over a run."""

    ns: int = 0
    frames: int = 0
    outputs: int = 0


def _timed(process_burst: Callable[[Sequence[tuple[int, bytes]]], list], bursts: Sequence[list[tuple[int, bytes]]],
           tally: Tally) -> None:
    """Run `bursts` one after the other, adding their CPU time, frames and outputs to `tally`."""
    clock = time.thread_time_ns
    outputs = 0
    t0 = clock()
    for burst in bursts:
        outputs += len(process_burst(burst))
    tally.ns += clock() - t0
    tally.frames += sum(len(b) for b in bursts)
    tally.outputs += outputs


def run_classes(sw: SoftSwitch, frames: Frames, burst: int) -> dict[str, Tally]:
    """One pass over every span in groups of 8 spans: their GETs, then their replies (the reader's window is
    deeper than a span), then as many probe replies; per class, `burst` frames per `process_burst`."""
    tallies = {"probe_reply": Tally(), "span_get": Tally(), "span_reply": Tally()}
    pb = sw.process_burst
    for g in range(0, len(frames.spans), 8):
        group = frames.spans[g:g + 8]
        gets = [(READER_PORT, get) for get, _ in group]
        replies = [(STORAGE_PORT, r) for _, rs in group for r in rs]
        probes = [(STORAGE_PORT, p) for p in frames.probes[g * SPAN:(g + len(group)) * SPAN]]
        _timed(pb, [gets[i:i + burst] for i in range(0, len(gets), burst)], tallies["span_get"])
        _timed(pb, [replies[i:i + burst] for i in range(0, len(replies), burst)], tallies["span_reply"])
        _timed(pb, [probes[i:i + burst] for i in range(0, len(probes), burst)], tallies["probe_reply"])
    return tallies


def measure(spans: int, repeats: int) -> dict[str, dict[str, float]]:
    """Per burst size and class: best µs CPU per frame over `repeats` runs, and outputs per frame."""
    frames = build_frames(spans)
    results: dict[str, dict[str, float]] = {}
    for burst in (1, 8):
        sw = configured_switch()
        run_classes(sw, build_frames(16, seed=7), burst)  # warm-up (other spans: its entries are freed)
        best: dict[str, Tally] = {}
        for _ in range(repeats):
            for name, t in run_classes(sw, frames, burst).items():
                if name not in best or t.ns / t.frames < best[name].ns / best[name].frames:
                    best[name] = t
        for name, t in best.items():
            results[f"{name} x{burst}"] = {"us_per_frame": round(t.ns / t.frames / 1000, 2),
                                           "frames": t.frames, "outputs_per_frame": round(t.outputs / t.frames, 3)}
    return results


def derived(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """What a reader's chunk costs against a probe's (burst 8): reply + GET / 8, over the probe reply."""
    probe = results["probe_reply x8"]["us_per_frame"]
    chunk = results["span_reply x8"]["us_per_frame"] + results["span_get x8"]["us_per_frame"] / SPAN
    return {"reader_chunk_us": round(chunk, 2), "probe_chunk_us": probe,
            "probe_over_reader_cost": round(probe / chunk, 3)}


def run(out_dir: pathlib.Path, quick: bool = False) -> dict:
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spans, repeats = (64, 3) if quick else (256, 5)
    results = measure(spans, repeats)
    report = {"benchmark": "kvswitch_paths", "python": platform.python_version(), "quick": quick,
              "chunk_bytes": CHUNK, "span": SPAN, "spans_per_run": spans, "repeats": repeats,
              "classes": results, "derived": derived(results)}
    (out_dir / "kvswitch_paths.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| class × burst | µs CPU per frame | outputs per frame |", "|---|---:|---:|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['us_per_frame']} | {r['outputs_per_frame']} |")
    d = report["derived"]
    lines += ["", f"A reader's chunk (reply + GET/{SPAN}, bursts of 8): {d['reader_chunk_us']} µs against the probe's "
              f"{d['probe_chunk_us']} µs (ratio bound {d['probe_over_reader_cost']}); {CHUNK}-byte chunks, "
              f"Python {report['python']}, best of {repeats} runs of {spans} spans, thread CPU time."]
    (out_dir / "kvswitch_paths.md").write_text("\n".join(lines) + "\n")
    return report


if __name__ == "__main__":
    import sys

    print(json.dumps(run(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-out"), quick=True), indent=2))
