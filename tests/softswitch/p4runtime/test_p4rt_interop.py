"""Interop: `python -m softswitch` on veth pairs, driven by the unmodified p4runtime-shell, real frames.

Layout (root namespace, names with this suite's `sswp` prefix):

    test (scapy sendp / raw socket)          switch process (--no-p4, pipeline pushed by p4runtime-shell)
    sswpio0b  <-- veth -->  sswpio0a = port 1
    sswpio1b  <-- veth -->  sswpio1a = port 2        CPU port 255 <-> P4Runtime packet-in/out
    sswpio2b  <-- veth -->  sswpio2a = port 3
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from p4rt_net import Tap, VethPairs
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.sendrecv import sendp

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and raw sockets need root")]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PROGRAM = os.path.join(HERE, "programs", "l2l3.p4")
CPU_PORT = 255
ARRIVES_S = 30.0
"""Longest wait for a packet-in or digest list the switch must send: reached only when it never comes."""
HOST1, HOST2, HOST3 = "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"
ROUTER = "02:00:00:00:00:fe"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def net():
    veths = VethPairs("io", 3)
    yield veths
    veths.close()


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    p4info = out / "l2l3.p4info.txtpb"
    res = subprocess.run([sys.executable, "-m", "softswitch.compile", PROGRAM, "-o", str(out),
                          "--p4runtime-files", str(p4info)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return p4info, out / "l2l3.json"


@pytest.fixture(scope="module")
def pcap_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pcap")


@pytest.fixture(scope="module")
def switch(net, build, pcap_dir):
    """The switch process, with p4runtime-shell connected as primary and the pipeline pushed."""
    import p4runtime_sh.shell as sh

    port = _free_port()
    args = [sys.executable, "-m", "softswitch", "--no-p4", "--device-id", "0", "--thrift-port", "9090",
            "--pcap", str(pcap_dir)]
    for number, (a, _) in enumerate(net.pairs, start=1):
        args += ["-i", f"{number}@{a}"]
    args += ["--", "--grpc-server-addr", f"127.0.0.1:{port}", "--cpu-port", str(CPU_PORT)]
    proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while line and not line.startswith("softswitch: device"):
            line = proc.stderr.readline()
        assert line, "switch exited during start-up"
        # keep reading its log so a chatty switch never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        sh.setup(device_id=0, grpc_addr=f"127.0.0.1:{port}", election_id=(0, 10),
                 config=sh.FwdPipeConfig(str(build[0]), str(build[1])), verbose=False)
        yield {"proc": proc, "addr": f"127.0.0.1:{port}", "sh": sh}
        sh.teardown()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def taps(net):
    t = [Tap(b) for _, b in net.pairs]
    yield t
    for tap in t:
        tap.close()


def _known_sources(sh):
    """Put the test hosts in `smac` so only the digest test produces learning digests."""
    for mac in (HOST1, HOST2, HOST3):
        te = sh.TableEntry("MyIngress.smac")(action="NoAction")
        te.match["hdr.ethernet.src_addr"] = mac
        te.insert()


@pytest.fixture(scope="module")
def routed(switch):
    sh = switch["sh"]
    _known_sources(sh)
    te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.route")
    te.match["hdr.ipv4.dst_addr"] = "10.0.2.0/24"
    te.action["dmac"] = HOST2
    te.action["port"] = "2"
    te.insert()
    return sh


def test_routed_packet_leaves_the_right_port_rewritten(routed, net, taps):
    pkt = Ether(dst=ROUTER, src=HOST1) / IP(src="10.0.1.1", dst="10.0.2.7", ttl=64) / UDP(sport=1, dport=2) / b"hi"
    taps[1].drain()
    sendp(pkt, iface=net.pairs[0][1], verbose=False)
    want = Ether(dst=HOST2, src=ROUTER) / IP(src="10.0.1.1", dst="10.0.2.7", ttl=63) / UDP(sport=1, dport=2) / b"hi"
    expected = bytes(Ether(bytes(want)))  # checksums filled in by scapy
    got = taps[1].receive(want=lambda f: f[6:12] == bytes.fromhex(ROUTER.replace(":", "")))
    assert got == expected


def test_pcap_files_hold_what_crossed_each_port(routed, net, taps, pcap_dir):
    from scapy.utils import rdpcap

    pkt = Ether(dst=ROUTER, src=HOST1) / IP(src="10.0.1.1", dst="10.0.2.8") / UDP() / b"hi"
    sendp(pkt, iface=net.pairs[0][1], verbose=False)
    assert taps[1].receive(want=lambda f: f[-2:] == b"hi") is not None
    sent_out = [bytes(p) for p in rdpcap(str(pcap_dir / f"{net.pairs[1][0]}_out.pcap"))]
    came_in = [bytes(p) for p in rdpcap(str(pcap_dir / f"{net.pairs[0][0]}_in.pcap"))]
    assert any(f[6:12] == bytes.fromhex(ROUTER.replace(":", "")) and f[-2:] == b"hi" for f in sent_out)
    assert any(f[:6] == bytes.fromhex(ROUTER.replace(":", "")) and f[-2:] == b"hi" for f in came_in)


def test_entries_and_counters_read_back_through_the_shell(routed):
    sh = routed
    entries = list(sh.TableEntry("MyIngress.ipv4_lpm").read())
    assert len(entries) == 1
    assert entries[0].match["hdr.ipv4.dst_addr"].lpm.prefix_len == 24
    rx = list(sh.CounterEntry("MyIngress.port_rx").read())
    assert len(rx) == 512
    assert rx[1].data.packet_count >= 1  # the routed packet came in on port 1
    direct = list(sh.DirectCounterEntry("MyIngress.route_hits").read())
    assert direct and direct[0].data.packet_count >= 1


def test_multicast_group_copies_to_every_member(routed, net, taps):
    sh = routed
    mg = sh.MulticastGroupEntry(1).add(2).add(3)
    mg.insert()
    te = sh.TableEntry("MyIngress.dmac")(action="MyIngress.flood")
    te.match["hdr.ethernet.dst_addr"] = "ff:ff:ff:ff:ff:ff"
    te.action["group"] = "1"
    te.insert()
    frame = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST1, type=0x88B5) / (b"mcast" * 4))
    sendp(Ether(frame), iface=net.pairs[0][1], verbose=False)
    for tap in taps[1:]:
        assert tap.receive(want=lambda f: f == frame) == frame
    groups = list(sh.MulticastGroupEntry(1).read())
    assert [r.egress_port for r in groups[0].replicas] == [2, 3]


def test_packet_out_leaves_the_requested_port(routed, taps):
    sh = routed
    frame = bytes(Ether(dst=HOST3, src=ROUTER, type=0x88B5) / b"from the controller")
    sh.PacketOut(payload=frame, egress_port="3").send()
    assert taps[2].receive(want=lambda f: f == frame) == frame


def sniff_until(stream, wanted) -> list:
    """What `stream` (a p4runtime-shell PacketIn or DigestList) received that is `wanted`, sniffed a second at a
    time until something is (up to ARRIVES_S): not whatever came within a fixed window a busy machine misses."""
    deadline = time.monotonic() + ARRIVES_S
    got: list = []
    while not got and time.monotonic() < deadline:
        got = [m for m in stream.sniff(timeout=1) if wanted(m)]
    return got


def test_frame_for_the_cpu_arrives_as_packet_in(routed, net):
    sh = routed
    te = sh.TableEntry("MyIngress.dmac")(action="MyIngress.to_cpu")
    te.match["hdr.ethernet.dst_addr"] = "02:00:00:00:00:cc"
    te.insert()
    sniffer = sh.PacketIn()
    frame = bytes(Ether(dst="02:00:00:00:00:cc", src=HOST1, type=0x88B5) / b"to the controller")
    sendp(Ether(frame), iface=net.pairs[0][1], verbose=False)
    got = sniff_until(sniffer, lambda p: p.packet.payload == frame)
    assert got, "no packet-in"
    md = {m.metadata_id: m.value for m in got[0].packet.metadata}
    assert int.from_bytes(md[1], "big") == 1  # ingress_port


def test_unknown_source_mac_is_learned_through_a_digest(routed, net):
    sh = routed
    de = sh.DigestEntry("learn_t")
    de.max_list_size = 1
    de.max_timeout_ns = 0
    de.ack_timeout_ns = 1_000_000_000
    de.insert()
    lists = sh.DigestList()
    sendp(Ether(dst=HOST2, src="02:00:00:00:0a:0b", type=0x88B5) / b"new host", iface=net.pairs[0][1],
          verbose=False)
    got = sniff_until(lists, lambda _: True)
    assert got, "no digest list"
    members = got[0].digest.data[0].struct.members
    assert members[0].bitstring == bytes.fromhex("02000000 0a0b".replace(" ", ""))
    assert int.from_bytes(members[1].bitstring, "big") == 1


def test_backup_client_is_refused_writes(routed, switch):
    import grpc
    from p4.v1 import p4runtime_pb2
    from p4runtime_sh.p4runtime import P4RuntimeClient

    backup = P4RuntimeClient(0, switch["addr"], (0, 5))  # lower than the shell's (0, 10)
    try:
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        te = routed.TableEntry("MyIngress.smac")(action="NoAction")
        te.match["hdr.ethernet.src_addr"] = "02:00:00:00:00:99"
        update.entity.table_entry.CopyFrom(te.msg())
        with pytest.raises(grpc.RpcError) as e:
            backup.write_update(update)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        backup.tear_down()


def test_duplicate_insert_is_already_exists_for_the_shell(routed):
    from p4runtime_sh.p4runtime import P4RuntimeWriteException

    te = routed.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.route")
    te.match["hdr.ipv4.dst_addr"] = "10.0.2.0/24"
    te.action["dmac"] = HOST2
    te.action["port"] = "2"
    with pytest.raises(P4RuntimeWriteException) as e:
        te.insert()
    assert "ALREADY_EXISTS" in str(e.value)


def test_ten_thousand_bad_frames_do_not_stop_forwarding(routed, switch, net, taps):
    rng = random.Random(7)
    good = bytes(Ether(dst=ROUTER, src=HOST1) / IP(src="10.0.1.1", dst="10.0.2.9", ttl=9) / UDP() / b"ok")
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((net.pairs[0][1], 0))
    try:
        for i in range(10_000):
            if i % 2:
                frame = good[: rng.randrange(1, len(good))]  # truncated real frame
            else:
                frame = bytes(rng.getrandbits(8) for _ in range(rng.randrange(14, 200)))
            if len(frame) < 14:
                frame = frame + bytes(14 - len(frame))  # the kernel refuses frames shorter than a header
            raw.send(frame)
    finally:
        raw.close()
    want = lambda f: f[:6] == bytes.fromhex(HOST2.replace(":", "")) and f[-2:] == b"ok"  # noqa: E731
    deadline = time.monotonic() + 120
    got = None
    while got is None and time.monotonic() < deadline:  # the switch may still be chewing through the backlog
        assert switch["proc"].poll() is None, "switch died"
        sendp(Ether(good), iface=net.pairs[0][1], verbose=False)
        got = taps[1].receive(timeout=2, want=want)
    assert got is not None
    assert switch["proc"].poll() is None
