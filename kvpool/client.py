"""The KVP client an inference node uses: whole blocks over plain UDP, chunked, checked, retried.

    python -m kvpool.client [--server HOST[:PORT]] [--tenant T] get   PREFIX_HASH [--out FILE]
    python -m kvpool.client ... put    PREFIX_HASH --version V (--file F | --data TEXT)
    python -m kvpool.client ... insert PREFIX_HASH [--chunk I] [--depth D] [--tokens N] [--pin]
    python -m kvpool.client ... lookup PREFIX_HASH [--chunk I]
    python -m kvpool.client ... stat   PREFIX_HASH [--chunk I]
    python -m kvpool.client ... hash   --ids 0,14,15        (prefix hashes of trace block ids)

PREFIX_HASH is decimal or 0x-hex. The client talks to one address, the storage node's; a switch on the way
may answer GETs itself (status HIT_SWITCH) and punts INSERT/LOOKUP_META to the controller. Sockets are plain
UDP (no root); Scapy only builds and dissects the bytes, and `KVP.answers` matches replies to requests.
"""

from __future__ import annotations

import argparse
import itertools
import random
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvpool.blocks import BlockError, Reassembly, chunk_count, split
from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status, Tier, tiers_of
from kvpool.protocol import KVP, KVPValue, check


class KVPError(Exception):
    """A request failed: a refusal from the peer (`status` set), a wrong reply, or a timeout."""

    def __init__(self, message: str, status: Status | None = None) -> None:
        super().__init__(message)
        self.status = status


class KVPTimeout(KVPError):
    """No (valid) reply after all retries."""


class BlockNotFound(KVPError):
    """GET answered MISS: the block is stored nowhere the request reached."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How a client talks to the pool."""

    server: tuple[str, int] = ("127.0.0.1", KVP_UDP_PORT)
    """The storage node's address: every request goes there (the switch intercepts what it serves)."""
    tenant: int = 0
    """Tenant id, part of every block key."""
    timeout: float = 0.5
    """Seconds to wait for the replies of one round before resending what is missing."""
    retries: int = 3
    """Resends after the first try; then KVPTimeout."""
    bypass: bool = False
    """Set F_BYPASS on every request: the switch neither answers nor fills (the "no switch pool" baseline)."""
    bind: str = "0.0.0.0"
    """Local address of the socket."""


@dataclass(frozen=True, slots=True)
class ChunkReply:
    """How one chunk of a read was served."""

    idx: int
    status: Status
    """HIT_SWITCH or HIT_SERVER."""
    latency: float
    """Seconds from the (last) send to the reply."""
    attempts: int


@dataclass(frozen=True, slots=True)
class BlockRead:
    """A block read back whole and verified."""

    data: bytes
    version: int
    chunks: tuple[ChunkReply, ...]

    @property
    def switch_hits(self) -> int:
        return sum(c.status == Status.HIT_SWITCH for c in self.chunks)


@dataclass(frozen=True, slots=True)
class Meta:
    """INSERT_ACK / LOOKUP_META_REPLY: where a chunk lives."""

    status: Status
    tiers: frozenset[Tier]
    version: int


