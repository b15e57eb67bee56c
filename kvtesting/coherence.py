"""Checking "the pool never serves a wrong value" end to end: an agent in a host, a model of the storage node, figures.

Three parts, used together by the Mininet coherence tests (tests/topo/test_coherence.py and siblings):

* **The host agent** (`python -m kvtesting.coherence`, run inside a Mininet host): one JSON request per line on
  stdin, one JSON answer per line on stdout, so a test drives real `KVPClient` sockets (and raw frames, for the
  hostile cases) in the host's namespace without paying Python's start-up per read. `HostAgent` is the test's
  handle on it. Timestamps are `time.monotonic()`, one clock for every namespace of the machine, so the test can
  order a read in one host against an acknowledged write in another.
* **`StorageModel`**: what the storage node holds, as far as the test knows: every version written of each
  block, with its bytes, and when each write was acknowledged. `judge` classifies a read: right, stale (older
  than the newest write acknowledged before the read began), stitched/unknown bytes (no write of that version
  had them).
* **`Figures`**: per-scenario counts (reads, HIT_SWITCH reads, wrong reads, writes, falsely failed writes),
  written as JSON under `out/coherence/` so a run's figures can be quoted.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kvpool.client import ClientOptions, KVPClient, KVPError, parse_address
from kvpool.constants import KVP_MAGIC, Flag, Opcode, Status, Tier
from kvpool.transport import LossyTransport, UdpTransport
from kvpool.wire import Header, encode
from kvtesting.kvagent import serve_stdio

# ---- the agent (inside a host) -------------------------------------------------------------------------------


def _status_name(code: int | None) -> str:
    try:
        return Status(code).name if code is not None else "NONE"
    except ValueError:
        return f"{code:#04x}"


class Agent:
    """The request handlers. Reads and writes use `KVPClient`; `frames` and `fuzz` send raw bytes."""

    def __init__(self, options: ClientOptions, iface: str | None) -> None:
        self.options = options
        self.iface = iface
        self.client = KVPClient(options)
        self.listeners: dict[int, socket.socket] = {}
        """UDP port → the bound socket news of writes arrives on (`listen`), kept from one request to the next."""

    def close(self) -> None:
        self.client.close()
        for sock in self.listeners.values():
            sock.close()

    def listen(self, request: dict) -> dict:
        """Bind UDP `port` for news of writes (`put` with `notify`, `reads` with `news`) before any is sent."""
        port = int(request["port"])
        if port not in self.listeners:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(("0.0.0.0", port))
            sock.setblocking(False)
            self.listeners[port] = sock
        return {"port": port}

    def _with(self, request: dict) -> KVPClient:
        """The default client, or a fresh one for a request naming its own tenant / retries / timeout, or
        `loss` (each datagram dropped either way with that probability, seeded by `seed`) and `ack_loss` (each
        arriving PUT_ACK dropped with that probability): loss on the host's side of its link, in user space."""
        changes = {k: request[k] for k in ("tenant", "retries", "timeout") if k in request}
        options = replace(self.options, **changes)
        if "loss" in request or "ack_loss" in request:
            rng = random.Random(request.get("seed", 0))
            ack_loss = float(request.get("ack_loss", 0.0))

            def ack_dropped(data: bytes, direction: str) -> bool:
                return direction == "in" and len(data) > 3 and data[3] == Opcode.PUT_ACK and rng.random() < ack_loss

            transport = LossyTransport(UdpTransport(options.server, options.bind), float(request.get("loss", 0.0)),
                                       rng, ack_dropped)
            return KVPClient(options, transport)
        return KVPClient(options) if changes else self.client

    def put(self, request: dict) -> dict:
        """Write a block; with `notify` ([[ip, port], ...]) and `news` (text), send `news` to those hosts through
        the network once it is acknowledged (`tell`), as a writer telling readers on other hosts does."""
        client = self._with(request)
        started = time.monotonic()
        try:
            client.put_block(int(request["ph"]), bytes.fromhex(request["data"]), int(request["version"]))
            acked = time.monotonic()
            tell([(ip, int(port)) for ip, port in request.get("notify", [])], str(request.get("news", "")).encode())
            return {"status": "OK", "started": started, "acked": acked, **_drops(client)}
        except KVPError as exc:
            status = "TIMEOUT" if exc.status is None else _status_name(exc.status)
            return {"status": status, "error": str(exc), "started": started, **_drops(client)}
        finally:
            if client is not self.client:
                client.close()

    def _read_once(self, client: KVPClient, ph: int, chunks: int | None, version: int = 0) -> dict:
        started = time.monotonic()
        try:
            block = client.get_block(ph, chunks, version)
        except KVPError as exc:
            return {"ph": ph, "started": started, "error": _status_name(exc.status), "text": str(exc)}
        return {"ph": ph, "started": started, "version": block.version, "data": block.data.hex(),
                "switch": [c.status == Status.HIT_SWITCH for c in block.chunks]}

    def get(self, request: dict) -> dict:
        client = self._with(request)
        return self._read_once(client, int(request["ph"]), request.get("chunks"), int(request.get("version", 0)))

    def reads(self, request: dict) -> dict:
        """Read blocks back to back, for `count` reads or `seconds`, whichever ends first; `blocks` is a list of
        [prefix hash, chunk count], read in turn (or at random with `seed`). Every read is returned; with
        `notify_port` (bound by `listen`) and `news`, also `told`: when this host heard `news` on that port
        (`tell`), looked for before each read, so every read that started after `told` began after it came."""
        blocks = [(int(ph), int(n) if n else None) for ph, n in request["blocks"]]
        count = int(request.get("count", 1 << 30))
        deadline = time.monotonic() + float(request.get("seconds", 1e9))
        rng = random.Random(request["seed"]) if "seed" in request else None
        client = self._with(request)
        listener = self.listeners[int(request["notify_port"])] if "notify_port" in request else None
        news = str(request.get("news", "")).encode()
        told: float | None = None
        out = []
        i = 0
        while i < count and time.monotonic() < deadline:
            if listener is not None and told is None and _heard(listener, news):
                told = time.monotonic()
            ph, chunks = rng.choice(blocks) if rng else blocks[i % len(blocks)]
            out.append(self._read_once(client, ph, chunks))
            i += 1
            if request.get("until_switch") and all(out[-1].get("switch") or [False]):
                break
        return {"reads": out, **({"told": told} if listener is not None else {})}

    def insert(self, request: dict) -> dict:
        client = self._with(request)
        value = bytes.fromhex(request["value"]) if request.get("value") is not None else None
        try:
            meta = client.insert(int(request["ph"]), int(request.get("chunk", 0)), int(request.get("chunks", 1)),
                                 pin=bool(request.get("pin")), version=int(request.get("version", 0)), value=value)
            return {"status": _status_name(meta.status), "tiers": sorted(t.name for t in meta.tiers)}
        except KVPError as exc:
            return {"status": _status_name(exc.status), "error": str(exc)}

    def tier_move(self, request: dict) -> dict:
        """A TIER_MOVE as any host may send it; "TIMEOUT" when nobody answered (the switch dropped it)."""
        client = self._with(request)
        try:
            status, tier = client.tier_move(int(request["ph"]), int(request.get("chunk", 0)), Tier[request["tier"]])
        except KVPError as exc:
            return {"status": "TIMEOUT" if exc.status is None else _status_name(exc.status), "error": str(exc)}
        return {"status": status.name, "tier": tier.name}

    def frames(self, request: dict) -> dict:
        """Send raw Ethernet frames (hex) on this host's interface: forged messages with any source address."""
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((self.iface, 0))
            for frame in request["frames"]:
                sock.send(bytes.fromhex(frame))
        return {"sent": len(request["frames"])}

    def fuzz(self, request: dict) -> dict:
        """`count` malformed or random KVP datagrams (seeded) to the server's port: every opcode, bad fields,
        truncated values, plain garbage. Unanswered by design; returns how many were sent and answered."""
        rng = random.Random(int(request.get("seed", 0)))
        count = int(request["count"])
        sent = answered = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            for _ in range(count):
                sock.sendto(random_datagram(rng, int(request.get("tenant", 0xF022))), self.options.server)
                sent += 1
                try:
                    while sock.recv(4096):
                        answered += 1
                except BlockingIOError:
                    pass
                if sent % 200 == 0:
                    time.sleep(0.01)  # a burst of 200, then let the switch breathe: a fuzz, not a flood
        return {"sent": sent, "answered": answered}


