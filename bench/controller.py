"""Control-plane benchmark: digest → first switch hit, admission/eviction churn, `ls` latency with 10k keys.

    python -m bench controller --out out/bench [--quick]

1. **hot → first hit** (goal ≤ 10 ms p99 on softswitch): the embedded switch runs p4src/kvswitch.p4 in this process
   behind its real P4Runtime server on loopback gRPC; the controller is a separate `python -m controller serve`
   process. A client GETs a new key every millisecond through port 1; a real storage node (kvpool.server's
   `StorageNode`) answers on port 2 so replies fill admitted slots. Measured per key: from the moment the data
   plane emits the key's hot digest to the first GET_REPLY with HIT_SWITCH the client receives, over 100 keys
   (--quick) or 300, p50/p90/p99/max, and per stage (STAGES) from the switch's, client's and the controller's
   (`/trace`) monotonic stamps. The client's and the storage stub's frames are built by hand: with scapy (also
   reported, `hot_to_first_hit_scapy_frames`) each costs about a millisecond in the switch's process, GIL held,
   which delayed the switch's gRPC threads (the Write, the digest stream) and doubled every GET's time.
2. **churn**: admissions + evictions per second the decision logic sustains with every slot full, over
   P4Runtime to the embedded switch, against the same logic over an in-memory switch (baseline, ratio).
3. **ls latency**: the local API's `/blocks` and the whole `python -m controller ls` with 10,000 cached
   chunks (a 10,240-slot pool in memory: the P4 program's pool has 1,024 slots).
4. **INSERT answer latency**: 200 back-to-back INSERTs, each admitted (`always` admission), punted by the
   embedded switch and answered by the controller process's packet-out; into an empty pool, then (after
   filling it) into a full one, where each also evicts. p50/p99 and the first and last ten, to show growth.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from kvtesting.inprocess import CLIENT, ROOT, STORAGE, InProcessSwitch, compile_program, free_port


def _summary(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": statistics.median(ordered) * 1e3,
            "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1e3, "max_ms": ordered[-1] * 1e3}


def _stop(controller: subprocess.Popen, switch) -> None:
    """End the controller process (SIGTERM, then SIGKILL after 10 s) and the in-process switch."""
    controller.terminate()
    try:
        controller.wait(10)
    except subprocess.TimeoutExpired:
        controller.kill()
    switch.stop()


def _api(address: str, path: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
        return json.loads(response.read())


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


STAGES = (
    ("emit_to_streamed", "digest emitted → DigestList queued on the primary's stream (switch)"),
    ("streamed_to_received", "queued → controller has it (gRPC stream, controller's stream thread)"),
    ("received_to_locked", "→ pool lock held"),
    ("locked_to_write_sent", "→ decision made, Write RPC sent"),
    ("write_sent_to_handler", "→ the switch's Write handler runs (gRPC transport, the switch process's GIL)"),
    ("handler_to_applied", "→ Write applied (waits for the device lock: a packet being processed)"),
    ("applied_to_write_done", "→ Write answered at the controller"),
    ("write_done_to_done", "→ durable state, bookkeeping (after the write)"),
    ("applied_to_fill_get", "Write applied → next client GET starts (the GET that fills the slot)"),
    ("fill_get", "that GET, a miss answered by the storage node, which fills the slot"),
    ("fill_to_hit", "fill → first HIT_SWITCH at the client"),
)
"""Per-key stages of hot → first hit: the controller's own (`/trace`) and the switch's and client's, all on
CLOCK_MONOTONIC (one host). The first seven are the control plane's path; the last three the client's."""


def _percentiles(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3

    return {"n": len(ordered), "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "max_ms": ordered[-1] * 1e3}


def _stages(stamps: dict[str, float]) -> dict[str, float]:
    order = {"emit_to_streamed": ("emit", "streamed"), "streamed_to_received": ("streamed", "received"),
             "received_to_locked": ("received", "locked"), "locked_to_write_sent": ("locked", "write_sent"),
             "write_sent_to_handler": ("write_sent", "handler"),
             "handler_to_applied": ("handler", "applied"), "applied_to_write_done": ("applied", "write_done"),
             "write_done_to_done": ("write_done", "done"), "applied_to_fill_get": ("applied", "fill_start"),
             "fill_get": ("fill_start", "fill_end"), "fill_to_hit": ("fill_end", "hit")}
    return {name: stamps[b] - stamps[a] for name, (a, b) in order.items() if a in stamps and b in stamps}


def _checksum(header: bytes) -> int:
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _udp_frame(src: dict, dst: dict, sport: int, dport: int, payload: bytes) -> bytes:
    """Ethernet/IPv4/UDP around `payload`, what scapy builds (TTL 64, id 1) less its cost: building a frame
    with scapy takes about a millisecond, which the in-process client and storage stub would spend holding the
    switch process's GIL (a real client and storage node are other hosts)."""
    import socket
    import struct

    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 1, 0, 64, 17, 0,
                               socket.inet_aton(src["ip"]), socket.inet_aton(dst["ip"])))
    ip[10:12] = _checksum(bytes(ip)).to_bytes(2, "big")
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    return _mac(dst["mac"]) + _mac(src["mac"]) + b"\x08\x00" + bytes(ip) + udp + payload


