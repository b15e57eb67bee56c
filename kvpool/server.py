"""The storage node: a KVP server keeping block chunks in bounded DRAM, with an optional disk tier.

    python -m kvpool.server --port 7420 --capacity BYTES [--disk DIR] [--host ADDR] [--control-from CIDR,...]

What it answers (docs/protocol.md):

* GET → GET_REPLY with status HIT_SERVER and the chunk, or MISS (also when the GET asks for a newer `version`
  than the stored one). Only committed blocks are served. Every GET is counted per key for STAT.
* PUT → staged per writer (source address and port, version) until every chunk of the block has arrived; then
  the block is committed as a whole and every staged chunk gets its PUT_ACK at once (`kvpool.staging`). OK
  means committed. A PUT of the committed version with the same bytes is OK again (a resend), with other bytes
  ERR_CONFLICT; an older version ERR_STALE (the ACK's `version` is then the stored one); ERR_CHECKSUM when
  `value_csum` is wrong; ERR_FULL when the block does not fit in DRAM at `--capacity` and there is no disk tier
  (with `--disk`, new chunks that do not fit in DRAM are written to disk instead).
* TIER_MOVE → TIER_MOVE_ACK (`aux` = the tier the chunk is now in), only from `--control-from` (ERR_DENIED
  otherwise): target tier in aux bits 7..0 is STORAGE_DRAM or STORAGE_DISK (move, or keep it there and record
  the score in bits 31..8, × 1000) or ABSENT (drop it). MISS for an unknown key, ERR_FULL if DRAM has no room,
  ERR_DENIED for a tier this node lacks.
* STAT → STAT_REPLY, `aux` = GETs received for the key (hits and misses), status OK if stored else MISS.
* INSERT / LOOKUP_META normally never reach a storage node (the switch punts them to the controller, which
  answers in our name); without a switch the node answers itself with its local view: `aux` = tier bitmap,
  `version` = stored version. SLOT_* messages are for the switch: ERR_DENIED.
* Replies (GET_REPLY, PUT_ACK, ...) are never answered, so two nodes cannot ping-pong.
* Malformed datagrams (`kvpool.wire.check`) are counted by reason and never applied; when at least the magic
  and `req_id` are there, the node answers ERR_MALFORMED / ERR_UNKNOWN_OP with whatever header fields came.

DRAM holds 128 bytes per chunk (the padded value); `--capacity` bounds that. The disk tier is one SQLite file
in DIR (`chunks.sqlite`); chunks found there at start-up are served again. A block's chunks reach the disk in
one transaction.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sqlite3
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kvpool.constants import (
    CONTROL_OPCODES,
    KVP_HEADER_LEN,
    KVP_UDP_PORT,
    KVP_VALUE_LEN,
    REPLIES,
    REPLY_OF,
    Flag,
    Opcode,
    Status,
    Tier,
    tier_bitmap,
)
from kvpool.staging import BlockKey, CommitLog, Staged, StagedWrite, StagingArea, StagingOptions, WriteKey
from kvpool.trust import DEFAULT_CONTROL_FROM, ControlSources
from kvpool.wire import Header, Reason, check, has_magic, value_of

Key = tuple[int, int, int]
"""(tenant, prefix_hash, chunk_idx)."""
Address = tuple[str, int]
"""A UDP peer: (IPv4 address, port)."""

LOCAL: Address = ("127.0.0.1", 0)
"""The peer `handle` assumes when its caller gives none: an in-process caller, trusted as loopback is."""

_REPLY_CODE = {int(req): int(rep) for req, rep in REPLY_OF.items()}
"""Request opcode -> reply opcode as plain ints (the datagram's opcode may not be a known Opcode)."""

MAX_DATAGRAM = 2048
"""Largest datagram read; a KVP message is at most 164 bytes, anything longer is cut (and still checked)."""


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """How a storage node runs."""

    host: str = "0.0.0.0"
    """Address to bind (all interfaces: in Mininet the node has one, st1-eth0)."""
    port: int = KVP_UDP_PORT
    """UDP port to serve."""
    capacity: int = 64 << 20
    """DRAM tier size in bytes (128 per chunk)."""
    disk: Path | None = None
    """Folder of the disk tier; None = DRAM only (writes beyond capacity are refused with ERR_FULL)."""
    control_from: ControlSources = field(default_factory=ControlSources.parse)
    """Where controller-only requests (TIER_MOVE) are honoured from; others get ERR_DENIED."""
    staging: StagingOptions = field(default_factory=StagingOptions)
    """Bounds of the writes in progress (`kvpool.staging`)."""


@dataclass(slots=True)
class StoredChunk:
    """A chunk the node holds; `value` is None while it lives on disk."""

    chunk_count: int
    value_len: int
    version: int
    csum: int
    tier: Tier
    value: bytes | None
    score: float = 0.0
    """Residual score the controller gave it with TIER_MOVE (kept for eviction-order decisions)."""


class DiskTier:
    """Chunks on disk: one SQLite table keyed by (tenant, prefix_hash, chunk_idx)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / "chunks.sqlite", check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS chunk (tenant INTEGER, prefix_hash BLOB, chunk_idx INTEGER, "
            "chunk_count INTEGER, value_len INTEGER, version INTEGER, score REAL, value BLOB, "
            "PRIMARY KEY (tenant, prefix_hash, chunk_idx))")
        self._db.commit()
        self._batched = False

    @staticmethod
    def _ph(prefix_hash: int) -> bytes:
        return prefix_hash.to_bytes(8, "big")  # SQLite integers are signed 64-bit; a blob keeps all 64 bits

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes and deletes inside reach the file together (one SQLite commit), so a block never half-lands."""
        self._batched = True
        try:
            yield
        finally:
            self._batched = False
            self._db.commit()

    def _commit(self) -> None:
        if not self._batched:
            self._db.commit()

    def write(self, key: Key, chunk: StoredChunk, value: bytes) -> None:
        tenant, ph, idx = key
        self._db.execute("INSERT OR REPLACE INTO chunk VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (tenant, self._ph(ph), idx, chunk.chunk_count, chunk.value_len, chunk.version,
                          chunk.score, value))
        self._commit()

    def read(self, key: Key) -> bytes:
        tenant, ph, idx = key
        row = self._db.execute("SELECT value FROM chunk WHERE tenant=? AND prefix_hash=? AND chunk_idx=?",
                               (tenant, self._ph(ph), idx)).fetchone()
        assert row is not None, f"disk index out of sync for {key}"
        return bytes(row[0])

    def delete(self, key: Key) -> None:
        tenant, ph, idx = key
        self._db.execute("DELETE FROM chunk WHERE tenant=? AND prefix_hash=? AND chunk_idx=?",
                         (tenant, self._ph(ph), idx))
        self._commit()

    def load(self) -> dict[Key, StoredChunk]:
        """Everything on disk, as index entries (value None) with the CRC computed from the stored bytes."""
        out = {}
        for tenant, ph, idx, count, vlen, version, score, value in self._db.execute("SELECT * FROM chunk"):
            key = (tenant, int.from_bytes(ph, "big"), idx)
            out[key] = StoredChunk(count, vlen, version, zlib.crc32(value), Tier.STORAGE_DISK, None, score)
        return out

    def close(self) -> None:
        self._db.close()