TELL_COPIES = 3
"""Datagrams per host `tell` sends (a single unacknowledged datagram may be lost; the first that arrives counts)."""


def tell(hosts: Sequence[tuple[str, int]], news: bytes) -> None:
    """A writer's news for readers, sent through the network after its ack (so it crosses the switches after
    the INVALIDATE the ack started: dataplane.md, "Fabric coherence")."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _ in range(TELL_COPIES):
            for address in hosts:
                sock.sendto(news, address)


def _heard(sock: socket.socket, news: bytes) -> bool:
    """Whether `news` is among the datagrams waiting on `sock` (older news, of earlier writes, is dropped)."""
    heard = False
    while True:
        try:
            heard |= sock.recv(256) == news
        except BlockingIOError:
            return heard


def _drops(client: KVPClient) -> dict:
    """Datagrams a lossy client threw away, and requests it sent (resends included)."""
    return {"dropped": getattr(getattr(client, "transport", None), "dropped", 0), "sent": getattr(client, "sent", 0)}


def random_datagram(rng: random.Random, tenant: int) -> bytes:
    """One fuzz datagram: mostly KVP-shaped with random fields (any opcode, status, flags, counts, lengths),
    sometimes truncated or padded, sometimes plain random bytes. Keys live under `tenant`, which no test's
    blocks use, so a fuzz PUT can never overwrite a block under test."""
    kind = rng.random()
    if kind < 0.15:
        return rng.randbytes(rng.randrange(0, 300))
    header = Header(rng.choice([*Opcode, rng.randrange(256)]), status=rng.randrange(256),
                    flags=rng.randrange(256), tenant=tenant, req_id=rng.randrange(1 << 32),
                    prefix_hash=rng.randrange(1 << 64), chunk_idx=rng.randrange(256),
                    chunk_count=rng.randrange(256), value_len=rng.randrange(1 << 16),
                    version=rng.choice([0, 1, 0xFFFFFFFF, rng.randrange(1 << 32)]),
                    value_csum=rng.randrange(1 << 32), aux=rng.randrange(1 << 32))
    if header.flags & Flag.VALUE:  # half with consistent value_len / value_csum, half with the random ones
        data = encode(header, rng.randbytes(rng.randrange(129))) if rng.random() < 0.5 else \
            header.pack() + rng.randbytes(128)
    else:
        data = header.pack()
    if rng.random() < 0.3:
        data = data[: rng.randrange(len(data) + 1)]
    if rng.random() < 0.1:
        data += rng.randbytes(rng.randrange(1, 64))
    if rng.random() < 0.1 and len(data) >= 3:
        data = KVP_MAGIC.to_bytes(2, "big") + bytes([rng.randrange(256)]) + data[3:]  # a wrong `ver`
    return data


def serve(agent: Agent, lines: Iterable[str], write) -> None:
    handlers = {"put": agent.put, "get": agent.get, "reads": agent.reads, "insert": agent.insert,
                "tier_move": agent.tier_move, "frames": agent.frames, "fuzz": agent.fuzz, "listen": agent.listen}
    for line in lines:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            answer = {"ok": True, **handlers[request["op"]](request)}
        except Exception as exc:  # an agent answers every request; the test decides what an error means
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        write(json.dumps(answer) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvtesting.coherence", description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="storage node HOST[:PORT]")
    parser.add_argument("--iface", default=None, help="interface for raw frames")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args(argv)
    agent = Agent(ClientOptions(server=parse_address(args.server), timeout=args.timeout, retries=args.retries),
                  args.iface)

    return serve_stdio(agent, serve)


# ---- the test's side ------------------------------------------------------------------------------------------


class HostAgent:
    """A running agent in a Mininet host: `call(op, **fields)` → its answer (raises on an agent error)."""

    def __init__(self, node: Any, server: str, repo: Path, env: dict[str, str], timeout: float = 1.0) -> None:
        self.name = node.name
        self.process: subprocess.Popen = node.popen(
            [sys.executable, "-m", "kvtesting.coherence", "--server", server, "--iface", node.defaultIntf().name,
             "--timeout", str(timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(repo), env=env,
            text=True)
        ready = self._answer()
        assert ready.get("ready"), ready

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the agent in {self.name} ended (status {self.process.poll()})")
        return json.loads(line)

    def send(self, op: str, **fields: Any) -> None:
        """Start a request without waiting for it (`answer()` collects it): concurrent work in several hosts."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()

    def answer(self) -> dict:
        answer = self._answer()
        if not answer.pop("ok"):
            raise RuntimeError(f"agent in {self.name}: {answer['error']}")
        return answer

    def call(self, op: str, **fields: Any) -> dict:
        self.send(op, **fields)
        return self.answer()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Write:
    version: int
    data: bytes
    started: float
    acked: float | None
    """Monotonic time the writer saw the commit (None: refused or unknown outcome)."""
    refused: bool = False
    """The storage node refused it (ERR_CONFLICT, ERR_STALE, ...): its bytes were never committed."""


