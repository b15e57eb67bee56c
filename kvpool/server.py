"""The storage node: a KVP server in front of a storage backend (its own DRAM + disk tiers, or Mooncake Store).

    python -m kvpool.server --port 7420 --capacity BYTES [--disk DIR] [--host ADDR] [--control-from CIDR,...]
    python -m kvpool.server --backend mooncake --mooncake-master HOST:PORT --mooncake-metadata URL ...

What it answers (docs/protocol.md):

* GET → GET_REPLY with status HIT_SERVER and the chunk, or MISS (also when the GET asks for a newer `version`
  than the stored one). Only committed blocks are served. Every GET is counted per key for STAT.
  A span GET (`aux` = k, 2 .. KVP_MAX_GET_SPAN) is answered as k single GETs of chunks chunk_idx .. chunk_idx +
  k - 1, clipped at the stored block's chunk_count: one GET_REPLY each, `req_id` + i and `aux` = i (the offset);
  one MISS (aux 0) when the first chunk is not there; ERR_MALFORMED for a span over KVP_MAX_GET_SPAN. Each
  chunk counts for STAT and in the status counters; `receive` gives all the replies, `handle` the first.
* PUT → staged per writer (source address and port, version) until every chunk of the block has arrived; each
  staged chunk is answered PUT_ACK STAGED at once (progress: `aux` = chunks of the write staged so far), and
  when the last one arrives the block is committed as a whole and every chunk gets its PUT_ACK OK
  (`kvpool.staging`). OK means committed; STAGED never does. A PUT of the committed version with the same bytes is OK again (a resend), with other bytes
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
* Overload: the node drains its socket in batches; GETs and PUTs beyond `--queue-limit` in one batch are
  answered BUSY at once (a header, nothing done), the sources with the most requests queued shed first, so
  readers back off and retry instead of losing requests silently in a full socket buffer. A span GET weighs
  its span and is shed with one BUSY per chunk (as far as its own chunk_count says).
* Replies (GET_REPLY, PUT_ACK, ...) are never answered, so two nodes cannot ping-pong.
* Malformed datagrams (`kvpool.wire.check`) are counted by reason and never applied; when at least the magic
  and `req_id` are there, the node answers ERR_MALFORMED / ERR_UNKNOWN_OP with whatever header fields came.
  A message of another protocol version (a v1 client) is answered ERR_MALFORMED with `aux` = 2, the version
  this node speaks, in a v2 header (its first 20 bytes, up to `prefix_hash`, are laid out as in v1).

The node owns the protocol (staging, the commit rule, verdicts, trust); committed blocks live in a backend
(`kvpool.backends`, docs/storage-backends.md), which stores each commit all or nothing, so the rules above hold
on every backend. `memory` (default): DRAM holds each chunk's bytes (128 B .. 8 KiB), `--capacity` bounds that; the disk tier
is one SQLite file in DIR. `mooncake`: one Mooncake object per committed block version; ERR_FULL when Mooncake
refuses the put, and MISS for blocks Mooncake evicted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import signal
import socket
import struct
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvpool.backends import BACKENDS, open_backend
from kvpool.backends.base import BlockState, ChunkMeta, NewChunk, StorageBackend, StoreUnavailable
from kvpool.backends.mooncake import BackendUnavailable, MooncakeOptions
from kvpool.constants import (
    CONTROL_OPCODES,
    KVP_HEADER_LEN,
    KVP_MAX_CHUNK_SHIFT,
    KVP_MAX_GET_SPAN,
    KVP_MIN_CHUNK_SHIFT,
    KVP_SLOT_SHIFT,
    KVP_UDP_PORT,
    KVP_VERSION,
    REPLIES,
    REPLY_OF,
    Flag,
    Opcode,
    Status,
    Tier,
    tier_bitmap,
)
from kvpool.keys import BlockKey, ChunkKey
from kvpool.staging import CommitLog, Staged, StagedWrite, StagingArea, StagingOptions, WriteKey
from kvpool.trust import DEFAULT_CONTROL_FROM, ControlSources
from kvpool.wire import HEADER, Header, Reason, checked, has_magic, value_of

Address = tuple[str, int]
"""A UDP peer: (IPv4 address, port)."""

LOCAL: Address = ("127.0.0.1", 0)
"""The peer `handle` assumes when its caller gives none: an in-process caller, trusted as loopback is."""

_REPLY_CODE = {int(req): int(rep) for req, rep in REPLY_OF.items()}
"""Request opcode -> reply opcode as plain ints (the datagram's opcode may not be a known Opcode)."""

MAX_DATAGRAM = 65535
"""Largest datagram read (any UDP payload); a KVP message is at most KVP_MAX_MESSAGE (8,236) bytes."""


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """How a storage node runs."""

    host: str = "0.0.0.0"
    """Address to bind (all interfaces: in Mininet the node has one, st1-eth0)."""
    port: int = KVP_UDP_PORT
    """UDP port to serve."""
    capacity: int = 256 << 20
    """Memory backend: DRAM tier size in bytes (the chunk size per chunk). Mooncake: the segment given to the
    pool."""
    disk: Path | None = None
    """Memory backend: folder of the disk tier; None = DRAM only (writes beyond capacity get ERR_FULL)."""
    control_from: ControlSources = field(default_factory=ControlSources.parse)
    """Where controller-only requests (TIER_MOVE) are honoured from; others get ERR_DENIED."""
    staging: StagingOptions = field(default_factory=StagingOptions)
    """Bounds of the writes in progress (`kvpool.staging`)."""
    backend: str = "memory"
    """Where committed blocks live (`kvpool.backends`: "memory" or "mooncake")."""
    mooncake: MooncakeOptions = field(default_factory=MooncakeOptions)
    """How the mooncake backend reaches Mooncake Store (unused by the memory backend)."""
    queue_limit: int = 1024
    """Requests the node takes on from one drain of its socket; GETs and PUTs beyond it are answered BUSY
    (a header, no work) instead of waiting in the socket until the kernel drops them silently. Shed fairly:
    the sources with the most requests queued lose theirs first (`shed`)."""

    def __post_init__(self) -> None:
        if self.queue_limit < 1:
            raise ValueError("queue_limit must be >= 1")


@dataclass(slots=True)
class Datagram:
    """One datagram the node sends; `parts` are sent as one payload (kept apart so a chunk is never copied).
    Read-only by convention (one is built per chunk served: a frozen dataclass would cost more each)."""

    parts: tuple[bytes | memoryview, ...]
    to: Address

    @property
    def data(self) -> bytes:
        return b"".join(self.parts)


_OPCODE = {int(o): o for o in Opcode}
"""Opcode by code, for datagrams `check` let through (a dict lookup instead of an Enum call per request)."""
_OPCODE_NAME = {o: o.name for o in Opcode}
"""The counter each opcode is counted under (an enum member's `name` is a property: slow on the hot path)."""
_GET, _GET_REPLY, _PUT = int(Opcode.GET), int(Opcode.GET_REPLY), int(Opcode.PUT)
_HIT_SERVER, _VALUE = int(Status.HIT_SERVER), int(Flag.VALUE)
_HIT_SERVER_KEY = f"status.{Status.HIT_SERVER.name}"

_REQ_ID_MASK = 0xFFFFFFFF
"""`req_id` is 32 bits: the req_ids of a span's replies (the request's + offset) wrap."""
_AUX = struct.Struct("!I")
"""`aux`, at byte 40 of a header: a GET's span."""

_SHEDDABLE = frozenset({_GET, _PUT})
"""Requests a node over its queue limit answers BUSY: the bulk of the data; control and metadata are cheap."""


def span_of(data: bytes | memoryview) -> int:
    """The chunks a datagram may make the node answer: a GET's span (`aux`, 2 .. KVP_MAX_GET_SPAN); 1 for
    anything else, a single GET, or a GET whose span is out of range (answered ERR_MALFORMED, one reply). What
    a datagram weighs in the queue limit: the most replies its GET brings (fewer where the block ends). Reads
    two fields of bytes that may be anything, and never raises."""
    if len(data) < KVP_HEADER_LEN or data[3] != _GET:
        return 1
    (span,) = _AUX.unpack_from(data, 40)
    return span if 1 < span <= KVP_MAX_GET_SPAN else 1


def shed_over_limit(batch: Sequence[tuple[bytes, Address]], limit: int) -> set[int]:
    """Indices of the datagrams of `batch` to shed so at most `limit` chunks' worth are served, fairly between
    sources: every source address keeps up to an equal share (water-filling: what a source leaves of its share
    goes to the others), and a source over its share loses its newest datagrams. A datagram weighs what
    `span_of` says (a span GET its span, anything else 1). Empty when the batch is within the limit."""
    if len(batch) * KVP_MAX_GET_SPAN <= limit:  # within it whatever the datagrams ask: none is read
        return set()
    weights = [span_of(data) for data, _ in batch]
    if sum(weights) <= limit:
        return set()
    by_source: dict[str, list[tuple[int, int]]] = {}
    for i, (_, peer) in enumerate(batch):
        by_source.setdefault(peer[0], []).append((i, weights[i]))
    counts = sorted(sum(weight for _, weight in queued) for queued in by_source.values())
    share, left, sources = 0, limit, len(counts)
    for n in counts:  # the largest share q with sum(min(count, q)) <= limit
        if n * sources <= left:
            left -= n
            sources -= 1
            share = n
        else:
            share = max(share, left // sources)
            break
    shed: set[int] = set()
    for queued in by_source.values():
        kept = 0
        for n, (_, weight) in enumerate(queued):  # the oldest within the share are kept, every newer one shed
            kept += weight
            if kept > share:
                shed.update(i for i, _ in queued[n:])
                break
    return shed


def _chunk_of(h: Header) -> ChunkKey:
    """The chunk an unpacked header names. Every header the node handles comes from `Header.unpack`, whose
    struct widths are the key's, so it is not checked again (`ChunkKey.from_wire`: the GET path's cost)."""
    return ChunkKey.from_wire(h.tenant, h.prefix_hash, h.chunk_idx)


def _block_of(h: Header) -> BlockKey:
    """The block an unpacked header names (unchecked, as `_chunk_of`)."""
    return BlockKey.from_wire(h.tenant, h.prefix_hash)


class StorageNode:
    """One storage node: `receive(datagram, peer) -> datagrams` is the whole protocol; `serve` adds the socket."""

    def __init__(self, options: StorageOptions, clock: Callable[[], float] = time.monotonic,
                 backend: StorageBackend | None = None) -> None:
        self.options = options
        self.backend = backend if backend is not None else open_backend(
            options.backend, capacity=options.capacity, disk=options.disk, mooncake=options.mooncake)
        """Where committed blocks live (`kvpool.backends`); the node keeps only writes in progress."""
        self.staging = StagingArea(options.staging, clock)
        """Writes whose blocks are not complete yet; never served."""
        self.commits = CommitLog(options.staging, clock)
        self.gets: Counter[tuple[int, int, int]] = Counter()
        """GET requests received per chunk, by (tenant, prefix_hash, chunk_idx) (`gets_of` names one by its
        `ChunkKey`); a tuple, hashed in C, once per chunk a span GET asks for, where a key's hash is a Python
        call."""
        self.counters: Counter[str] = Counter()
        """Requests by opcode name, malformed by reason ("malformed.<reason>"), replies by status name."""
        self._handlers: dict[Opcode, Callable[[Header], tuple[bytes | memoryview, ...]]] = {
            Opcode.TIER_MOVE: self._tier_move,
            Opcode.STAT: self._stat,
            Opcode.INSERT: self._meta,
            Opcode.LOOKUP_META: self._meta,
        }

    def gets_of(self, key: ChunkKey) -> int:
        """GET requests received for chunk `key`, hits and misses (what STAT reports)."""
        return self.gets[(key.tenant, key.prefix_hash, key.chunk)]

    # ---- the protocol ------------------------------------------------------------------------------

    def receive(self, data: bytes, peer: Address) -> list[Datagram]:
        """Everything to send because `data` came from `peer` (nothing, its reply, or the acks of a whole
        block when it completed one, possibly to other writers too). Never raises on input."""
        h = checked(data)
        if isinstance(h, Reason):
            refusal = self._refuse(data, h)
            return [] if refusal is None else [Datagram((refusal,), peer)]
        op = _OPCODE[h.opcode]
        self.counters[_OPCODE_NAME[op]] += 1
        if op in REPLIES:
            return []
        if op in CONTROL_OPCODES and not self.options.control_from.allows(peer[0]):
            self.counters["denied.control_source"] += 1
            return [Datagram((self._reply(h, Status.ERR_DENIED).pack(),), peer)]
        try:
            if h.opcode == _GET:  # first: the hot path (module ints: an Enum member lookup costs 70 ns)
                return self._get(h, peer)
            if h.opcode == _PUT:
                return self._put(h, data, peer)
            handler = self._handlers.get(op)
            if handler is not None:
                return [Datagram(handler(h), peer)]
        except StoreUnavailable:  # the backend cannot tell: decide nothing (a read misses, a write is refused)
            self.counters["store_unavailable"] += 1
            status = Status.ERR_FULL if op == Opcode.PUT else Status.MISS
            return [Datagram((self._reply(h, status).pack(),), peer)]
        return [Datagram((self._reply(h, Status.ERR_DENIED).pack(),), peer)]  # SLOT_WRITE / SLOT_READ: the switch's

    def receive_batch(self, batch: Sequence[tuple[bytes, Address]]) -> list[Datagram]:
        """Everything to send for the datagrams read in one drain of the socket, oldest first: each is
        `receive`d, except the GETs and PUTs over `queue_limit`, which are answered BUSY (`shed`)."""
        shed = shed_over_limit(batch, self.options.queue_limit)
        out: list[Datagram] = []
        for i, (data, peer) in enumerate(batch):
            busy = self._busy(data, peer) if i in shed else None
            if busy is not None:
                out += busy
            else:
                out += self.receive(data, peer)
        return out

    def _busy(self, data: bytes, peer: Address) -> list[Datagram] | None:
        """BUSY for a well-formed GET or PUT (the reply header, nothing done), one per chunk of a span GET as far
        as its own chunk_count says (req_id + i, chunk_idx + i, aux i); None for anything else, which is answered
        as usual (it costs no more than a BUSY would; a GET whose span is out of range is ERR_MALFORMED)."""
        h = checked(data)
        if isinstance(h, Reason) or h.opcode not in _SHEDDABLE or (h.opcode == _GET and h.aux > KVP_MAX_GET_SPAN):
            return None
        span = min(max(h.aux, 1) if h.opcode == _GET else 1, h.chunk_count - h.chunk_idx)  # >= 1: chunk_idx < count
        self.counters["shed.busy"] += span
        return [Datagram((self._reply(h, Status.BUSY, req_id=(h.req_id + i) & _REQ_ID_MASK,
                                      chunk_idx=h.chunk_idx + i, aux=i).pack(),), peer) for i in range(span)]

    def handle(self, data: bytes, peer: Address = LOCAL) -> bytes | None:
        """The reply to this one datagram, for callers that send one request at a time; None when there is none
        (yet: a PUT of a multi-chunk block is answered when its last chunk arrives, use `receive` for those).
        A span GET has a reply per chunk: this is the first one's; `receive` gives them all."""
        out = [d for d in self.receive(data, peer) if d.to == peer]
        mine = [d for d in out if d.parts[0][8:12] == data[8:12] and d.parts[0][20:24] == data[20:24]]
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
        h = Header.unpack(bytes(data[:KVP_HEADER_LEN]).ljust(KVP_HEADER_LEN, b"\0"))
        if h.opcode in REPLIES:
            return None
        opcode = _REPLY_CODE.get(h.opcode, h.opcode)
        self.counters[f"status.{reason.status.name}"] += 1
        aux = 0
        if reason is Reason.BAD_VERSION:  # only magic..prefix_hash share v1's layout: echo those, name ours
            h = Header(h.opcode, tenant=h.tenant, req_id=h.req_id, prefix_hash=h.prefix_hash)
            aux = KVP_VERSION
        elif not KVP_MIN_CHUNK_SHIFT <= h.chunk_shift <= KVP_MAX_CHUNK_SHIFT:
            h = h.replace(chunk_shift=KVP_SLOT_SHIFT)
        return h.replace(opcode=opcode, status=reason.status, flags=0, value_len=0, value_csum=0,
                         aux=aux, ver=KVP_VERSION).pack()

    def _get(self, h: Header, peer: Address) -> list[Datagram]:
        """A single GET (`aux` 0 or 1): its chunk's reply. A span GET (`aux` k, 2 .. KVP_MAX_GET_SPAN): the
        replies to single GETs of its k chunks as far as the stored block goes, the i-th with `req_id` + i and
        `aux` i, or one MISS when the first chunk is not there (or not the version asked)."""
        span = h.aux
        if span > KVP_MAX_GET_SPAN:
            self.counters["malformed.get_span"] += 1
            return [Datagram((self._reply(h, Status.ERR_MALFORMED).pack(),), peer)]
        if span > 1:
            return self._span(h, span, peer)
        self.gets[(h.tenant, h.prefix_hash, h.chunk_idx)] += 1
        found = self.backend.read(_chunk_of(h))
        if found is None:
            return [Datagram((self._reply(h, Status.MISS, version=0).pack(),), peer)]
        chunk, value = found
        if h.version > chunk.version:  # asks for a newer version than we hold
            return [Datagram((self._reply(h, Status.MISS, version=chunk.version).pack(),), peer)]
        return [Datagram(self._hit(h, h.req_id, h.chunk_idx, chunk, value, 0), peer)]

    def _span(self, h: Header, span: int, peer: Address) -> list[Datagram]:
        """A span GET: its chunks read from the backend in one call (`read_span`) and each answered as its
        single GET would be (HIT_SERVER, or MISS for a chunk dropped, of an older version than asked, or that
        the backend cannot read now), packed straight from the request's fields (no `Header` per chunk), the
        counters counted once per span. When the backend cannot tell the span whole, the first chunk is read as
        a single GET would read it (its StoreUnavailable is the request's) and the others one by one."""
        tenant, prefix_hash, first, version, req_id = h.tenant, h.prefix_hash, h.chunk_idx, h.version, h.req_id
        gets = self.gets
        gets[(tenant, prefix_hash, first)] += 1
        try:
            found = self.backend.read_span(_block_of(h), first, min(span, h.chunk_count - first))
        except StoreUnavailable:
            found = [self.backend.read(_chunk_of(h))]
        head = found[0]
        if head is None:
            return [Datagram((self._reply(h, Status.MISS, version=0).pack(),), peer)]
        if version > head[0].version:
            return [Datagram((self._reply(h, Status.MISS, version=head[0].version).pack(),), peer)]
        self.counters["get.span"] += 1
        span = min(span, head[0].chunk_count - first)
        pack, magic, ver = HEADER.pack, h.magic, h.ver
        out: list[Datagram] = []
        hits, read = 0, len(found)
        for i in range(span):
            idx = first + i
            if i:
                gets[(tenant, prefix_hash, idx)] += 1
            if i < read:
                hit = found[i]
            else:  # beyond what was read, as far as the request's count: the stored block has more chunks
                try:
                    hit = self.backend.read(ChunkKey.from_wire(tenant, prefix_hash, idx))
                except StoreUnavailable:
                    self.counters["store_unavailable"] += 1
                    hit = None
            if hit is not None and version <= hit[0].version:
                chunk, value = hit
                out.append(Datagram((pack(magic, ver, _GET_REPLY, _HIT_SERVER, _VALUE, tenant,
                                          (req_id + i) & _REQ_ID_MASK, prefix_hash, idx, chunk.chunk_count,
                                          chunk.value_len, len(value).bit_length() - 1, 0, chunk.version, chunk.csum,
                                          i), value), peer))
                hits += 1
            else:
                out.append(Datagram((self._reply(h, Status.MISS, version=0 if hit is None else hit[0].version,
                                                 req_id=(req_id + i) & _REQ_ID_MASK, chunk_idx=idx,
                                                 aux=i).pack(),), peer))
        self.counters[_HIT_SERVER_KEY] += hits
        return out

    def _hit(self, h: Header, req_id: int, chunk_idx: int, chunk: ChunkMeta, value: bytes | memoryview,
             offset: int) -> tuple[bytes | memoryview, ...]:
        """HIT_SERVER with the stored chunk (header and value apart: the value is never copied)."""
        self.counters[_HIT_SERVER_KEY] += 1
        reply = HEADER.pack(h.magic, h.ver, _GET_REPLY, _HIT_SERVER, _VALUE, h.tenant, req_id, h.prefix_hash,
                            chunk_idx, chunk.chunk_count, chunk.value_len, len(value).bit_length() - 1, 0,
                            chunk.version, chunk.csum, offset)  # `_reply`'s fields, packed at once: the hot path
        return reply, value

    # ---- writes: staged per writer, committed per block ---------------------------------------------

    def _put(self, h: Header, data: bytes, peer: Address) -> list[Datagram]:
        value = value_of(data)
        assert value is not None, "check() lets no PUT without a value through"
        if zlib.crc32(value) != h.value_csum:
            return [Datagram((self._reply(h, Status.ERR_CHECKSUM).pack(),), peer)]
        block = _block_of(h)
        write = WriteKey(peer[0], peer[1], block, h.version)
        if self.commits.committed(write, h.chunk_idx, h.chunk_count, h.value_csum):
            self.counters["put.resend_of_commit"] += 1  # its ack was lost; the block may be newer since
            return [Datagram((self._reply(h, Status.OK, version=h.version).pack(),), peer)]
        state = self.backend.newest(block)
        if state is not None and h.version <= state.version:
            return [self._verdict(h, value, state, peer)]
        staged, pending = self.staging.stage(write, h.chunk_count, h, value)
        if staged is Staged.CONFLICT:
            return [Datagram((self._reply(h, Status.ERR_CONFLICT, version=h.version).pack(),), peer)]
        if staged is Staged.COUNT_MISMATCH:
            self.counters["put.count_mismatch"] += 1
            return [Datagram((self._reply(h, Status.ERR_MALFORMED).pack(),), peer)]
        if staged is Staged.TOO_LARGE:
            self.counters["put.too_large"] += 1
            return [Datagram((self._reply(h, Status.ERR_FULL).pack(),), peer)]
        if not pending.complete:  # progress, so the writer paces itself and resends only what is missing
            return [Datagram((self._reply(h, Status.STAGED, version=h.version, aux=len(pending.chunks)).pack(),),
                             peer)]
        return self._commit(pending)

    def _verdict(self, h: Header, value: bytes, state: BlockState, to: Address) -> Datagram:
        """The ack of a chunk whose version is not newer than the committed one: OK when it is exactly what is
        committed (a resend, or the same bytes from another writer), ERR_CONFLICT when it differs, ERR_STALE
        when it is older or can no longer be compared (dropped by TIER_MOVE)."""
        status = Status.ERR_STALE
        if h.version == state.version:
            found = self.backend.read(_chunk_of(h))
            if found is not None and found[0].version == h.version:
                stored, stored_value = found
                same = (stored.chunk_count == h.chunk_count and stored.value_len == h.value_len
                        and stored.csum == h.value_csum and stored_value == value)
                status = Status.OK if same else Status.ERR_CONFLICT
        return Datagram((self._reply(h, status, version=state.version).pack(),), to)

    def _commit(self, write: StagedWrite) -> list[Datagram]:
        """Make a complete write visible as a whole (or refuse it as a whole); acks for all its chunks, and
        verdicts for the other writers' staged writes of the block that this commit settles."""
        self.staging.remove(write.key)
        chunks = [write.chunks[i] for i in range(write.chunk_count)]
        state = self.backend.newest(write.block)
        if state is not None and write.version <= state.version:  # another write committed first
            return [self._verdict(c.request, c.value, state, write.source) for c in chunks]
        new = [NewChunk(c.request.value_len, c.request.value_csum, c.value) for c in chunks]
        if not self.backend.commit(write.block, write.version, new):
            return [Datagram((self._reply(c.request, Status.ERR_FULL).pack(),), write.source) for c in chunks]
        self.counters["put.committed"] += 1
        self.commits.record(write.key, write.chunk_count, tuple(c.request.value_csum for c in chunks))
        out = [Datagram((self._reply(c.request, Status.OK, version=write.version).pack(),), write.source)
               for c in chunks]
        state = BlockState(write.version, write.chunk_count)
        for other in self.staging.writes_of(write.block):
            if other.version <= write.version:  # can never commit now: settle it instead of letting it expire
                self.staging.remove(other.key)
                out += [self._verdict(c.request, c.value, state, other.source) for c in other.chunks.values()]
        return out

    def expire(self) -> int:
        """Drop staged writes idle for too long (also done on every PUT); how many."""
        return self.staging.expire()

    # ---- control and metadata ------------------------------------------------------------------------

    def _tier_move(self, h: Header) -> tuple[bytes | memoryview, ...]:
        target, score = h.aux & 0xFF, (h.aux >> 8) / 1000
        if target not in {int(t) for t in Tier}:
            return (self._reply(h, Status.ERR_MALFORMED).pack(),)
        target = Tier(target)
        key = _chunk_of(h)
        chunk = self.backend.chunk(key)
        if chunk is None:
            return (self._reply(h, Status.MISS).pack(),)
        if target not in (Tier.ABSENT, Tier.STORAGE_DRAM, Tier.STORAGE_DISK):  # not a storage node's tier
            return (self._reply(h, Status.ERR_DENIED, aux=chunk.tier).pack(),)
        moved = self.backend.move(key, target, score)
        return (self._reply(h, moved.status, aux=moved.tier).pack(),)

    def _stat(self, h: Header) -> tuple[bytes | memoryview, ...]:
        key = _chunk_of(h)
        status = Status.OK if self.backend.chunk(key) is not None else Status.MISS
        return (self._reply(h, status, aux=min(self.gets_of(key), 0xFFFFFFFF)).pack(),)

    def _meta(self, h: Header) -> tuple[bytes | memoryview, ...]:
        chunk = self.backend.chunk(_chunk_of(h))
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
        sock.setblocking(False)  # waits are poll()'s; reads never block, so one drain reads what is queued
        waiting = select.poll()
        waiting.register(sock, select.POLLIN)
        drain = 2 * self.options.queue_limit  # read past the limit, so what is over it can be shed
        recvfrom, sendmsg = sock.recvfrom, sock.sendmsg
        while not stop.is_set():
            if not waiting.poll(poll * 1000):
                self.expire()
                continue
            batch: list[tuple[bytes, Address]] = []
            while len(batch) < drain:  # the queue: what is waiting in the socket now
                try:
                    batch.append(recvfrom(MAX_DATAGRAM))
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    if stop.is_set():
                        return
                    raise
            for out in self.receive_batch(batch):
                try:
                    sendmsg(out.parts, (), 0, out.to)
                except BlockingIOError:  # the send buffer is full: wait for room once, as a blocking send would
                    select.select([], [sock], [], 1.0)
                    try:
                        sendmsg(out.parts, (), 0, out.to)
                    except OSError:
                        self.counters["send_error"] += 1
                except OSError:
                    self.counters["send_error"] += 1

    def summary(self) -> dict[str, object]:
        """Counters and occupancy, for logs and tests."""
        return {**self.backend.summary(),
                "staging": {"writes": len(self.staging), "bytes": self.staging.bytes,
                            "evicted": self.staging.evicted, "expired": self.staging.expired},
                "counters": dict(self.counters)}

    def close(self) -> None:
        self.backend.close()


def parse_args(argv: list[str] | None = None) -> StorageOptions:
    parser = argparse.ArgumentParser(prog="python -m kvpool.server", description="kvswitch storage node (KVP over UDP)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default all)")
    parser.add_argument("--port", type=int, default=KVP_UDP_PORT, help=f"UDP port (default {KVP_UDP_PORT})")
    parser.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0],
                        help="where committed blocks live (default memory; see docs/storage-backends.md)")
    parser.add_argument("--capacity", type=int, default=64 << 20,
                        help="memory: DRAM tier in bytes; mooncake: segment given to the pool (default 64 MiB)")
    parser.add_argument("--disk", type=Path, default=None, help="memory: folder for the disk tier (default: none)")
    mc = MooncakeOptions()
    parser.add_argument("--mooncake-master", default=mc.master, metavar="HOST:PORT",
                        help=f"mooncake: mooncake_master RPC address (default {mc.master})")
    parser.add_argument("--mooncake-metadata", default=mc.metadata, metavar="URL",
                        help=f"mooncake: transfer-engine metadata server (default {mc.metadata})")
    parser.add_argument("--mooncake-hostname", default=mc.local_hostname, metavar="ADDR",
                        help=f"mooncake: address other Mooncake clients reach this node at (default {mc.local_hostname})")
    parser.add_argument("--mooncake-replicas", type=int, default=mc.replicas,
                        help=f"mooncake: replicas per block and per record (default {mc.replicas}; 2 survives a node)")
    parser.add_argument("--mooncake-soft-pin", action="store_true", help="mooncake: soft-pin every block")
    parser.add_argument("--mooncake-namespace", default=mc.namespace,
                        help=f"mooncake: prefix of this pool's Mooncake keys (default {mc.namespace})")
    parser.add_argument("--mooncake-cache", type=int, default=mc.cache_bytes, metavar="BYTES",
                        help=f"mooncake: bytes of fetched blocks cached in the node (default {mc.cache_bytes})")
    parser.add_argument("--mooncake-shared", action="store_true",
                        help="mooncake: other nodes of a steered pool may write this node's blocks (failover): "
                             "re-read each block's record on every request")
    queue_limit = StorageOptions().queue_limit
    parser.add_argument("--queue-limit", type=int, default=queue_limit,
                        help=f"requests taken on per drain of the socket; GETs/PUTs beyond are answered BUSY "
                             f"(default {queue_limit})")
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
    if not 0 <= args.port < 65536 or args.capacity < 0 or args.queue_limit < 1:
        parser.error("--port must be 0..65535, --capacity >= 0 and --queue-limit >= 1")
    try:
        control = ControlSources.parse(args.control_from)
        staging = StagingOptions(args.staging_bytes, args.staging_per_source, args.staging_timeout)
        mooncake = MooncakeOptions(args.mooncake_master, args.mooncake_metadata, args.mooncake_hostname,
                                   replicas=args.mooncake_replicas, soft_pin=args.mooncake_soft_pin,
                                   namespace=args.mooncake_namespace, cache_bytes=args.mooncake_cache,
                                   shared=args.mooncake_shared)
    except ValueError as exc:
        parser.error(str(exc))
    if args.backend != "memory" and args.disk is not None:
        parser.error("--disk is the memory backend's disk tier")
    return StorageOptions(args.host, args.port, args.capacity, args.disk, control, staging, args.backend, mooncake,
                          args.queue_limit)


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        node = StorageNode(options)
    except BackendUnavailable as exc:
        print(f"kvpool.server: {exc}", file=sys.stderr)
        return 1
    try:
        sock = node.bind()
    except OSError as exc:
        print(f"kvpool.server: cannot bind {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"kvpool.server: serving {sock.getsockname()[0]}:{sock.getsockname()[1]}, "
          f"backend {options.backend}, capacity {options.capacity} B, disk {options.disk or 'none'}, control from "
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
