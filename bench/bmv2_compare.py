
"""Packets per second of kvswitch.p4 on our softswitch and on BMv2, through the same veth and nanomsg harnesses.

Rows:
- `in-process`: `softswitch.runtime.SoftSwitch.process` called directly (no ports, no P4Runtime), best of 3
  runs over a pre-built list of frames; CPU time of this process, wall-clock beside it.
- `softswitch-process` / `bmv2-process`: the switch as a separate process (tests/targets/switch_process.py,
  the harness the data-plane tests and the differential test use), `count` frames written back to back
  into the veth peer of one port, outputs counted on the peers until the switch has been quiet for 1 s.
  packets/s = frames out / (last frame out - first frame in). BMv2 has a row saying "not installed" when
  p4c/simple_switch_grpc are not on PATH; process rows need root (veth pairs).
- `softswitch-nanomsg` / `bmv2-nanomsg`: the same processes with every port on BMv2's nanomsg packet interface
  (`--packet-in ipc://...`, tests/softswitch/nanomsg/nn_switch.py, as PTF's `nn` platform drives BMv2);
  frames go in as PACKET_IN messages back to back (draining PACKET_OUTs every 64 so neither side's queue
  blocks), counted and timed as for veth. No root needed.

Packet classes, all on kvswitch.p4 with the host routes installed: `get_hit` (a GET the switch answers from
a filled slot), `get_miss` (a GET for an unindexed key, forwarded to the storage node) and `l3` (plain
IPv4/UDP, routed). Note from /work/shared/P4-ON-BMV2.md: BMv2 lost about a third of its input frames
through veth at every rate tried, so its veth row reports frames lost beside the rate.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import tempfile
import time

from tqdm import tqdm

CLASSES = ("get_hit", "get_miss", "l3")


def _frames() -> dict[str, bytes]:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from kvpool.constants import Opcode
    from kvpool.keys import ChunkKey
    from kvpool.protocol import KVP
    from kvtesting.kvnet import CLIENT_IP, CLIENT_MAC, STORAGE_IP, SWITCH_MAC, chunk_key, kvp_frame

    hit, miss = chunk_key(tenant=1, prefix_hash=0x1111), chunk_key(tenant=1, prefix_hash=0x2222)

    def get(key: ChunkKey) -> bytes:
        return bytes(kvp_frame(KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash,
                                   chunk_idx=0, chunk_count=4, req_id=1)))

    l3 = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP) / UDP(dport=53) / bytes(64)
    return {"get_hit": get(hit), "get_miss": get(miss), "l3": bytes(l3)}


def _prepare(target) -> None:
    """Routes, and key (1, 0x1111, 0) indexed to slot 1 and filled, so `get_hit` frames are answered."""
    from kvtesting.kvnet import KvNet, chunk_key, value_chunk

    net = KvNet(target, {})
    net.install_routes()
    key = chunk_key(tenant=1, prefix_hash=0x1111)
    net.index(key, 1)
    net.server_reply(key, value_chunk(1), version=1)
    out = net.get(key)
    assert out and out[0][0] == 1, f"the switch did not answer the prepared GET: {out}"


def in_process(count: int) -> dict[str, dict]:
    from kvtesting.kvnet import CLIENT_PORT, CPU_PORT, P4_MAIN
    from softswitch.frontend import load_program
    from softswitch.runtime import SoftSwitch

    switch = SoftSwitch.load(load_program(str(P4_MAIN)), cpu_port=CPU_PORT)
    _prepare(switch)
    rows = {}
    for name, frame in tqdm(_frames().items(), desc="in-process", unit="class"):
        for _ in range(50):
            switch.process(CLIENT_PORT, frame)
        best_cpu, best_wall = float("inf"), float("inf")
        for _ in range(3):
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(count):
                switch.process(CLIENT_PORT, frame)
            best_cpu = min(best_cpu, time.process_time() - c0)
            best_wall = min(best_wall, time.perf_counter() - w0)
        rows[name] = {"pps": round(count / best_cpu), "pps_wall": round(count / best_wall), "sent": count}
    return rows


def through_veth(kind: str, count: int, work: pathlib.Path) -> dict[str, dict]:
    from kvtesting.kvnet import CLIENT_PORT, CPU_PORT, P4_MAIN
    from kvtesting.switch_process import KINDS, ProcessOptions, SwitchProcess, compile_program

    compiled = compile_program(KINDS[kind], P4_MAIN, work / f"build-{kind}")
    proc = SwitchProcess(KINDS[kind], compiled, work, ProcessOptions(cpu_port=CPU_PORT, veth_tag=f"b{kind[0]}"))
    rows = {}
    try:
        target = proc.start()
        _prepare(target)
        ports = target.ports
        poll = select.poll()
        for sock in ports.socks.values():
            poll.register(sock.fileno(), select.POLLIN)
        for name, frame in tqdm(_frames().items(), desc=kind, unit="class"):
            received, last = 0, None
            start = time.perf_counter()
            for _ in range(count):
                ports.send(CLIENT_PORT, frame)
            while poll.poll(1000):
                for port in ports.socks:
                    got = len(ports.receive_ready(port))
                    if got:
                        received += got
                        last = time.perf_counter()
            pps = round(received / (last - start)) if last else 0
            rows[name] = {"pps": pps, "sent": count, "received": received, "lost": count - received}
    finally:
        proc.close()
    return rows


def through_nanomsg(kind: str, count: int, work: pathlib.Path) -> dict[str, dict]:
    from kvtesting.kvnet import CLIENT_PORT, CPU_PORT, P4_MAIN
    from kvtesting.switch_process import KINDS, compile_program
    from softswitch.nanomsg import MsgType
    from tests.softswitch.nanomsg.nn_switch import NanomsgSwitchProcess

    compiled = compile_program(KINDS[kind], P4_MAIN, work / f"build-{kind}")
    proc = NanomsgSwitchProcess(KINDS[kind], compiled, work / f"nn-{kind}", cpu_port=CPU_PORT)
    rows = {}
    try:
        _prepare(proc.start())
        assert proc.host_ports is not None
        injector = proc.host_ports.injector
        poll = select.poll()
        poll.register(injector.fileno(), select.POLLIN)
        for name, frame in tqdm(_frames().items(), desc=f"{kind} nanomsg", unit="class"):
            received, last = 0, None

            def drain() -> None:
                nonlocal received, last
                got = sum(1 for m in injector.receive_ready() if m.type == MsgType.PACKET_OUT)
                if got:
                    received += got
                    last = time.perf_counter()

            start = time.perf_counter()
            for i in range(count):
                injector.send(CLIENT_PORT, frame)
                if i % 64 == 63:
                    drain()
            while poll.poll(1000):
                drain()
            pps = round(received / (last - start)) if last else 0
            rows[name] = {"pps": pps, "sent": count, "received": received, "lost": count - received}
    finally:
        proc.close()
    return rows


def run(out_dir: pathlib.Path, quick: bool = False) -> dict:
    from kvtesting.switch_process import BMV2

    out_dir.mkdir(parents=True, exist_ok=True)
    count_inproc = 300 if quick else 3000
    count_veth = 200 if quick else 2000
    result: dict = {"program": "p4src/kvswitch.p4", "classes": list(CLASSES),
                    "in_process": in_process(count_inproc), "softswitch_process": None, "bmv2_process": None,
                    "softswitch_nanomsg": None, "bmv2_nanomsg": None}
    with tempfile.TemporaryDirectory(prefix="bmv2-compare-") as tmp:
        result["softswitch_nanomsg"] = through_nanomsg("softswitch", count_veth, pathlib.Path(tmp))
        result["bmv2_nanomsg"] = through_nanomsg("bmv2", count_veth, pathlib.Path(tmp)) if BMV2.available() \
            else "not installed (p4c/simple_switch_grpc not on PATH)"
        if os.geteuid() != 0:
            result["softswitch_process"] = result["bmv2_process"] = "needs root (veth pairs)"
        else:
            result["softswitch_process"] = through_veth("softswitch", count_veth, pathlib.Path(tmp))
            if BMV2.available():
                result["bmv2_process"] = through_veth("bmv2", count_veth, pathlib.Path(tmp))
            else:
                result["bmv2_process"] = "not installed (p4c/simple_switch_grpc not on PATH)"
    (out_dir / "bmv2_compare.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / "bmv2_compare.md").write_text(_markdown(result))
    return result


def _markdown(result: dict) -> str:
    lines = ["## kvswitch.p4: softswitch vs BMv2 (packets/s)", "",
             "| target | " + " | ".join(CLASSES) + " | frames lost (of sent) |",
             "|---|" + "---:|" * len(CLASSES) + "---:|"]
    for label, key in (("softswitch in-process (CPU time)", "in_process"),
                       ("softswitch process, veth", "softswitch_process"), ("BMv2 process, veth", "bmv2_process"),
                       ("softswitch process, nanomsg", "softswitch_nanomsg"),
                       ("BMv2 process, nanomsg", "bmv2_nanomsg")):
        rows = result[key]
        if isinstance(rows, str):
            lines.append(f"| {label} | " + " | ".join(rows if i == 0 else "" for i in range(len(CLASSES))) + " | |")
            continue
        sent = sum(r["sent"] for r in rows.values())
        lost = f"{sum(r['lost'] for r in rows.values())} of {sent}" if key != "in_process" else "n/a"
        lines.append(f"| {label} | " + " | ".join(f"{rows[c]['pps']:,}" for c in CLASSES) + f" | {lost} |")
    if isinstance(result["in_process"], dict):
        wall = ", ".join(f"{c} {result['in_process'][c]['pps_wall']:,}" for c in CLASSES)
        lines += ["", f"In-process wall-clock packets/s: {wall}."]
    return "\n".join(lines) + "\n"