def _udp_fields(frame: bytes) -> tuple[bytes, bytes, bytes, int, int, bytes] | None:
    """(dst mac, src mac, IP src+dst, sport, dport, payload) of an Ethernet/IPv4/UDP frame, else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    start = 14 + (frame[14] & 0x0F) * 4
    length = int.from_bytes(frame[start + 4:start + 6], "big")
    return (frame[0:6], frame[6:12], frame[26:34], int.from_bytes(frame[start:start + 2], "big"),
            int.from_bytes(frame[start + 2:start + 4], "big"), frame[start + 8:start + length])


class _FastFramesSwitch(InProcessSwitch):
    """The in-process switch with the client's and the storage stub's frames built and parsed by hand (see
    `_udp_frame`); the switch itself, its P4Runtime server and the storage node are unchanged."""

    def _storage_reply(self, frame: bytes) -> bytes | None:
        fields = _udp_fields(frame)
        if fields is None:
            return None
        dst_mac, src_mac, ips, sport, dport, payload = fields
        answer = self.storage.handle(payload)
        if answer is None:
            return None
        src, dst = {"mac": dst_mac.hex(":"), "ip": ".".join(map(str, ips[4:8]))}, \
            {"mac": src_mac.hex(":"), "ip": ".".join(map(str, ips[0:4]))}
        return _udp_frame(src, dst, dport, sport, answer)

    def get(self, tenant: int, prefix_hash: int, req_id: int) -> int | None:
        from kvpool import wire
        from kvpool.constants import KVP_HEADER_LEN, Opcode

        header = wire.Header(Opcode.GET, tenant=tenant, req_id=req_id, prefix_hash=prefix_hash)
        self.to_client.clear()
        self.device.receive(CLIENT["port"], _udp_frame(CLIENT, STORAGE, 40000, 7420, header.pack()))
        for reply in self.to_client:
            fields = _udp_fields(reply)
            if fields is not None and len(fields[5]) >= KVP_HEADER_LEN:
                got = wire.Header.unpack(fields[5])
                if got.req_id == req_id and got.opcode == Opcode.GET_REPLY:
                    return got.status
        return None


def hot_to_first_hit(work: Path, keys: int, scapy_frames: bool = False) -> dict:
    """Digest → first HIT_SWITCH at the client, per key, with the controller as a separate process; and where
    the time goes (STAGES): the switch's side is timed here, the controller's from its `/trace`.

    The client's and the storage stub's frames are built by hand (`_FastFramesSwitch`) unless `scapy_frames`
    (kvtesting's InProcessSwitch as is, the way this was measured before: about a millisecond of scapy per
    frame in the switch's process, the GIL held)."""
    from kvpool.constants import Status

    p4info, config = compile_program(work)
    hosts = work / "hosts.json"
    hosts.write_text(json.dumps([CLIENT, STORAGE]))
    switch = InProcessSwitch() if scapy_frames else _FastFramesSwitch()
    variant = "scapy" if scapy_frames else "raw"  # each run its own controller state: keys are reused
    emitted: list[float] = []
    streamed: list[float] = []
    applied: list[float] = []
    entered: list[float] = []
    forward_digests = switch.device.on_digests

    def on_digests(messages) -> None:
        emitted.append(time.monotonic())
        forward_digests(messages)

    switch.device.on_digests = on_digests
    batcher = switch.server.digests
    send_list = batcher._send

    def send(digest_list) -> None:
        streamed.append(time.monotonic())
        send_list(digest_list)

    batcher._send = send  # type: ignore[method-assign]
    write = switch.server.Write

    def timed_write(request, context):
        entered.append(time.monotonic())
        try:
            return write(request, context)
        finally:
            applied.append(time.monotonic())

    switch.server.Write = timed_write  # type: ignore[method-assign]  # bound into the gRPC handlers at start()
    address = switch.start()
    api = f"127.0.0.1:{free_port()}"
    threshold = 3
    controller = subprocess.Popen(
        [sys.executable, "-m", "controller", "--api", api, "serve", "--switch", address, "--p4info", str(p4info),
         "--device-config", str(config), "--state", str(work / f"state-{variant}.sqlite"), "--hosts-file",
         str(hosts), "--hot-threshold", str(threshold), "--epoch-seconds", "3600", "--log-level", "WARNING"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(work / f"controller-{variant}.log", "w"),  # noqa: SIM115
    )
    samples, misses = [], 0
    per_key: list[dict[str, float]] = []
    key_gets: list[list[tuple[float, float, int | None]]] = []
    get_times: list[float] = []
    try:
        if not _wait(lambda: _api(api, "/status")["primary"], 60):
            raise RuntimeError(f"controller did not come up; see {work / f'controller-{variant}.log'}")
        req_id = 0
        for index in tqdm(range(keys), desc="hot → first hit", unit="key"):
            prefix_hash = 0xB000_0000_0000_0000 + index
            switch.put(1, prefix_hash, f"block {index}".encode())
            digests_before, streamed_before = len(emitted), len(streamed)
            gets: list[tuple[float, float, int | None]] = []
            hit_at = None
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                req_id += 1
                began = time.monotonic()
                status = switch.get(1, prefix_hash, req_id)
                ended = time.monotonic()
                gets.append((began, ended, status))
                get_times.append(ended - began)
                if status == Status.HIT_SWITCH:
                    hit_at = ended
                    break
                time.sleep(0.001)
            if hit_at is None or len(emitted) <= digests_before:
                misses += 1
                continue
            emit = emitted[digests_before]
            samples.append(hit_at - emit)
            stamps = {"emit": emit, "hit": hit_at, "prefix_hash": prefix_hash}
            if len(streamed) > streamed_before:
                stamps["streamed"] = streamed[streamed_before]
            per_key.append(stamps)
            key_gets.append(gets)
        stats = _api(api, "/stats")
        traces = {int(t["key"].split(":")[1], 16): t for t in _api(api, "/trace")}
    finally:
        _stop(controller, switch)
    stages: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    for stamps, gets in zip(per_key, key_gets, strict=True):
        trace = traces.get(int(stamps.pop("prefix_hash")))
        if trace is not None:
            stamps.update({k: v for k, v in trace.items() if isinstance(v, float)})
        # the Write that indexed the key: the first one applied after the controller sent it (after the emit
        # when the controller's trace is missing)
        after = stamps.get("write_sent", stamps["emit"])
        which = next((i for i, t in enumerate(applied) if t >= after), None)
        if which is not None:
            stamps["handler"], stamps["applied"] = entered[which], applied[which]
            done = applied[which]
            fill = next((g for g in gets if g[0] >= done), None)
            if fill is not None:
                stamps["fill_start"], stamps["fill_end"] = fill[0], fill[1]
        for name, seconds in _stages(stamps).items():
            stages[name].append(seconds)
    return {"keys": keys, "client_frames": "scapy" if scapy_frames else "built by hand",
            "no_hit_within_2s": misses, "client_side": _percentiles(samples),
            "samples_ms": [round(x * 1e3, 3) for x in samples],
            "stages": {name: {"what": what, **_percentiles(stages[name])} for name, what in STAGES},
            "client_get_service": _percentiles(get_times),
            "controller_hot_to_installed": stats["hot_to_installed"],
            "controller_hot_to_first_hit_counter_poll": stats["hot_to_first_hit"], "goal_ms": 10}


def _insert_frame(req_id: int, prefix_hash: int, value: bytes) -> bytes:
    """A client's INSERT (with its value chunk, as kvpool.client sends it) addressed to the storage node."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from kvpool import wire
    from kvpool.constants import Opcode

    header = wire.Header(Opcode.INSERT, tenant=4, req_id=req_id, prefix_hash=prefix_hash, version=1,
                         aux=512)  # depth 0, 512 tokens
    return bytes(Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
                 / UDP(sport=40003, dport=7420) / wire.encode(header, value))


def _insert_answered(switch: InProcessSwitch, req_id: int) -> bool:
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether

    from kvpool import wire
    from kvpool.constants import KVP_HEADER_LEN, Opcode

    for reply in list(switch.to_client):
        payload = bytes(Ether(reply)[UDP].payload)
        if len(payload) >= KVP_HEADER_LEN:
            got = wire.Header.unpack(payload)
            if got.req_id == req_id and got.opcode == Opcode.INSERT_ACK:
                return True
    return False


def insert_latency(work: Path, inserts: int) -> dict:
    """INSERT answer latency: back-to-back INSERTs, each admitted (`always` admission), punted by the switch and
    answered by the controller's packet-out; first into an empty pool, then into a full one (each also evicts).

    The switch runs in this process, the controller is a separate `python -m controller serve` process, as in
    hot_to_first_hit. Measured per INSERT: from handing the frame to the switch's port 1 to the INSERT_ACK
    leaving it on port 1."""
    p4info, config = compile_program(work)
    hosts = work / "hosts.json"
    hosts.write_text(json.dumps([CLIENT, STORAGE]))
    switch = InProcessSwitch()
    address = switch.start()
    api = f"127.0.0.1:{free_port()}"
    controller = subprocess.Popen(
        [sys.executable, "-m", "controller", "--api", api, "serve", "--switch", address, "--p4info", str(p4info),
         "--device-config", str(config), "--state", str(work / "insert-state.sqlite"), "--hosts-file", str(hosts),
         "--admission", "always", "--eviction", "lru", "--epoch-seconds", "3600", "--log-level", "WARNING"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(work / "controller-insert.log", "w"),  # noqa: SIM115
    )
    phases: dict[str, list[float]] = {}
    req_id = 0
    try:
        if not _wait(lambda: _api(api, "/status")["primary"], 60):
            raise RuntimeError(f"controller did not come up; see {work / 'controller-insert.log'}")
        capacity = int(_api(api, "/status").get("capacity") or 1024)
        plan = [("empty pool (admission)", inserts), ("fill the rest", max(capacity - inserts, 0)),
                ("full pool (admission + eviction)", inserts)]
        for phase, count in plan:
            samples = phases.setdefault(phase, [])
            for _ in tqdm(range(count), desc=f"INSERT, {phase}", unit="insert"):
                req_id += 1
                frame = _insert_frame(req_id, 0xC000_0000_0000_0000 + req_id, b"chunk %d" % req_id)
                switch.to_client.clear()
                began = time.perf_counter()
                switch.device.receive(CLIENT["port"], frame)
                deadline = began + 5.0
                while not _insert_answered(switch, req_id):
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"INSERT {req_id} not answered within 5 s")
                    time.sleep(0.0002)
                samples.append(time.perf_counter() - began)
        stats = _api(api, "/stats")
    finally:
        _stop(controller, switch)
    result = {"inserts": inserts, "admissions": stats.get("admissions"), "evictions": stats.get("evictions")}
    for phase, samples in phases.items():
        if phase == "fill the rest":
            continue
        ordered = sorted(samples)
        result[phase] = {**_summary(samples), "p99_ms": ordered[int(0.99 * (len(ordered) - 1))] * 1e3,
                         "first_10_mean_ms": statistics.mean(samples[:10]) * 1e3,
                         "last_10_mean_ms": statistics.mean(samples[-10:]) * 1e3,
                         "samples_ms": [round(x * 1e3, 3) for x in samples]}
    return result


def _churn(pool, keys: int, start: int) -> float:
    from kvpool.keys import ChunkKey

    began = time.perf_counter()
    for index in range(keys):
        pool.on_hot_key(ChunkKey(2, start + index, 0), estimate=1000)
    return time.perf_counter() - began


def churn(work: Path, ops: int) -> dict:
    """Admission + eviction per second: over P4Runtime to the embedded switch, and in memory (baseline)."""
    from controller.dataplane import MemoryDataPlane
    from controller.p4dataplane import P4RuntimeDataPlane
    from controller.policy import PolicySpec, build_policies
    from controller.pool import PoolManager
    from p4rt.connection import SwitchConnection, SwitchOptions
    from p4rt.p4info import P4Info

    p4info_path, config = compile_program(work)
    spec = PolicySpec("always", "lru", "drop")
    results = {}
    memory = MemoryDataPlane(1024)
    pool = PoolManager(memory, build_policies(spec, memory.capacity))
    _churn(pool, memory.capacity, 0)
    seconds = _churn(pool, ops * 10, 1 << 32)
    results["in_memory"] = {"ops": ops * 10, "admissions_evictions_per_s": 2 * ops * 10 / seconds}
    switch = InProcessSwitch()
    address = switch.start()
    connection = SwitchConnection(SwitchOptions(address), P4Info.load(p4info_path))
    try:
        connection.open(30)
        connection.set_pipeline(config.read_bytes(), 1)
        dataplane = P4RuntimeDataPlane(connection)
        pool = PoolManager(dataplane, build_policies(spec, dataplane.capacity))
        for block in tqdm(range(0, dataplane.capacity, 64), desc="fill pool", unit="x64"):
            _churn(pool, 64, block)
        seconds = _churn(pool, ops, 1 << 33)
        results["p4runtime"] = {"ops": ops, "admissions_evictions_per_s": 2 * ops / seconds,
                                "capacity": dataplane.capacity}
    finally:
        connection.close()
        switch.stop()
    results["ratio_p4runtime_vs_memory"] = (results["p4runtime"]["admissions_evictions_per_s"]
                                            / results["in_memory"]["admissions_evictions_per_s"])
    return results


def ls_latency(work: Path, keys: int, repeats: int) -> dict:
    """`/blocks` and `python -m controller ls` with `keys` cached chunks."""
    from controller.api import ApiServer
    from controller.dataplane import MemoryDataPlane
    from controller.metrics import Metrics
    from controller.policy import PolicySpec, build_policies
    from controller.pool import PoolManager
    from kvpool.keys import ChunkKey

    class Backend:
        def __init__(self) -> None:
            self.metrics = Metrics()
            dataplane = MemoryDataPlane(keys + keys // 40)
            self.pool = PoolManager(dataplane, build_policies(PolicySpec("always", "lru", "drop"), dataplane.capacity),
                                    metrics=self.metrics)

        def status(self) -> dict:
            return {}

        def policy_view(self) -> dict:
            return {}

        def set_policy(self, kind: str, name: str, params: dict) -> dict:
            return {}

        def read_slot(self, slot: int) -> dict:
            return {}

    backend = Backend()
    for index in range(keys):
        backend.pool.on_hot_key(ChunkKey(3, 0xC000 + index, 0))
    server = ApiServer(backend, "127.0.0.1", 0)
    server.start()
    address = f"127.0.0.1:{server.address[1]}"
    try:
        api_times, cli_json, cli_table = [], [], []
        for _ in tqdm(range(repeats), desc="ls latency", unit="run"):
            began = time.perf_counter()
            rows = _api(address, "/blocks")
            api_times.append(time.perf_counter() - began)
            assert len(rows) == keys
            for argv, sink in ((["ls", "--json"], cli_json), (["ls", "--sort", "hits", "-r"], cli_table)):
                began = time.perf_counter()
                subprocess.run([sys.executable, "-m", "controller", "--api", address, *argv], cwd=ROOT, check=True,
                               stdout=subprocess.DEVNULL)
                sink.append(time.perf_counter() - began)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import controller.cli"], cwd=ROOT, check=True)
        startup = time.perf_counter() - began
    finally:
        server.stop()
    return {"keys": keys, "api_blocks": _summary(api_times), "cli_ls_json": _summary(cli_json),
            "cli_ls_table": _summary(cli_table), "python_import_cli_ms": startup * 1e3}


def plot_cdf(samples_ms: list[float], path: Path, goal_ms: float = 10.0) -> None:
    """CDF of digest → first switch hit, with the goal as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(samples_ms)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post", label="softswitch")
    ax.axvline(goal_ms, color="red", linestyle="--", label=f"goal {goal_ms:g} ms")
    ax.set_xscale("log")
    ax.set_xlabel("hot digest → first switch hit (ms, client side)")
    ax.set_ylabel("fraction of keys")
    ax.legend(loc="lower right")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _fmt(value) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        work = Path(tmp)
        for name, step in (("ls_latency", lambda: ls_latency(work, 10_000, 2 if quick else 5)),
                           ("churn", lambda: churn(work, 100 if quick else 500)),
                           ("insert_latency", lambda: insert_latency(work, 200)),
                           ("hot_to_first_hit", lambda: hot_to_first_hit(work, 100 if quick else 300)),
                           ("hot_to_first_hit_scapy_frames",
                            lambda: hot_to_first_hit(work, 100 if quick else 300, scapy_frames=True))):
            try:
                results[name] = step()
            except Exception as exc:  # one broken part must not hide the others' figures
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    (out_dir / "controller.json").write_text(json.dumps(results, indent=2))
    samples = results.get("hot_to_first_hit", {}).get("samples_ms")
    if samples:
        plot_cdf(samples, out_dir / "controller_hot_to_hit.png")
    lines = ["| measure | value |", "|---|---|"]
    hot = results.get("hot_to_first_hit", {})
    if "client_side" in hot:
        c = hot["client_side"]
        lines.append(f"| digest → first switch hit, client side (goal ≤ 10 ms p99) | p50 {_fmt(c.get('p50_ms'))} ms, "
                     f"p90 {_fmt(c.get('p90_ms'))} ms, p99 {_fmt(c.get('p99_ms'))} ms, max {_fmt(c.get('max_ms'))} ms "
                     f"(n={c['n']}, no hit: {hot['no_hit_within_2s']}) |")
        for name, stage in hot.get("stages", {}).items():
            lines.append(f"| stage {name}: {stage['what']} | p50 {_fmt(stage.get('p50_ms'))} ms, "
                         f"p90 {_fmt(stage.get('p90_ms'))} ms, p99 {_fmt(stage.get('p99_ms'))} ms (n={stage['n']}) |")
        scapy = results.get("hot_to_first_hit_scapy_frames", {}).get("client_side")
        if scapy:
            lines.append(f"| the same with the client's and storage stub's frames built by scapy in the switch's "
                         f"process (as measured before) | p50 {_fmt(scapy.get('p50_ms'))} ms, p90 "
                         f"{_fmt(scapy.get('p90_ms'))} ms, p99 {_fmt(scapy.get('p99_ms'))} ms, max "
                         f"{_fmt(scapy.get('max_ms'))} ms (n={scapy['n']}) |")
        g = hot.get("client_get_service", {})
        lines.append(f"| one client GET through the softswitch (service time) | p50 {_fmt(g.get('p50_ms'))} ms, "
                     f"p99 {_fmt(g.get('p99_ms'))} ms |")
        i = hot["controller_hot_to_installed"]
        lines.append(f"| digest → index entry written (controller) | p50 {_fmt(i.get('p50_ms'))} ms, "
                     f"max {_fmt(i.get('max_ms'))} ms |")
    else:
        lines.append(f"| digest → first switch hit | failed: {hot.get('error')} |")
    ch = results.get("churn", {})
    if "p4runtime" in ch:
        lines.append(f"| admissions+evictions/s over P4Runtime (softswitch) | "
                     f"{ch['p4runtime']['admissions_evictions_per_s']:.0f} |")
        lines.append(f"| admissions+evictions/s in memory (baseline) | {ch['in_memory']['admissions_evictions_per_s']:.0f} |")
        lines.append(f"| ratio P4Runtime / in memory | {ch['ratio_p4runtime_vs_memory']:.3f} |")
    else:
        lines.append(f"| churn | failed: {ch.get('error')} |")
    ins = results.get("insert_latency", {})
    for phase in ("empty pool (admission)", "full pool (admission + eviction)"):
        if phase in ins:
            v = ins[phase]
            lines.append(f"| INSERT answer latency p50/p99 over {ins['inserts']} back-to-back admitting INSERTs, "
                         f"{phase} | p50 {_fmt(v['p50_ms'])} ms, p99 {_fmt(v['p99_ms'])} ms, max {_fmt(v['max_ms'])}"
                         f" ms; mean of first 10 {_fmt(v['first_10_mean_ms'])} ms, last 10 "
                         f"{_fmt(v['last_10_mean_ms'])} ms |")
    if "error" in ins:
        lines.append(f"| INSERT answer latency | failed: {ins['error']} |")
    ls = results.get("ls_latency", {})
    if "api_blocks" in ls:
        lines.append(f"| `/blocks` with {ls['keys']} keys | p50 {_fmt(ls['api_blocks']['p50_ms'])} ms |")
        lines.append(f"| `python -m controller ls --json` with {ls['keys']} keys | "
                     f"p50 {_fmt(ls['cli_ls_json']['p50_ms'])} ms |")
        lines.append(f"| `python -m controller ls` (rich table) with {ls['keys']} keys | "
                     f"p50 {_fmt(ls['cli_ls_table']['p50_ms'])} ms |")
        lines.append(f"| of which Python start + imports | {_fmt(ls['python_import_cli_ms'])} ms |")
    else:
        lines.append(f"| ls latency | failed: {ls.get('error')} |")
    (out_dir / "controller.md").write_text("\n".join(lines) + "\n")
    return results