Learnt = Mapping[int, float]
"""Version → when a reader learnt of that write's ack through the network (`reads` with `notify_port`; infinity:
it never did). The fabric's guarantee holds from then on, not from the writer's ack (dataplane.md, "Fabric
coherence": the INVALIDATE and the ack race on different paths); a version missing counts from its ack."""


def _known_at(write: Write, learnt: Learnt | None) -> float:
    assert write.acked is not None
    return learnt.get(write.version, write.acked) if learnt is not None else write.acked


@dataclass
class Verdict:
    right: bool
    why: str = ""


class StorageModel:
    """Every write the test made, per block, in order; judges reads against it."""

    def __init__(self) -> None:
        self.writes: dict[int, list[Write]] = {}

    def wrote(self, ph: int, version: int, data: bytes, started: float, acked: float | None,
              refused: bool = False) -> None:
        self.writes.setdefault(ph, []).append(Write(version, data, started, acked, refused))

    def record(self, ph: int, version: int, data: bytes, answer: dict) -> bool:
        """Record the agent's answer to a `put`; True when it was acknowledged."""
        ok = answer["status"] == "OK"
        refused = answer["status"].startswith("ERR_")
        self.wrote(ph, version, data, answer["started"], answer.get("acked") if ok else None, refused)
        return ok

    def newest_acked_before(self, ph: int, instant: float, learnt: Learnt | None = None) -> int:
        """The newest version of `ph` acknowledged before `instant` (with `learnt`: whose ack the reader had
        learnt of before `instant`)."""
        return max((w.version for w in self.writes.get(ph, [])
                    if w.acked is not None and _known_at(w, learnt) < instant), default=0)

    def raced(self, read: dict, learnt: Learnt | None) -> bool:
        """The read began after a write of its block was acknowledged but before the reader learnt of it."""
        started = float(read["started"])
        return learnt is not None and any(w.acked is not None and w.acked < started < _known_at(w, learnt)
                                          for w in self.writes.get(int(read["ph"]), []))

    def judge(self, read: dict, learnt: Learnt | None = None) -> Verdict:
        """A read answer of the agent: right when its bytes are those of a write of its version (no other write
        of that version had them: never stitched or planted) and its version is at least the newest one
        acknowledged before the read began (with `learnt`: whose ack the reader had learnt of by then)."""
        ph = int(read["ph"])
        if "error" in read:
            return Verdict(True, "no value")  # no value is never a wrong value; the caller counts errors
        version, data = int(read["version"]), bytes.fromhex(read["data"])
        candidates = [w.data for w in self.writes.get(ph, []) if w.version == version and not w.refused]
        if data not in candidates:
            kind = "stitched or planted" if candidates else "unknown version"
            return Verdict(False, f"{ph:#x} v{version}: {kind} bytes {data[:24]!r}...")
        floor = self.newest_acked_before(ph, float(read["started"]), learnt)
        if version < floor:
            return Verdict(False, f"{ph:#x}: stale v{version} read after v{floor} was acknowledged")
        return Verdict(True)