def parse_address(text: str, default_port: int = KVP_UDP_PORT) -> tuple[str, int]:
    """"HOST" or "HOST:PORT" -> (host, port); raises ValueError with the reason."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {text!r}")
    return host, int(port)


class KVPClient:
    """One UDP socket to the pool; requests are pipelined per call and matched by req_id and key."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((options.bind, 0))
        self._req_ids = itertools.count(random.randrange(1 << 31))
        self.stray_replies = 0
        """Datagrams that answered nothing pending (late duplicates, wrong keys)."""

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> KVPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- one round of requests --------------------------------------------------------------------

    def _request(self, opcode: Opcode, prefix_hash: int, chunk_idx: int = 0, chunk_count: int = 1,
                 value: bytes | None = None, **fields: int) -> KVP:
        """A request header (plus its value chunk): F_VALUE, value_len and value_csum follow the value."""
        flags = fields.pop("flags", 0) | (Flag.BYPASS if self.options.bypass else 0)
        if value is not None:
            flags |= Flag.VALUE
        request = KVP(opcode=opcode, tenant=self.options.tenant, req_id=next(self._req_ids) & 0xFFFFFFFF,
                   prefix_hash=prefix_hash, chunk_idx=chunk_idx, chunk_count=chunk_count, flags=flags, **fields)
        if value is not None:
            request.value_len = len(value)
            request = request / KVPValue.from_bytes(value)
        return request

    def exchange(self, requests: Sequence[KVP]) -> list[tuple[KVP, float, int]]:
        """Send all requests, resend the unanswered ones each timeout; (reply, latency, attempts) in order."""
        pending = {r.req_id: i for i, r in enumerate(requests)}
        wire = [bytes(r) for r in requests]
        results: list[tuple[KVP, float, int] | None] = [None] * len(requests)
        sent_at = [0.0] * len(requests)
        attempts = [0] * len(requests)
        wrong: list[str] = []
        for _ in range(self.options.retries + 1):
            for i in pending.values():
                sent_at[i] = time.perf_counter()
                attempts[i] += 1
                self._sock.sendto(wire[i], self.options.server)
            deadline = time.monotonic() + self.options.timeout
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._sock.settimeout(left)
                try:
                    data = self._sock.recv(2048)
                except TimeoutError:
                    break
                now = time.perf_counter()
                reply = KVP(data)
                i = pending.get(reply.req_id)
                if i is None:
                    self.stray_replies += 1
                    continue
                reason = check(data)
                if reason is not None or not reply.answers(requests[i]):
                    wrong.append(f"{reply.summary()} ({reason or 'does not answer ' + requests[i].summary()})")
                    if reason is None:
                        continue  # a reply to something else with our req_id: keep waiting
                results[i] = (reply, now - sent_at[i], attempts[i])
                del pending[reply.req_id]
            if not pending:
                break
        if pending:
            first = requests[next(iter(pending.values()))]
            detail = f"; wrong replies: {wrong[:3]}" if wrong else ""
            raise KVPTimeout(f"no reply from {self.options.server[0]}:{self.options.server[1]} to "
                             f"{len(pending)} of {len(requests)} requests (first: {first.summary()}) after "
                             f"{self.options.retries + 1} tries of {self.options.timeout}s{detail}")
        return [r for r in results if r is not None]

    def _one(self, request: KVP) -> KVP:
        reply = self.exchange([request])[0][0]
        if reply.status in (Status.ERR_MALFORMED, Status.ERR_UNKNOWN_OP, Status.ERR_DENIED):
            raise KVPError(f"{request.summary()} refused: {_name(reply.status)}", _status(reply.status))
        return reply

    # ---- blocks -------------------------------------------------------------------------------------

    def get_block(self, prefix_hash: int, chunks: int | None = None, version: int = 0) -> BlockRead:
        """Read a whole block. `chunks` unknown: chunk 0 first, its reply tells the count.

        `version` 0 accepts any version, otherwise at least that one; all chunks must carry the same version.
        Raises BlockNotFound on MISS, KVPError on a refusal or an inconsistent block, KVPTimeout.
        """
        assembly = Reassembly(version)
        served: dict[int, ChunkReply] = {}
        todo = list(range(chunks)) if chunks else [0]
        count = chunks or 1
        while todo:
            requests = [self._request(Opcode.GET, prefix_hash, i, count, version=version) for i in todo]
            for request, (reply, latency, attempts) in zip(requests, self.exchange(requests), strict=True):
                status = _status(reply.status)
                if status == Status.MISS:
                    raise BlockNotFound(f"block {prefix_hash:#018x} chunk {request.chunk_idx}: MISS", Status.MISS)
                if status not in (Status.HIT_SWITCH, Status.HIT_SERVER) or not isinstance(reply.payload, KVPValue):
                    raise KVPError(f"GET {prefix_hash:#018x} chunk {request.chunk_idx}: unexpected reply "
                                   f"{reply.summary()}", status)
                try:
                    assembly.add(reply.chunk_idx, reply.chunk_count, reply.value_len,
                                 reply.payload.value_bytes, reply.version, reply.value_csum)
                except BlockError as exc:
                    raise KVPError(f"GET {prefix_hash:#018x}: {exc} (from {_name(reply.status)})",
                                   Status.ERR_CHECKSUM) from None
                served[reply.chunk_idx] = ChunkReply(reply.chunk_idx, status, latency, attempts)
            count = assembly.count or 1
            todo = assembly.missing
        return BlockRead(assembly.data(), assembly.version or 0,
                         tuple(served[i] for i in sorted(served)))

    def put_block(self, prefix_hash: int, data: bytes, version: int) -> None:
        """Write a whole block at `version` (must be newer than the stored one). Raises KVPError on refusal."""
        if version <= 0:
            raise ValueError("a written block needs a version > 0 (0 means 'unknown')")
        try:
            chunks = split(data, version)
        except BlockError as exc:
            raise KVPError(str(exc)) from None
        requests = [self._request(Opcode.PUT, prefix_hash, c.idx, c.count, c.value[:c.value_len], version=version)
                    for c in chunks]
        for request, (reply, _, _) in zip(requests, self.exchange(requests), strict=True):
            if reply.status != Status.OK:
                raise KVPError(f"PUT {prefix_hash:#018x} chunk {request.chunk_idx} v{version}: {_name(reply.status)}"
                               + (f" (stored v{reply.version})" if reply.status == Status.ERR_STALE else ""),
                               _status(reply.status))

    # ---- metadata -----------------------------------------------------------------------------------

    def insert(self, prefix_hash: int, chunk_idx: int = 0, chunk_count: int = 1, depth: int = 0,
               tokens: int = 512, pin: bool = False, version: int = 0, value: bytes | None = None) -> Meta:
        """Announce a chunk and ask for admission to the switch pool; the reply's tiers say where it lives."""
        if not (0 <= depth < 1 << 16 and 0 <= tokens <= 512):
            raise ValueError("depth must be 0..65535 and tokens 0..512")
        request = self._request(Opcode.INSERT, prefix_hash, chunk_idx, chunk_count, value, version=version,
                                aux=depth << 16 | tokens, flags=Flag.PIN if pin else 0)
        reply = self._one(request)
        return _meta(reply)

    def lookup(self, prefix_hash: int, chunk_idx: int = 0) -> Meta:
        """Where a chunk lives (tier set) and its newest known version."""
        reply = self._one(self._request(Opcode.LOOKUP_META, prefix_hash, chunk_idx, chunk_idx + 1))
        return _meta(reply)

    def stat(self, prefix_hash: int, chunk_idx: int = 0) -> int:
        """GETs the storage node received for a chunk."""
        return self._one(self._request(Opcode.STAT, prefix_hash, chunk_idx, chunk_idx + 1)).aux

    def tier_move(self, prefix_hash: int, chunk_idx: int, tier: Tier, score: float = 0.0) -> tuple[Status, Tier]:
        """Ask the storage node to move (or keep, with a score) a chunk; (status, tier it is in now)."""
        aux = int(tier) | min(int(score * 1000), (1 << 24) - 1) << 8
        reply = self.exchange([self._request(Opcode.TIER_MOVE, prefix_hash, chunk_idx, chunk_idx + 1, aux=aux)])[0][0]
        status = _status(reply.status)
        if status is None:
            raise KVPError(f"TIER_MOVE: unknown status {reply.status:#04x} in the reply")
        tier = reply.aux & 0xFF
        return status, Tier(tier) if tier in {int(t) for t in Tier} else Tier.ABSENT