@dataclass(frozen=True, slots=True)
class Datagram:
    """One datagram the node sends; `parts` are sent as one payload (kept apart so a chunk is never copied)."""

    parts: tuple[bytes, ...]
    to: Address

    @property
    def data(self) -> bytes:
        return b"".join(self.parts)


@dataclass(slots=True)
class BlockState:
    """What the node knows of a block as a whole."""

    version: int
    """The newest committed version; never lowered, also after TIER_MOVE dropped the chunks (so a version
    can never be committed twice with different bytes, even across a drop)."""
    chunk_count: int


class StorageNode:
    """One storage node: `receive(datagram, peer) -> datagrams` is the whole protocol; `serve` adds the socket."""

    def __init__(self, options: StorageOptions, clock: Callable[[], float] = time.monotonic) -> None:
        if options.capacity < 0:
            raise ValueError("capacity must be >= 0 bytes")
        self.options = options
        self.disk = DiskTier(options.disk) if options.disk is not None else None
        self.chunks: dict[Key, StoredChunk] = {}
        self.blocks: dict[BlockKey, BlockState] = {}
        self.dram_used = 0
        """Bytes of DRAM holding chunk values (128 per DRAM chunk)."""
        self.staging = StagingArea(options.staging, clock)
        """Writes whose blocks are not complete yet; never served."""
        self.commits = CommitLog(options.staging, clock)
        self.gets: Counter[Key] = Counter()
        """GET requests received per key (what STAT reports)."""
        self.counters: Counter[str] = Counter()
        """Requests by opcode name, malformed by reason ("malformed.<reason>"), replies by status name."""
        if self.disk is not None:
            self.chunks.update(self.disk.load())
            for (tenant, ph, _), chunk in self.chunks.items():
                state = self.blocks.get((tenant, ph))
                if state is None or chunk.version > state.version:
                    self.blocks[tenant, ph] = BlockState(chunk.version, chunk.chunk_count)

    # ---- the protocol ------------------------------------------------------------------------------

    def receive(self, data: bytes, peer: Address) -> list[Datagram]:
        """Everything to send because `data` came from `peer` (nothing, its reply, or the acks of a whole
        block when it completed one, possibly to other writers too). Never raises on input."""
        reason = check(data)
        if reason is not None:
            refusal = self._refuse(data, reason)
            return [] if refusal is None else [Datagram((refusal,), peer)]
        h = Header.unpack(data)
        op = Opcode(h.opcode)
        self.counters[op.name] += 1
        if op in REPLIES:
            return []
        if op == Opcode.PUT:
            return self._put(h, data, peer)
        if op in CONTROL_OPCODES and not self.options.control_from.allows(peer[0]):
            self.counters["denied.control_source"] += 1
            return [Datagram((self._reply(h, Status.ERR_DENIED).pack(),), peer)]
        handler = {
            Opcode.GET: self._get,
            Opcode.TIER_MOVE: self._tier_move,
            Opcode.STAT: self._stat,
            Opcode.INSERT: self._meta,
            Opcode.LOOKUP_META: self._meta,
        }.get(op)
        if handler is None:  # SLOT_WRITE / SLOT_READ belong to the switch
            return [Datagram((self._reply(h, Status.ERR_DENIED).pack(),), peer)]
        return [Datagram(handler(h), peer)]

    def handle(self, data: bytes, peer: Address = LOCAL) -> bytes | None:
        """The reply to this one datagram, for callers that send one request at a time; None when there is none
        (yet: a PUT of a multi-chunk block is answered when its last chunk arrives, use `receive` for those)."""
        out = [d for d in self.receive(data, peer) if d.to == peer]
        mine = [d for d in out if d.parts[0][8:12] == data[8:12] and d.parts[0][20:21] == data[20:21]]
        chosen = mine or out
        return chosen[0].data if chosen else None

    def _reply(self, h: Header, status: Status, **fields: int) -> Header:
        """The reply header: request fields echoed, opcode turned into its reply, no value unless given."""
        self.counters[f"status.{status.name}"] += 1
        base = dict(opcode=_REPLY_CODE.get(h.opcode, h.opcode), status=status, flags=0, value_len=0,
                    value_csum=0, aux=0)
        base.update(fields)
        return h.replace(**base)

    def _refuse(self, data: bytes, reason: Reason) -> bytes | None:
        self.counters[f"malformed.{reason.value}"] += 1
        # Only answer what carries our magic and a req_id (12 bytes), and never answer a reply.
        if not has_magic(data) or len(data) < 12:
            return None
        h = Header.unpack(data[:KVP_HEADER_LEN].ljust(KVP_HEADER_LEN, b"\0"))
        if h.opcode in REPLIES:
            return None
        opcode = _REPLY_CODE.get(h.opcode, h.opcode)
        self.counters[f"status.{reason.status.name}"] += 1
        return h.replace(opcode=opcode, status=reason.status, flags=0, value_len=0, value_csum=0,
                         aux=0, ver=1).pack()

    def _value(self, key: Key, chunk: StoredChunk) -> bytes:
        if chunk.value is not None:
            return chunk.value
        assert self.disk is not None, "a disk-tier chunk without a disk tier"
        return self.disk.read(key)

    def _get(self, h: Header) -> tuple[bytes, ...]:
        self.gets[h.key] += 1
        chunk = self.chunks.get(h.key)
        if chunk is None:
            return (self._reply(h, Status.MISS, version=0).pack(),)
        if h.version > chunk.version:  # asks for a newer version than we hold
            return (self._reply(h, Status.MISS, version=chunk.version).pack(),)
        reply = self._reply(h, Status.HIT_SERVER, flags=Flag.VALUE, chunk_count=chunk.chunk_count,
                            value_len=chunk.value_len, version=chunk.version, value_csum=chunk.csum)
        return reply.pack(), self._value(h.key, chunk)

    # ---- writes: staged per writer, committed per block ---------------------------------------------

    def _put(self, h: Header, data: bytes, peer: Address) -> list[Datagram]:
        value = value_of(data)
        assert value is not None, "check() lets no PUT without a value through"
        if zlib.crc32(value) != h.value_csum:
            return [Datagram((self._reply(h, Status.ERR_CHECKSUM).pack(),), peer)]
        write: WriteKey = (peer[0], peer[1], h.tenant, h.prefix_hash, h.version)
        if self.commits.committed(write, h.chunk_idx, h.chunk_count, h.value_csum):
            self.counters["put.resend_of_commit"] += 1  # its ack was lost; the block may be newer since
            return [Datagram((self._reply(h, Status.OK, version=h.version).pack(),), peer)]
        state = self.blocks.get((h.tenant, h.prefix_hash))
        if state is not None and h.version <= state.version:
            return [self._verdict(h, value, state, peer)]
        staged, pending = self.staging.stage(write, h.chunk_count, h, value)
        if staged is Staged.CONFLICT:
            return [Datagram((self._reply(h, Status.ERR_CONFLICT, version=h.version).pack(),), peer)]
        if staged is Staged.COUNT_MISMATCH:
            self.counters["put.count_mismatch"] += 1
            return [Datagram((self._reply(h, Status.ERR_MALFORMED).pack(),), peer)]
        if not pending.complete:
            return []
        return self._commit(pending)

    def _verdict(self, h: Header, value: bytes, state: BlockState, to: Address) -> Datagram:
        """The ack of a chunk whose version is not newer than the committed one: OK when it is exactly what is
        committed (a resend, or the same bytes from another writer), ERR_CONFLICT when it differs, ERR_STALE
        when it is older or can no longer be compared (dropped by TIER_MOVE)."""
        status = Status.ERR_STALE
        if h.version == state.version:
            stored = self.chunks.get(h.key)
            if stored is not None and stored.version == h.version:
                same = (stored.chunk_count == h.chunk_count and stored.value_len == h.value_len
                        and stored.csum == h.value_csum and self._value(h.key, stored) == value)
                status = Status.OK if same else Status.ERR_CONFLICT
        return Datagram((self._reply(h, status, version=state.version).pack(),), to)

    def _commit(self, write: StagedWrite) -> list[Datagram]:
        """Make a complete write visible as a whole (or refuse it as a whole); acks for all its chunks, and
        verdicts for the other writers' staged writes of the block that this commit settles."""
        self.staging.remove(write.key)
        chunks = [write.chunks[i] for i in range(write.chunk_count)]
        state = self.blocks.get(write.block)
        if state is not None and write.version <= state.version:  # another write committed first
            return [self._verdict(c.request, c.value, state, write.source) for c in chunks]
        if not self._store(write):
            return [Datagram((self._reply(c.request, Status.ERR_FULL).pack(),), write.source) for c in chunks]
        self.counters["put.committed"] += 1
        self.commits.record(write.key, write.chunk_count, tuple(c.request.value_csum for c in chunks))
        out = [Datagram((self._reply(c.request, Status.OK, version=write.version).pack(),), write.source)
               for c in chunks]
        state = self.blocks[write.block]
        for other in self.staging.writes_of(write.block):
            if other.version <= write.version:  # can never commit now: settle it instead of letting it expire
                self.staging.remove(other.key)
                out += [self._verdict(c.request, c.value, state, other.source) for c in other.chunks.values()]
        return out

    def _store(self, write: StagedWrite) -> bool:
        """Replace the block's chunks by the write's, all or nothing; False when they do not fit."""
        tenant, ph = write.block
        old = self.blocks.get(write.block)
        leftovers = [k for i in range(write.chunk_count, old.chunk_count if old else 0)
                     if (k := (tenant, ph, i)) in self.chunks]
        freed = sum(KVP_VALUE_LEN for k in leftovers if self.chunks[k].tier == Tier.STORAGE_DRAM)
        new = [k for i in range(write.chunk_count) if (k := (tenant, ph, i)) not in self.chunks]
        room = max(0, self.options.capacity - self.dram_used + freed) // KVP_VALUE_LEN
        if len(new) > room and self.disk is None:
            return False
        to_dram = set(new[:room])
        with self.disk.transaction() if self.disk is not None else contextlib.nullcontext():
            for key in leftovers:
                self._drop(key)
            for idx in range(write.chunk_count):
                staged, key = write.chunks[idx], (tenant, ph, idx)
                before = self.chunks.get(key)
                tier = before.tier if before is not None else (
                    Tier.STORAGE_DRAM if key in to_dram else Tier.STORAGE_DISK)
                chunk = StoredChunk(write.chunk_count, staged.request.value_len, write.version,
                                    staged.request.value_csum, tier, None, before.score if before else 0.0)
                self._place(key, chunk, staged.value)
        self.blocks[write.block] = BlockState(write.version, write.chunk_count)
        return True

    def _place(self, key: Key, chunk: StoredChunk, value: bytes) -> None:
        """Store `chunk` in its tier, releasing whatever the key held before."""
        self._drop(key)
        if chunk.tier == Tier.STORAGE_DRAM:
            chunk.value = value
            self.dram_used += KVP_VALUE_LEN
        else:
            assert self.disk is not None
            chunk.value = None
            self.disk.write(key, chunk, value)
        self.chunks[key] = chunk

    def _drop(self, key: Key) -> None:
        old = self.chunks.pop(key, None)
        if old is None:
            return
        if old.tier == Tier.STORAGE_DRAM:
            self.dram_used -= KVP_VALUE_LEN
        elif self.disk is not None:
            self.disk.delete(key)

    def expire(self) -> int:
        """Drop staged writes idle for too long (also done on every PUT); how many."""
        return self.staging.expire()

    # ---- control and metadata ------------------------------------------------------------------------

    def _tier_move(self, h: Header) -> tuple[bytes, ...]:
        target, score = h.aux & 0xFF, (h.aux >> 8) / 1000
        if target not in {int(t) for t in Tier}:
            return (self._reply(h, Status.ERR_MALFORMED).pack(),)
        target = Tier(target)
        chunk = self.chunks.get(h.key)
        if chunk is None:
            return (self._reply(h, Status.MISS).pack(),)
        if target == Tier.ABSENT:
            self._drop(h.key)
            return (self._reply(h, Status.OK, aux=Tier.ABSENT).pack(),)
        if target not in (Tier.STORAGE_DRAM, Tier.STORAGE_DISK) or (
                target == Tier.STORAGE_DISK and self.disk is None):
            return (self._reply(h, Status.ERR_DENIED, aux=chunk.tier).pack(),)
        if target != chunk.tier:
            if target == Tier.STORAGE_DRAM and self.dram_used + KVP_VALUE_LEN > self.options.capacity:
                return (self._reply(h, Status.ERR_FULL, aux=chunk.tier).pack(),)
            value = self._value(h.key, chunk)
            moved = StoredChunk(chunk.chunk_count, chunk.value_len, chunk.version, chunk.csum, target, None)
            self._place(h.key, moved, value)
            chunk = moved
        chunk.score = score
        if chunk.tier == Tier.STORAGE_DISK and self.disk is not None:
            self.disk.write(h.key, chunk, self._value(h.key, chunk))  # persist the score with it
        return (self._reply(h, Status.OK, aux=chunk.tier).pack(),)

    def _stat(self, h: Header) -> tuple[bytes, ...]:
        status = Status.OK if h.key in self.chunks else Status.MISS
        return (self._reply(h, status, aux=min(self.gets[h.key], 0xFFFFFFFF)).pack(),)

    def _meta(self, h: Header) -> tuple[bytes, ...]:
        chunk = self.chunks.get(h.key)
        if chunk is None:
            return (self._reply(h, Status.MISS if h.opcode == Opcode.LOOKUP_META else Status.OK,
                                version=0).pack(),)
        return (self._reply(h, Status.OK, aux=tier_bitmap({chunk.tier}), version=chunk.version).pack(),)

    # ---- the socket ------------------------------------------------------------------------------------

    def bind(self) -> socket.socket:
        """The node's UDP socket (port 0 picks a free one: read it back with getsockname())."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((self.options.host, self.options.port))
        return sock

    def serve(self, sock: socket.socket, stop: threading.Event, poll: float = 0.2) -> None:
        """Answer datagrams on `sock` until `stop` is set (checked every `poll` seconds)."""
        sock.settimeout(poll)
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(MAX_DATAGRAM)
            except TimeoutError:
                self.expire()
                continue
            except OSError:
                if stop.is_set():
                    break
                raise
            for out in self.receive(data, peer):
                try:
                    sock.sendmsg(out.parts, (), 0, out.to)
                except OSError:
                    self.counters["send_error"] += 1

    def summary(self) -> dict[str, object]:
        """Counters and occupancy, for logs and tests."""
        tiers = Counter(c.tier.name for c in self.chunks.values())
        return {"chunks": dict(tiers), "dram_used": self.dram_used, "capacity": self.options.capacity,
                "staging": {"writes": len(self.staging), "bytes": self.staging.bytes,
                            "evicted": self.staging.evicted, "expired": self.staging.expired},
                "counters": dict(self.counters)}

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()


def parse_args(argv: list[str] | None = None) -> StorageOptions:
    parser = argparse.ArgumentParser(prog="python -m kvpool.server", description="kvswitch storage node (KVP over UDP)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default all)")
    parser.add_argument("--port", type=int, default=KVP_UDP_PORT, help=f"UDP port (default {KVP_UDP_PORT})")
    parser.add_argument("--capacity", type=int, default=64 << 20, help="DRAM tier in bytes (default 64 MiB)")
    parser.add_argument("--disk", type=Path, default=None, help="folder for the disk tier (default: none)")
    parser.add_argument("--control-from", default=DEFAULT_CONTROL_FROM, metavar="CIDR[,CIDR...]",
                        help="where controller-only requests (TIER_MOVE) are honoured from "
                             f"(default {DEFAULT_CONTROL_FROM}: loopback and the testbed's management link)")
    defaults = StagingOptions()
    parser.add_argument("--staging-bytes", type=int, default=defaults.max_bytes,
                        help=f"bytes of writes in progress, all writers (default {defaults.max_bytes})")
    parser.add_argument("--staging-per-source", type=int, default=defaults.max_bytes_per_source,
                        help=f"bytes of writes in progress per source address (default {defaults.max_bytes_per_source})")
    parser.add_argument("--staging-timeout", type=float, default=defaults.idle_timeout,
                        help=f"seconds an incomplete write is kept after its last chunk (default {defaults.idle_timeout})")
    args = parser.parse_args(argv)
    if not 0 <= args.port < 65536 or args.capacity < 0:
        parser.error("--port must be 0..65535 and --capacity >= 0")
    try:
        control = ControlSources.parse(args.control_from)
        staging = StagingOptions(args.staging_bytes, args.staging_per_source, args.staging_timeout)
    except ValueError as exc:
        parser.error(str(exc))
    return StorageOptions(args.host, args.port, args.capacity, args.disk, control, staging)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    node = StorageNode(options)
    try:
        sock = node.bind()
    except OSError as exc:
        print(f"kvpool.server: cannot bind {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"kvpool.server: serving {sock.getsockname()[0]}:{sock.getsockname()[1]}, "
          f"capacity {options.capacity} B, disk {options.disk or 'none'}, control from "
          f"{','.join(str(n) for n in options.control_from.networks)}", file=sys.stderr, flush=True)
    try:
        node.serve(sock, stop)
    finally:
        sock.close()
        print("kvpool.server: stopped " + json.dumps(node.summary()), file=sys.stderr, flush=True)
        node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