INCONSISTENT = ("mixed versions", "chunk_count")
"""Words of the client's refusals of a block whose chunks disagree (kvpool.blocks, kvpool.client). A refusal
"after N restarts" is churn (newer versions kept committing during the read), not counted as inconsistent."""


@dataclass
class Tally:
    """One scenario's figures."""

    reads: int = 0
    switch_reads: int = 0
    """Reads whose every chunk was a HIT_SWITCH."""
    wrong_reads: int = 0
    read_errors: int = 0
    """Reads that returned no value (timeouts, MISS, refusals): not wrong, but counted."""
    inconsistent_reads: int = 0
    """Reads the client refused because the chunks it was served disagreed (another version or chunk count):
    a stale or truncated chunk was served, and the client's own check caught it."""
    writes: int = 0
    failed_writes: int = 0
    """Writes reported failed (refusals the test provoked included)."""
    falsely_failed_writes: int = 0
    """Writes reported failed although the storage node committed them."""
    raced_reads: int = 0
    """Reads that began after a write's ack but before the reader learnt of it (`Learnt`): judged from what the
    reader knew; one the client refused for mixed versions counts here only (not as an error)."""
    notes: dict[str, Any] = field(default_factory=dict)
    wrong_examples: list[str] = field(default_factory=list)

    def count_reads(self, reads: Sequence[dict], model: StorageModel, learnt: Learnt | None = None) -> list[str]:
        """Judge and count `reads` (with `learnt`: against what the reader knew, see `Learnt`); the reasons of
        the wrong ones."""
        wrong = []
        for read in reads:
            self.reads += 1
            raced = model.raced(read, learnt)
            self.raced_reads += raced
            if "error" in read:
                text = read.get("text", "")
                inconsistent = any(word in text for word in INCONSISTENT) and "restarts" not in text
                if inconsistent and raced:
                    continue  # mixed versions while the news was on its way: in `raced_reads` only
                self.read_errors += 1
                if inconsistent:
                    self.inconsistent_reads += 1
                    wrong.append(f"{int(read['ph']):#x}: refused by the client: {text}")
                continue
            if all(read["switch"]):
                self.switch_reads += 1
            verdict = model.judge(read, learnt)
            if not verdict.right:
                self.wrong_reads += 1
                wrong.append(verdict.why)
        self.wrong_examples += wrong[: max(0, 5 - len(self.wrong_examples))]
        return wrong


class Figures:
    """Scenario name → Tally, saved as JSON (`out/coherence/<name>.json`) whenever a scenario is recorded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tallies: dict[str, Tally] = {}

    def __getitem__(self, scenario: str) -> Tally:
        return self.tallies.setdefault(scenario, Tally())

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({k: asdict(v) for k, v in self.tallies.items()}, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