def _status(code: int) -> Status | None:
    """The Status of a reply's code, None for a code the protocol does not define."""
    try:
        return Status(code)
    except ValueError:
        return None


def _meta(reply: KVP) -> Meta:
    status = _status(reply.status)
    if status is None:
        raise KVPError(f"unknown status {reply.status:#04x} in {reply.summary()}")
    return Meta(status, tiers_of(reply.aux), reply.version)


def _name(code: int) -> str:
    status = _status(code)
    return status.name if status is not None else f"status {code:#04x}"


# ---- command line ---------------------------------------------------------------------------------------

def _int(text: str) -> int:
    return int(text, 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kvpool.client", description="KVP client (kvswitch pool)")
    parser.add_argument("--server", default=f"127.0.0.1:{KVP_UDP_PORT}", help="storage node HOST[:PORT]")
    parser.add_argument("--tenant", type=_int, default=0)
    parser.add_argument("--timeout", type=float, default=0.5, help="seconds per try")
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--bypass", action="store_true", help="set F_BYPASS (switch must not answer)")
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("get", help="read a block")
    get.add_argument("prefix_hash", type=_int)
    get.add_argument("--chunks", type=int, default=None, help="chunk count if known")
    get.add_argument("--version", type=int, default=0)
    get.add_argument("--out", type=Path, default=None, help="write the block here (default: hex on stdout)")
    put = sub.add_parser("put", help="write a block")
    put.add_argument("prefix_hash", type=_int)
    put.add_argument("--version", type=int, required=True)
    src = put.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", type=Path)
    src.add_argument("--data")
    for name, text in (("insert", "announce a chunk, ask for admission"), ("lookup", "where a chunk lives"),
                       ("stat", "GETs the storage node saw for a chunk")):
        p = sub.add_parser(name, help=text)
        p.add_argument("prefix_hash", type=_int)
        p.add_argument("--chunk", type=int, default=0)
        if name == "insert":
            p.add_argument("--chunks", type=int, default=1)
            p.add_argument("--depth", type=int, default=0)
            p.add_argument("--tokens", type=int, default=512)
            p.add_argument("--pin", action="store_true")
    hsh = sub.add_parser("hash", help="prefix hashes of trace block ids (Mooncake hash_ids)")
    hsh.add_argument("--ids", required=True, help="comma-separated ids, in prompt order")
    return parser


def run(args: argparse.Namespace) -> str:
    """Carry out one CLI command; returns what to print. Raises KVPError/ValueError/OSError."""
    if args.command == "hash":
        from kvpool.prefix_hash import block_id_prefix_hashes

        ids = [int(x) for x in args.ids.split(",") if x.strip()]
        return "\n".join(f"{i}\t{h:#018x}" for i, h in zip(ids, block_id_prefix_hashes(ids), strict=True))
    options = ClientOptions(parse_address(args.server), args.tenant, args.timeout, args.retries, args.bypass)
    with KVPClient(options) as client:
        if args.command == "get":
            block = client.get_block(args.prefix_hash, args.chunks, args.version)
            lines = [f"block {args.prefix_hash:#018x} v{block.version}: {len(block.data)} bytes in "
                     f"{len(block.chunks)} chunks"]
            lines += [f"  chunk {c.idx}: {c.status.name} {c.latency * 1e6:.0f} µs ({c.attempts} tries)"
                      for c in block.chunks]
            if args.out:
                args.out.write_bytes(block.data)
            else:
                lines.append(block.data.hex())
            return "\n".join(lines)
        if args.command == "put":
            data = args.file.read_bytes() if args.file else args.data.encode()
            client.put_block(args.prefix_hash, data, args.version)
            return f"stored {len(data)} bytes as {args.prefix_hash:#018x} v{args.version} in {chunk_count(len(data))} chunks"
        if args.command == "insert":
            meta = client.insert(args.prefix_hash, args.chunk, args.chunks, args.depth, args.tokens, args.pin)
        elif args.command == "lookup":
            meta = client.lookup(args.prefix_hash, args.chunk)
        else:
            return f"{client.stat(args.prefix_hash, args.chunk)} GETs"
        tiers = ",".join(sorted(t.name for t in meta.tiers)) or "none"
        return f"{meta.status.name}: tiers {tiers}, version {meta.version}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        print(run(args))
    except (KVPError, ValueError, OSError) as exc:
        print(f"kvpool.client: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
