"""Benchmark: the embedded switch as a process on real veth ports, and its P4Runtime write throughput.

Measures, in one run:
- forwarding rate through real veth interfaces of an L3 program (routed IPv4/UDP frames): a sender process
  blasts pre-built frames into port 1, a sniffer process counts what leaves port 2;
- the same program's in-process rate (`Target.process` called directly, no ports, no gRPC): the baseline the
  veth figure is compared with, so the cost of the port path shows as a ratio;
- P4Runtime table-insert throughput: batched Write requests of 1,000 LPM entries (goal: >= 5,000 inserts/s).

Needs root (veth pairs named `sswpb*`). `python -m bench softswitch_p4runtime --out DIR`.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "softswitch" / "p4runtime" / "programs" / "l2l3.p4"
VETHS = (("sswpb0a", "sswpb0b"), ("sswpb1a", "sswpb1b"))
GOAL_INSERTS_PER_S = 5000

_SENDER = r"""
import socket, sys, time
iface, count, frame = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind((iface, 0))
t0 = time.perf_counter()
for _ in range(count):
    s.send(frame)
print(time.perf_counter() - t0, flush=True)
"""

_SNIFFER = r"""
import socket, sys, time
iface, idle = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind((iface, 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.settimeout(idle)
print("ready", flush=True)
n, first, last, start = 0, None, None, time.perf_counter()
while True:
    try:
        frame, addr = s.recvfrom(65535)
    except TimeoutError:
        if n or time.perf_counter() - start > 60:
            break
        continue
    if addr[2] == 4 or frame[-5:] != b"bench":
        continue
    now = time.perf_counter()
    first = first or now
    last = now
    n += 1
print(n, (last - first) if n > 1 else 0.0, flush=True)
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=False, capture_output=True)


def _make_veths() -> None:
    for a, b in VETHS:
        _ip("link", "del", a)
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        for end in (a, b):
            subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{end}.disable_ipv6=1"], capture_output=True)
            _ip("link", "set", end, "up")


def _drop_veths() -> None:
    for a, _ in VETHS:
        _ip("link", "del", a)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frame() -> bytes:
    """Ethernet/IPv4/UDP to 10.0.2.1, ending in b"bench" so the sniffer recognises it."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="02:00:00:00:00:fe", src="02:00:00:00:00:01")
                 / IP(src="10.0.1.1", dst="10.0.2.1", ttl=64) / UDP(sport=1000, dport=2000) / (b"x" * 18 + b"bench"))


def _lpm_updates(info, start: int, count: int):
    """`count` INSERTs of /32 routes 11.x.y.z (distinct), each to port 2."""
    from p4.v1 import p4runtime_pb2

    table = next(t for t in info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
    route = next(a for a in info.actions if a.preamble.name == "MyIngress.route")
    updates = []
    for i in range(start, start + count):
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        te = u.entity.table_entry
        te.table_id = table.preamble.id
        fm = te.match.add(field_id=1)
        fm.lpm.value = (0x0B000000 + i).to_bytes(4, "big")
        fm.lpm.prefix_len = 32
        te.action.action.action_id = route.preamble.id
        te.action.action.params.add(param_id=1, value=bytes.fromhex("020000000002"))
        te.action.action.params.add(param_id=2, value=b"\x02")
        updates.append(u)
    return updates


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc): a figure the other load on the machine leaves alone."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _in_process_rate(frame: bytes, packets: int) -> tuple[float, float]:
    """Baseline: frames per wall second and per CPU second of `SoftSwitch.process`, same route, no ports."""
    from softswitch import target as tg
    try:
        from softswitch.runtime import SoftSwitch
    except ImportError:  # the package may not re-export it
        from softswitch.runtime.switch import SoftSwitch

    from softswitch.p4runtime.device import settle_heap

    sw = SoftSwitch.load(PROGRAM, cpu_port=255)
    settle_heap()  # as the switch process does when a pipeline is committed
    sw.table_insert(tg.TableEntry("MyIngress.smac", {"hdr.ethernet.src_addr": tg.Exact(0x020000000001)}, "NoAction"))
    sw.table_insert(tg.TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": tg.Lpm(0x0A000200, 24)},
                                  "MyIngress.route", {"dmac": 0x020000000002, "port": 2}))
    assert sw.process(1, frame), "the baseline route does not forward"
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(packets):
        sw.process(1, frame)
    return packets / (time.perf_counter() - t0), packets / (time.process_time() - c0)


def run(out_dir: pathlib.Path, quick: bool = False) -> dict:
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
    from tqdm import tqdm

    from softswitch import compile as compiler

    out_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise PermissionError("bench softswitch_p4runtime needs root (veth pairs, raw sockets)")
    packets = 2_000 if quick else 20_000
    batches = 3 if quick else 20
    batch = 1000

    compiled = compiler.compile_program(PROGRAM)
    frame = _frame()
    baseline, baseline_cpu = _in_process_rate(frame, packets // 2)

    _make_veths()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "softswitch", "--no-p4", "--device-id", "0",
                             "-i", f"1@{VETHS[0][0]}", "-i", f"2@{VETHS[1][0]}",
                             "--", "--grpc-server-addr", f"127.0.0.1:{port}", "--cpu-port", "255"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    result: dict = {}
    try:
        line = proc.stderr.readline()
        while line and not line.startswith("softswitch: device"):
            line = proc.stderr.readline()
        if not line:
            raise RuntimeError("switch did not start")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # never block its log
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        election = p4runtime_pb2.Uint128(high=0, low=1)

        def requests():
            req = p4runtime_pb2.StreamMessageRequest()
            req.arbitration.device_id = 0
            req.arbitration.election_id.CopyFrom(election)
            yield req
            while proc.poll() is None and not done:
                time.sleep(0.1)

        done = False
        stream = stub.StreamChannel(requests())
        next(stream)  # arbitration answer: we are primary
        cfg = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=0, election_id=election,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        cfg.config.p4info.CopyFrom(compiled.p4info)
        cfg.config.p4_device_config = compiled.device_config
        stub.SetForwardingPipelineConfig(cfg)

        # -- P4Runtime insert throughput. Requests are serialised before the clock starts: the client's
        # pure-Python protobuf (3.20) would otherwise dominate what is meant to be the switch's figure.
        write_raw = channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=lambda b: b,
                                        response_deserializer=p4runtime_pb2.WriteResponse.FromString)
        times, cpu = [], 0.0
        for b in tqdm(range(batches), desc="batched inserts", unit="batch"):
            req = p4runtime_pb2.WriteRequest(device_id=0, election_id=election,
                                             updates=_lpm_updates(compiled.p4info, b * batch, batch))
            data = req.SerializeToString()
            c0 = _cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            write_raw(data)
            times.append(time.perf_counter() - t0)
            cpu += _cpu_seconds(proc.pid) - c0
        inserts_per_s = batch * batches / sum(times)
        inserts_per_cpu_s = batch * batches / cpu if cpu else float("inf")

        # -- forwarding through veth: the route and a known source (no digests)
        base = p4runtime_pb2.WriteRequest(device_id=0, election_id=election)
        info = compiled.p4info
        smac = next(t for t in info.tables if t.preamble.name == "MyIngress.smac")
        noaction = next(a for a in info.actions if a.preamble.name == "NoAction")
        u = base.updates.add(type=p4runtime_pb2.Update.INSERT)
        u.entity.table_entry.table_id = smac.preamble.id
        u.entity.table_entry.match.add(field_id=1).exact.value = bytes.fromhex("020000000001")
        u.entity.table_entry.action.action.action_id = noaction.preamble.id
        route = _lpm_updates(info, 0, 1)[0]
        route.entity.table_entry.match[0].lpm.value = bytes([10, 0, 2, 0])
        route.entity.table_entry.match[0].lpm.prefix_len = 24
        base.updates.append(route)
        stub.Write(base)

        sniffer = subprocess.Popen([sys.executable, "-c", _SNIFFER, VETHS[1][1], "3"], stdout=subprocess.PIPE,
                                   text=True)
        assert sniffer.stdout.readline().strip() == "ready"
        fwd_cpu0 = _cpu_seconds(proc.pid)
        sender = subprocess.run([sys.executable, "-c", _SENDER, VETHS[0][1], str(packets), frame.hex()],
                                capture_output=True, text=True, check=True)
        send_s = float(sender.stdout.strip())
        received, span = sniffer.communicate(timeout=600)[0].split()
        received, span = int(received), float(span)
        fwd_cpu = _cpu_seconds(proc.pid) - fwd_cpu0
        veth_rate = received / span if span > 0 else 0.0
        done = True
        channel.close()
        result = {
            "packets_sent": packets,
            "offered_pps": round(packets / send_s),
            "packets_forwarded": received,
            "forwarded_pps_veth": round(veth_rate),
            "loss_fraction": round(1 - received / packets, 4),
            "forwarded_per_switch_cpu_s": round(received / fwd_cpu) if fwd_cpu else None,
            "in_process_pps": round(baseline),
            "in_process_per_cpu_s": round(baseline_cpu),
            "veth_over_in_process_cpu": round(received / fwd_cpu / baseline_cpu, 3) if fwd_cpu else None,
            "insert_batches": batches,
            "insert_batch_size": batch,
            "inserts_per_s": round(inserts_per_s),
            "inserts_per_switch_cpu_s": round(inserts_per_cpu_s),
            "load_average_1min": round(os.getloadavg()[0], 2),
            "inserts_goal_per_s": GOAL_INSERTS_PER_S,
            "inserts_goal_met": inserts_per_s >= GOAL_INSERTS_PER_S,
            "quick": quick,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        _drop_veths()

    (out_dir / "softswitch_p4runtime.json").write_text(json.dumps(result, indent=2))
    rows = [
        ("forwarding through veth (frames/s)", result["forwarded_pps_veth"]),
        ("offered by the sender (frames/s)", result["offered_pps"]),
        ("frames lost at the input", f"{result['loss_fraction']:.1%}"),
        ("forwarded per CPU-second of the switch process", result["forwarded_per_switch_cpu_s"]),
        ("in-process baseline (frames/s, wall clock)", result["in_process_pps"]),
        ("in-process baseline (frames per CPU-second)", result["in_process_per_cpu_s"]),
        ("veth / in-process, per CPU-second (cost of the port path)", result["veth_over_in_process_cpu"]),
        (f"P4Runtime inserts/s (batches of {batch}, wall clock)", result["inserts_per_s"]),
        ("P4Runtime inserts per CPU-second of the switch", result["inserts_per_switch_cpu_s"]),
        ("machine load average during the run (2 cores)", result["load_average_1min"]),
        ("insert goal >= 5,000/s met", "yes" if result["inserts_goal_met"] else "no"),
    ]
    md = "| measure | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    (out_dir / "softswitch_p4runtime.md").write_text(md)
    return result


if __name__ == "__main__":
    print(json.dumps(run(pathlib.Path(tempfile.mkdtemp()), quick="--quick" in sys.argv), indent=2))
