"""The KVP client an inference node uses: whole blocks over plain UDP, chunked, checked, windowed, retried.

    python -m kvpool.client [--server HOST[:PORT]] [--tenant T] [--no-stream] get PREFIX_HASH [--out FILE]
    python -m kvpool.client ... put    PREFIX_HASH --version V (--file F | --data TEXT)
    python -m kvpool.client ... insert PREFIX_HASH [--chunk I] [--depth D] [--tokens N] [--pin]
    python -m kvpool.client ... lookup PREFIX_HASH [--chunk I]
    python -m kvpool.client ... stat   PREFIX_HASH [--chunk I]
    python -m kvpool.client ... hash   --ids 0,14,15        (prefix hashes of trace block ids)

PREFIX_HASH is decimal or 0x-hex. The client talks to one address, the storage node's; a switch on the way
may answer GETs itself (status HIT_SWITCH) and punts INSERT/LOOKUP_META to the controller. Sockets are plain
UDP (no root); messages are packed with `kvpool.wire` (the Scapy layer `kvpool.protocol` describes the same
bytes), and a `kvpool.window.Window` keeps a window of chunk requests in flight, resending only late ones: as
many as the client's congestion window allows (`kvpool.congestion`, DCTCP-style: grown by replies, cut by the
switch's F_CONGESTED marks, by losses and by the storage node's BUSY), paced, with retransmission timers from
the measured round trips (`kvpool.rto`). A block read or write fails only when nothing at all answered for
`give_up` seconds (30 s), never because one request was unlucky a few times (docs/protocol.md, *Transport*).

Reads verify every chunk (CRC, version, count, chunk size) and never stitch two versions: when a newer write
commits during a read, the read starts again at the newer version; chunks go straight into one buffer allocated
once per block. A read of more than one chunk sets F_STREAM on its GETs: a switch may then push it the replies
of the block's other readers that are ahead of it, and while one is, the read asks only for the chunks the stream
does not bring (`kvpool.stream`; docs/protocol.md, *Pushed chunks*); the chunks it missed before joining it asks
for once the stream's first pass ended, sharing them with the other late readers in the stream's patch pass.
Writes keep a window of chunks in flight too: the storage node answers each staged chunk with
PUT_ACK STAGED (progress, the window moves on) and the block's chunks with OK once it committed the whole
block; the write reports success exactly then (OK of any chunk means the whole block committed: commits are
atomic). A resend after a lost ack is acknowledged OK by the node, so a stored write never looks failed.

Blocks travel in chunks of one size per block (protocol v2: 128 B .. 8 KiB): by default 128 B up to 32,640
bytes (switch-cacheable, as in v1), beyond that the largest chunk whose datagram fits the path MTU towards the
server (1 KiB at 1,500 bytes, 8 KiB at 9,000); `--chunk-size` chooses.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvpool.blocks import (
    MAX_BLOCK_LEN,
    BlockError,
    ChecksumError,
    Chunk,
    Reassembly,
    VersionMismatch,
    chunk_count,
    default_chunk_len,
    split,
)
from kvpool.congestion import PACING_BURST, WindowLimits
from kvpool.constants import (
    KVP_MAGIC,
    KVP_MAX_GET_SPAN,
    KVP_SLOT_SHIFT,
    KVP_UDP_PORT,
    KVP_VERSION,
    Flag,
    Opcode,
    Status,
    Tier,
    chunk_shift_of,
    tiers_of,
)
from kvpool.errors import BlockNotFound, KVPError, KVPTimeout
from kvpool.rto import K as RTO_K
from kvpool.rto import RtoBounds
from kvpool.stream import StreamPatience, StreamPosition
from kvpool.transport import Transport, UdpTransport
from kvpool.window import Answer, PathState, Pushed, Window, describe
from kvpool.wire import Header

__all__ = ["BlockNotFound", "BlockRead", "ChunkReply", "ClientOptions", "KVPClient", "KVPError", "KVPTimeout",
           "Meta", "parse_address"]

READ_RESTARTS = 3
"""Times a read starts again at a newer version that committed while it ran, before it gives up."""

@dataclass(frozen=True, slots=True)
class ClientOptions:
    """How a client talks to the pool."""

    server: tuple[str, int] = ("127.0.0.1", KVP_UDP_PORT)
    """The storage node's address: every request goes there (the switch intercepts what it serves)."""
    tenant: int = 0
    """Tenant id, part of every block key."""
    timeout: float = 0.5
    """Seconds before a request's first resend while no round trip was measured yet (the initial RTO; after
    that the RTO comes from the measured round trips, RFC 6298, `kvpool.rto`)."""
    retries: int = 3
    """Resends of a one-request call (STAT, LOOKUP_META, INSERT, TIER_MOVE) before KVPTimeout, so a probe stays
    quick; block reads and writes are bounded by `give_up` instead. For a write: also the rounds resent when
    every chunk was staged but the block never committed."""
    bypass: bool = False
    """Set F_BYPASS on every request: the switch neither answers nor fills (the "no switch pool" baseline)."""
    bind: str = "0.0.0.0"
    """Local address of the socket."""
    window: int = 64
    """Largest congestion window: chunk requests of one block read or write in flight at most (a write's
    chunks leave the window when the storage node answers STAGED). 64: four spans of `get_span` in flight, what
    keeps a switch process, a storage node and this reader busy at once (docs/protocol.md, *Window and span*)."""
    chunk_size: int | None = None
    """Bytes per chunk of written blocks (128, 256, ..., 8192); None: 128 up to 32,640-byte blocks, beyond that
    the largest chunk whose datagram fits the path MTU towards the server (`kvpool.blocks.default_chunk_len`:
    1 KiB at MTU 1500, 8 KiB at 9000)."""
    max_block: int = MAX_BLOCK_LEN
    """Largest block a read accepts, in bytes (a reply announcing more is refused before allocating)."""
    give_up: float = 30.0
    """A block read or write fails (KVPTimeout) only when nothing at all answered for this many seconds; the
    error names the request, the server and what was last heard."""
    congestion_control: bool = True
    """Adapt the window to the path (`kvpool.congestion`: DCTCP-style on F_CONGESTED, halved on loss and BUSY,
    paced); False keeps a fixed window of `window` requests (the behaviour before, for baselines)."""
    get_span: int = 16
    """Most chunks one GET asks for when a read knows its block's chunks are larger than a switch slot (docs/
    protocol.md, *Span GETs*): consecutive chunks leave as one GET, in groups aligned to multiples of this, so a
    chunk costs the switch 1 + 1/16 packets; 1: one GET per chunk (the behaviour before). At most
    KVP_MAX_GET_SPAN (16), the widest span the switch coalesces."""
    initial_window: int = 8
    """Congestion window of a new client (requests), grown from there by slow start."""
    min_rto: float = 0.02
    """Lowest retransmission timeout, seconds."""
    max_rto: float = 4.0
    """Highest retransmission timeout, backoff included: a silent request is resent at least this often."""
    stream: bool = True
    """Set F_STREAM on the GETs of a read of more than one chunk (or of unknown count) and take the chunks a
    switch pushes from the block's stream (docs/protocol.md, *Pushed chunks*); False: never (pushed copies are
    ignored)."""
    immediate_patch: bool = False
    """With a stream: ask for the chunks missed before joining at once, in parallel with the pushes (the
    behaviour before the patch pass: each late reader fetches its missed prefix alone). False (the default): ask
    for them only once the stream's first pass ended (its last chunk came; when pushes stop before, the read
    leads the rest of the first pass first), lowest first, following the stream's patch pass as the first pass
    (docs/protocol.md, *Pushed chunks*)."""

    def __post_init__(self) -> None:
        if self.give_up <= 0 or self.initial_window < 1 or not 0 < self.min_rto <= self.max_rto:
            raise ValueError("give_up must be > 0, initial_window >= 1 and 0 < min_rto <= max_rto")
        if not 1 <= self.get_span <= KVP_MAX_GET_SPAN:
            raise ValueError(f"get_span must be 1 .. {KVP_MAX_GET_SPAN}")


@dataclass(slots=True, unsafe_hash=True)
class ChunkReply:
    """How one chunk of a read was served (read-only by convention: one is built per chunk, and a frozen
    dataclass's construction costs a reader about a microsecond more each)."""

    idx: int
    status: Status
    """HIT_SWITCH or HIT_SERVER."""
    latency: float
    """Seconds from the (last) send to the reply (for a pushed chunk: to the push; 0.0 if never asked)."""
    attempts: int
    """Times the chunk was asked for (a pushed chunk may have been asked 0 times)."""
    pushed: bool = False
    """It came pushed from the block's stream (F_PUSHED), not as the answer to this reader's GET."""


@dataclass(frozen=True, slots=True)
class BlockRead:
    """A block read back whole and verified."""

    data: bytearray
    """The block's bytes: the buffer its chunks were written into as they came, handed over without a copy
    (`kvpool.blocks.Reassembly.take`). A bytearray, not bytes: it compares, slices, hashes with hashlib and
    decodes as bytes do, and it is the caller's own (nothing else refers to it); `bytes(data)` for a hashable
    copy. Copying a 16 MiB block into a bytes object cost a reader 4 µs of CPU per 8 KiB chunk."""
    version: int
    chunks: tuple[ChunkReply, ...]

    @property
    def switch_hits(self) -> int:
        return sum(c.status == Status.HIT_SWITCH for c in self.chunks)

    @property
    def pushed(self) -> int:
        """Chunks that came pushed from the block's stream."""
        return sum(c.pushed for c in self.chunks)


@dataclass(frozen=True, slots=True)
class Meta:
    """INSERT_ACK / LOOKUP_META_REPLY: where a chunk lives."""

    status: Status
    tiers: frozenset[Tier]
    version: int


def parse_address(text: str, default_port: int = KVP_UDP_PORT, *, listening: bool = False) -> tuple[str, int]:
    """"HOST" or "HOST:PORT" -> (host, port); raises ValueError with the reason. The project's one address
    parser. Port 0 means "any free port": only an address to listen on (`listening`) may have it; a destination
    always names a port 1..65535."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    lowest = 0 if listening else 1
    if not host or not port.isdigit() or not lowest <= int(port) < 65536:
        raise ValueError(f"bad address {text!r}: expected HOST[:PORT] with {lowest} ≤ PORT ≤ 65535 (bad port)")
    return host, int(port)


class KVPClient:
    """One transport to the pool (a UDP socket unless given); each call runs its own window of requests."""

    def __init__(self, options: ClientOptions, transport: Transport | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """`clock` times every window's retransmissions (seconds; a test passes a simulated one)."""
        if options.window < 1 or options.retries < 0 or options.timeout <= 0:
            raise ValueError("window must be >= 1, retries >= 0 and timeout > 0")
        self.options = options
        self.transport: Transport = transport if transport is not None else UdpTransport(options.server,
                                                                                          options.bind)
        self.clock = clock
        self._req_ids = itertools.count(random.randrange(1 << 31))
        self.path = PathState.new(RtoBounds(options.timeout, min(options.min_rto, options.max_rto), options.max_rto),
                                  WindowLimits(min(options.initial_window, options.window), options.window),
                                  adaptive=options.congestion_control, pacing=options.congestion_control,
                                  pacing_burst=max(PACING_BURST, options.get_span))
        """Round-trip timers and congestion window towards the server, shared by every call of this client."""
        self.stray_replies = 0
        """Datagrams that answered nothing pending (late duplicates, wrong keys)."""
        self.sent = 0
        """Requests sent, resends included (a span GET counts the chunks it asks for)."""
        self.datagrams = 0
        """Datagrams sent (span GETs merge requests: fewer than `sent`)."""
        self.resent = 0
        """Requests resent because their timer ran out."""
        self.busy = 0
        """BUSY replies: requests the storage node shed (resent after a backoff)."""
        self.spurious = 0
        """Resends proved unneeded (both sends were answered)."""
        self.pushed = 0
        """Pushed chunks taken into a read (docs/protocol.md, *Pushed chunks*)."""
        self.pushed_duplicates = 0
        """Pushed chunks a read already had (ignored)."""
        self.pushed_ignored = 0
        """Pushed copies refused: of another block, version, count or chunk size, or damaged (fetched later)."""
        self.stream_quiet = 0
        """Times a read's stream went quiet (no push for `kvpool.stream.StreamPatience.quiet_rtos` RTOs) and the
        read asked for everything left."""
        self.stream_holes = 0
        """Chunks a read asked for because the stream skipped them (a push lost or late), joins not counted."""
        self.stream_missed = 0
        """Chunks before the points where reads joined a stream (each read's first pushed index of the stream's first
        pass, once it began its patch pass): the prefixes the stream's patch pass brings, or the reads fetched."""

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> KVPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests ---------------------------------------------------------------------------------

    def _window(self, size: int | None = None, tries: int | None = None) -> Window:
        return Window(self.transport, self._req_ids.__next__, self.path, silence=self.options.give_up,
                      tries=tries, cap=size, span=self.options.get_span, clock=self.clock)

    def _done(self, window: Window) -> None:
        self.stray_replies += window.strays
        self.sent += window.sent
        self.datagrams += window.datagrams
        self.resent += window.resent
        self.busy += window.busy
        self.spurious += window.spurious

    def _header(self, opcode: Opcode, prefix_hash: int, chunk_idx: int = 0, chunk_count: int = 1,
                flags: int = 0, **fields: int) -> Header:
        """A request header of this client's tenant (F_BYPASS when asked); req_id is the window's."""
        flags |= Flag.BYPASS if self.options.bypass else 0
        return Header(opcode, flags=flags, tenant=self.options.tenant, prefix_hash=prefix_hash,
                      chunk_idx=chunk_idx, chunk_count=chunk_count, **fields)

    def _one(self, header: Header, value: bytes | None = None, refuse: bool = True) -> Header:
        """One request, retried; its reply. Raises KVPError on a protocol refusal when `refuse`."""
        window = self._window(1, tries=self.options.retries + 1)
        window.submit(0, header, value)
        try:
            reply = next(window.answers()).reply
        finally:
            self._done(window)
        if refuse and reply.status in (Status.ERR_MALFORMED, Status.ERR_UNKNOWN_OP, Status.ERR_DENIED):
            raise KVPError(f"{describe(header)} refused: {_name(reply.status)}", _status(reply.status))
        return reply

    # ---- blocks -------------------------------------------------------------------------------------

    def get_block(self, prefix_hash: int, chunks: int | None = None, version: int = 0) -> BlockRead:
        """Read a whole block, a window of chunk GETs in flight. `chunks` unknown: chunk 0 first, its reply
        tells the count.

        `version` 0 accepts any version, otherwise at least that one; all chunks carry the same version (when a
        newer version commits during the read, the read starts again at it, up to READ_RESTARTS times).
        Raises BlockNotFound on MISS, KVPError on a refusal or an inconsistent block, KVPTimeout.
        """
        target = version
        for _ in range(READ_RESTARTS + 1):
            try:
                return self._read(prefix_hash, chunks, target)
            except VersionMismatch as changed:
                last = changed
                target = max(target, changed.newest)
        raise KVPError(f"GET {prefix_hash:#018x}: {last} after {READ_RESTARTS} restarts", Status.ERR_CHECKSUM)

    def _read(self, prefix_hash: int, chunks: int | None, version: int) -> BlockRead:
        window = self._window()
        read = _BlockRead(self, window, prefix_hash, chunks, version)
        try:
            answered, assembly = read.answered, read.assembly
            for event in window.events():
                if type(event) is Answer:
                    answered(event)
                elif event is None:
                    read.top_up()  # a wake-up: a hole came due, or the stream went quiet
                else:
                    assert isinstance(event, Pushed)
                    read.pushed(event)
                # (`read.streamed`, inline: per chunk; without a stream, the window ends when the block is complete)
                if (read.stream is not None or read.joined_at is not None) and assembly.complete:
                    window.clear()
                    window.wake_at = None
                    break
        finally:
            self._done(window)
        assembly, served = read.assembly, read.served
        return BlockRead(assembly.take(), assembly.version or 0, tuple(served[i] for i in sorted(served)))

    def _accept_chunk(self, window: Window, assembly: Reassembly, answer: Answer, prefix_hash: int) -> bool | None:
        """Verify one GET_REPLY into `assembly`: True for a chunk new to it, False for one it had; None when it
        asked again for a damaged chunk. Raises on a refusal, and VersionMismatch (window cleared) when the block
        changed version under the read."""
        reply = answer.reply
        if reply.status not in _HITS or not answer.value:
            status = _status(reply.status)
            if status == Status.MISS:
                raise BlockNotFound(f"block {prefix_hash:#018x} chunk {reply.chunk_idx}: MISS", Status.MISS)
            raise KVPError(f"{_chunk_read(prefix_hash, reply.chunk_idx)}: unexpected reply {describe(reply)} {_name(reply.status)}", status)
        try:
            return assembly.add(reply.chunk_idx, reply.chunk_count, reply.value_len, answer.value, reply.version,
                                reply.value_csum)
        except VersionMismatch:
            window.clear()
            raise
        except ChecksumError as exc:
            if window.retry(answer):
                return None
            raise KVPError(f"{_chunk_read(prefix_hash, reply.chunk_idx)}: {exc} (from {_name(reply.status)}, {answer.attempts} tries)",
                           Status.ERR_CHECKSUM) from None
        except BlockError as exc:
            raise KVPError(f"{_chunk_read(prefix_hash, reply.chunk_idx)}: {exc} (from {_name(reply.status)})", Status.ERR_CHECKSUM) from None

    def path_mtu(self) -> int | None:
        """The MTU of the path towards the server, when the transport can tell (a UDP socket on Linux)."""
        probe: Callable[[], int | None] | None = getattr(self.transport, "path_mtu", None)
        return probe() if probe is not None else None

    def put_block(self, prefix_hash: int, data: bytes | memoryview, version: int,
                  chunk_size: int | None = None) -> None:
        """Write a whole block at `version` in chunks of `chunk_size` bytes (default: the options', else by block
        size); returns once the storage node committed it (a PUT_ACK OK). Raises KVPError with the refusal's
        status: ERR_STALE (a newer version is stored), ERR_CONFLICT (this version is stored with other bytes),
        ERR_FULL, ...; KVPTimeout when acks stay missing.

        A window of chunks is in flight; a chunk leaves it when the node answers STAGED (staged, not yet
        committed) or OK. When every chunk was staged but no OK came (the node dropped the staged write, say
        after its idle timeout), the whole block is sent again, up to `retries` more rounds."""
        if version <= 0:
            raise ValueError("a written block needs a version > 0 (0 means 'unknown')")
        size = chunk_size or self.options.chunk_size or default_chunk_len(len(data), self.path_mtu())
        try:
            shift = chunk_shift_of(size)
            chunks = split(data, version, size)
        except (BlockError, ValueError) as exc:
            raise KVPError(str(exc)) from None
        for _ in range(self.options.retries + 1):
            if self._put_round(prefix_hash, chunks, version, shift):
                return
        raise KVPTimeout(f"PUT {prefix_hash:#018x} v{version}: every chunk was staged at {self.transport.peer} "
                         f"but the block never committed after {self.options.retries + 1} rounds")

    def _put_round(self, prefix_hash: int, chunks: list[Chunk], version: int, shift: int) -> bool:
        """Send every chunk once (resending late ones); True when the block committed."""
        window = self._window()
        todo = iter(chunks)

        def top_up() -> None:
            while len(window) < 2 * self.options.window and (c := next(todo, None)) is not None:
                window.submit(c.idx, self._header(Opcode.PUT, prefix_hash, c.idx, c.count, version=version,
                                                  chunk_shift=shift), c.value[:c.value_len])

        top_up()
        try:
            for answer in window.answers():
                reply = answer.reply
                if reply.status == Status.OK:
                    window.clear()  # one chunk committed = the whole block committed (atomic commit)
                    return True
                if reply.status != Status.STAGED:
                    window.clear()
                    stored = f" (stored v{reply.version})" if reply.status in (Status.ERR_STALE,
                                                                              Status.ERR_CONFLICT) else ""
                    raise KVPError(f"PUT {prefix_hash:#018x} chunk {reply.chunk_idx} v{version}: "
                                   f"{_name(reply.status)}{stored}", _status(reply.status))
                top_up()
        finally:
            self._done(window)
        return False

    # ---- metadata -----------------------------------------------------------------------------------

    def insert(self, prefix_hash: int, chunk_idx: int = 0, chunk_count: int = 1, depth: int = 0,
               tokens: int = 512, pin: bool = False, version: int = 0, value: bytes | None = None) -> Meta:
        """Announce a chunk and ask for admission to the switch pool; the reply's tiers say where it lives."""
        if not (0 <= depth < 1 << 16 and 0 <= tokens <= 512):
            raise ValueError("depth must be 0..65535 and tokens 0..512")
        header = self._header(Opcode.INSERT, prefix_hash, chunk_idx, chunk_count, Flag.PIN if pin else 0,
                              version=version, aux=depth << 16 | tokens)
        return _meta(self._one(header, value))

    def lookup(self, prefix_hash: int, chunk_idx: int = 0) -> Meta:
        """Where a chunk lives (tier set) and its newest known version."""
        return _meta(self._one(self._header(Opcode.LOOKUP_META, prefix_hash, chunk_idx, chunk_idx + 1)))

    def stat(self, prefix_hash: int, chunk_idx: int = 0) -> int:
        """GETs the storage node received for a chunk."""
        return self._one(self._header(Opcode.STAT, prefix_hash, chunk_idx, chunk_idx + 1)).aux

    def tier_move(self, prefix_hash: int, chunk_idx: int, tier: Tier, score: float = 0.0) -> tuple[Status, Tier]:
        """Ask the storage node to move (or keep, with a score) a chunk; (status, tier it is in now).
        Only the controller's addresses may (`--control-from`); from elsewhere the status is ERR_DENIED."""
        aux = int(tier) | min(int(score * 1000), (1 << 24) - 1) << 8
        reply = self._one(self._header(Opcode.TIER_MOVE, prefix_hash, chunk_idx, chunk_idx + 1, aux=aux),
                          refuse=False)
        status = _status(reply.status)
        if status is None:
            raise KVPError(f"TIER_MOVE: unknown status {reply.status:#04x} in the reply")
        tier_code = reply.aux & 0xFF
        return status, Tier(tier_code) if tier_code in {int(t) for t in Tier} else Tier.ABSENT


_STATUSES = {int(s): s for s in Status}
_GET = int(Opcode.GET)
_HITS = (int(Status.HIT_SWITCH), int(Status.HIT_SERVER))


class _BlockRead:
    """One attempt at reading a block (at one version): which chunks to ask for, and what came.

    Without pushes it asks for the chunks in order, at most two windows queued, as a read always did. From the
    first pushed chunk on, while pushes keep coming and another member of the stream is ahead (`_led`), it asks
    only for the chunks the stream will not bring (the ones before the join and the holes,
    `kvpool.stream.StreamPosition`); while it leads, and when the stream goes quiet, for everything left, in
    order. The chunks before the join wait (unless `immediate_patch`) until the stream's first pass ended (the last
    chunk is here; when pushes stop before, this read leads the rest of the first pass): then the read begins its
    patch pass, a read of what it misses, lowest first, that follows the stream's patch pass
    (its pushes) exactly as the first pass; it begins it after a deferral that is shorter the more it missed, with
    one GET, so the member that missed most (whose missed chunks hold every other's) leads it and the others
    follow."""

    def __init__(self, client: KVPClient, window: Window, prefix_hash: int, chunks: int | None,
                 version: int) -> None:
        self.client = client
        self.window = window
        self.prefix_hash = prefix_hash
        self.tenant = client.options.tenant
        self.chunks = chunks
        """The block's chunk count, once known (`None`: chunk 0's reply will tell)."""
        self.version = version
        self.assembly = Reassembly(version, client.options.max_block)
        self.served: dict[int, ChunkReply] = {}
        self.queued = 2 * client.options.window
        """Requests queued or outstanding at most: two windows, so a block of 2^18 chunks is never queued whole."""
        self.flags = int(Flag.STREAM) if client.options.stream and chunks != 1 else 0  # an int: no enum per GET
        self.get_flags = self.flags | (int(Flag.BYPASS) if client.options.bypass else 0)
        """The flags of this read's GETs (`_header`'s rule)."""
        self.shift = KVP_SLOT_SHIFT  # the responders answer with the block's own chunk size whatever a GET says
        self.todo: Iterator[int] = iter(range(chunks or 1))
        """The chunks still to ask for, in order (without a stream)."""
        self.stream: StreamPosition | None = None
        """What the pushes told, from the first one on."""
        self.asked: set[int] = set()
        """With a stream: the chunks asked for and not answered yet."""
        self.rest: Iterator[int] | None = None
        """With a stream that went quiet, or that this read leads: every chunk in order, those missing are asked
        for."""
        self.own_top = -1
        """The highest chunk this read got new from a reply to its own GET (-1: none yet; in the patch pass, from
        its GETs of the patch pass): while the newest pushed one is above it, another member of the stream is
        ahead and feeds this read."""
        self.carried: set[int] = set()
        """The requests of the first pass still under way when the patch pass began: their replies do not count
        for `own_top` (they say nothing of where this read is in the patch pass)."""
        self.joined_at: int | None = None
        """The first pass's first pushed index, once the patch pass began (None: still in the first pass)."""
        self.patience = StreamPatience(lag=2 * client.options.window)
        """How long it trusts a stream (`kvpool.stream`)."""
        self.holes: Iterator[int] = iter(())
        """In the patch pass: the first pass's holes, asked for at once (the patch pass does not cover them)."""
        self.probe: int | None = None
        """In the patch pass, once its turn came: the one chunk it asked for first (None: none, or its reply came)."""
        self.patch_at: float | None = None
        """When its patch pass, begun, asks for what it missed unless a push of the pass came first (None: at
        once)."""
        self.early: list[Pushed] = []
        """Pushes that came before the read's own first reply (at most `queued`): held until that reply decided
        the block's version, count and chunk size, then taken or ignored as any push."""
        self.top_up()

    @property
    def streamed(self) -> bool:
        """Whether a stream has pushed to this read (in its first pass or in its patch pass)."""
        return self.stream is not None or self.joined_at is not None

    def ask(self, idx: int) -> None:
        """Queue the GET of chunk `idx` (its header built positionally: this is a reader's cost per chunk)."""
        window = self.window
        window.submit_numbered(idx, Header(_GET, 0, self.get_flags, self.tenant, window.new_req_id(), self.prefix_hash,
                                           idx, self.chunks or 1, 0, self.version, 0, 0, KVP_MAGIC, KVP_VERSION,
                                           self.shift))

    def top_up(self) -> None:
        """Ask for what the read needs next, as much as fits in two windows."""
        if self.stream is not None:
            self._top_up_streamed()
            return
        window, todo, ask = self.window, self.todo, self.ask
        if self.patch_at is not None:
            while len(window) < self.queued and (i := next(self.holes, None)) is not None:
                ask(i)
            if self.client.clock() < self.patch_at:
                window.wake_at = self.patch_at
                return
            # Its turn came: one GET first. A member whose turn came within a round trip of the leader's sees the
            # leader's pushes before its own reply and follows; only the one whose reply comes first reads on.
            self.patch_at = None
            self.probe = next(todo, None)
            if self.probe is not None:
                ask(self.probe)
            return
        if self.probe is not None:
            if not self.assembly.has(self.probe):
                return
            self.probe = None
        room = self.queued - len(window)  # (each `ask` queues one: the room counted once, not per chunk)
        while room > 0 and (i := next(todo, None)) is not None:
            ask(i)
            room -= 1

    def answered(self, answer: Answer) -> None:
        """A reply to one of this read's GETs."""
        stream, tag, reply = self.stream, answer.tag, answer.reply
        if stream is not None:
            self.asked.discard(tag)
        new = self.client._accept_chunk(self.window, self.assembly, answer, self.prefix_hash)
        if new is None:
            if stream is not None:
                self.asked.add(tag)  # damaged on the way: asked again
            return
        if new and tag > self.own_top and tag not in self.carried:
            self.own_top = tag
        self.served[tag] = ChunkReply(tag, _STATUSES[reply.status], answer.latency, answer.attempts)
        if self.chunks is None:
            self._learn_count(reply)
        elif reply.chunk_shift != self.shift and not self.streamed:
            self._learn_shift(reply.chunk_shift)
        if self.early:
            # Before asking for more: a late reader's held pushes say it is in a stream (and where it joined), so it
            # does not ask for the chunks before its join now, only in the patch pass, which the member that missed
            # most leads: each late reader's first window, read alone, cost the node (N - 2) x a span more.
            early, self.early = self.early, []
            for held in early:
                if not self.assembly.complete:
                    self.pushed(held)
        self.top_up()

    def _learn_count(self, reply: Header) -> None:
        if self.assembly.count:  # the first chunk tells count and size
            self.chunks, self.shift = self.assembly.count, reply.chunk_shift
            self.todo = iter(range(1, self.chunks))

    def _learn_shift(self, shift: int) -> None:
        """The first reply told the block's chunk size (the read knew its count, not its size): the GETs still
        queued are asked again with it, so those of chunks larger than a slot leave in spans (`Window`)."""
        self.shift = shift
        for idx in self.window.withdraw(lambda _: True):
            self.ask(idx)

    # ---- the stream -------------------------------------------------------------------------------------

    def pushed(self, pushed: Pushed) -> None:
        """A chunk a switch pushed: taken if it is one of this block's, checked, and not had yet; else counted
        and ignored (a damaged one is asked for later, as any missing chunk). A push never decides the block's
        version, count or chunk size: one that comes before the read's own first reply is held (`early`) until
        that reply decided them. A late reader joins the stream with its first GET, so the pushes of a round trip
        come before its first reply; ignored, each was a chunk beyond every other member's join point, fetched
        by this reader alone."""
        client, reply, assembly = self.client, pushed.reply, self.assembly
        if (not self.flags or reply.prefix_hash != self.prefix_hash or reply.tenant != self.tenant
                or reply.status not in _HITS):
            client.pushed_ignored += 1
            return
        if assembly.version is None:
            if len(self.early) < self.queued:
                self.early.append(Pushed(reply, bytes(pushed.value)))  # (the value is a view of the transport's buffer)
            else:
                client.pushed_ignored += 1
            return
        idx = reply.chunk_idx
        if assembly.has(idx):
            client.pushed_duplicates += 1
            if self.stream is not None:
                self.stream.pushed(idx, client.clock())  # the stream is alive, and where it says
            elif self.joined_at is not None and idx < self.joined_at:
                self._join(idx, client.clock())  # the patch pass has a leader: follow it (nothing to take)
            return
        try:
            assembly.add(idx, reply.chunk_count, reply.value_len, pushed.value, reply.version, reply.value_csum)
        except BlockError:  # another version, count or chunk size, or damaged: never restarts the read
            client.pushed_ignored += 1
            return
        client.pushed += 1
        now = client.clock()
        self.window.progress(reply)
        if self.stream is not None:
            self.stream.pushed(idx, now)
        elif self.joined_at is None or idx < self.joined_at:
            self._join(idx, now)
        # (else a first-pass push that came after this read began its patch pass: taken, it leads nothing)
        cancelled = self.window.cancel(idx) if idx in self.asked else None
        self.asked.discard(idx)
        self.served[idx] = ChunkReply(idx, _STATUSES[reply.status], cancelled.waited if cancelled else 0.0,
                                      cancelled.attempts if cancelled else 0, pushed=True)
        if not assembly.complete:
            self.top_up()

    def _join(self, idx: int, now: float) -> None:
        """The first push (of a pass): from now on the stream says what to ask for; queued GETs beyond it are taken
        back (in the first pass, unless `immediate_patch`, all of them: those below it wait for the pass's end)."""
        missed = idx if self.joined_at is None else self.joined_at
        self.patch_at = self.probe = None
        self.stream = StreamPosition(idx, now, self.patience,
                                     self.patience.defer_for(missed, self.chunks or 1))
        # From the first push on, one GET per chunk (docs/protocol.md, *Span GETs*): members that race for the lead
        # then race per chunk, not per span. A span's replies come together, so a member behind by one span that
        # wins the next race jumps past the newest push and leads again; both leading costs the node both reads
        # (two readers in step, no coalescing: 1.63 blocks in spans against 1.06-1.24 per chunk). A leader nobody
        # pushes to keeps its spans.
        self.window.span = 1
        self.asked = self.window.waiting()
        every = not self._patches_now
        self.asked.difference_update(self.window.withdraw(lambda i: every or i > idx))

    @property
    def _patches_now(self) -> bool:
        """Whether the chunks before the join are asked for at once: with `immediate_patch`, or in the patch pass."""
        return self.client.options.immediate_patch or self.joined_at is not None

    def _first_pass_ended(self, stream: StreamPosition) -> bool:
        """Whether to begin the patch pass: chunks before the join are missing and the first pass is over: its last
        chunk is here. When pushes stop before (the member ahead stalled or died), this read leads the rest of the
        first pass (below, `rest` from the join on): its replies beyond the front feed the others, and it patches
        once it has the last chunk, as they do; a stall under load then costs no patch the others cannot share."""
        if self._patches_now or stream.first == 0:
            return False
        return self.assembly.has((self.chunks or 1) - 1)

    def _begin_patch_pass(self, stream: StreamPosition) -> None:
        """Read what is missing as a read without pushes does, lowest first (requests under way stay), until the
        patch pass's first push: from then on it follows the stream as in the first pass."""
        self.joined_at, self.own_top = stream.first, -1
        self.client.stream_missed += stream.first
        self.stream, self.rest, self.asked = None, None, set()
        waiting, has, joined = self.window.waiting(), self.assembly.has, self.joined_at
        # The first pass's holes (at or beyond the join: the patch pass does not cover them) are asked for at once;
        # their replies say nothing of where this read is in the patch pass (`carried`).
        holes = [i for i in range(joined, self.chunks or 1) if not has(i) and i not in waiting]
        self.carried = waiting | set(holes)
        self.holes = iter(holes)
        self.todo = itertools.chain(self.holes, (i for i in range(joined) if not has(i) and i not in waiting))
        self.window.wake_at = None
        # Every late member learns the first pass ended at about the same moment: the one that missed most starts
        # first, the others wait for its pushes (`StreamPatience.defer_for`), so its replies, not a burst of
        # everyone's GETs of the same chunks, lead the patch pass, and nobody has to take over from it.
        # In `min_rto`s, not this read's own RTO: the same unit for every member (with default options), so the
        # deferrals order the members by what they missed whatever each one measured of its path, and when it
        # measured it (a member that joined later, with more copies made per reply, measured longer round trips).
        unit = self.client.options.min_rto
        self.patch_at = self.client.clock() + self.patience.defer_for(joined, self.chunks or 1) * unit
        self.top_up()

    def _led(self, newest: int) -> bool:
        """Whether another member of the stream is ahead of this read: the newest pushed chunk is above every
        chunk its own GETs brought (docs/protocol.md, *Pushed chunks*). Then it feeds this read, which asks
        for nothing beyond it; otherwise this read leads (or the stream is behind it: it opened after this read
        had got further) and reads on in order, its replies beyond the stream's front pushed to the others. A
        follower whose own replies overtake the newest push leads from then on: no two members can both wait
        for the other for long (the one with the higher own reply is not led), and a quiet stream ends the
        wait anyway. Once the last chunk came pushed, nothing more will: this read asks for all it misses."""
        return self.own_top < newest < (self.chunks or 1) - 1

    def _stream_rto(self) -> float:
        """The RTO the stream's patience counts in: the path's, without the floor that spurious timeouts raised. A
        reply of its own that came late says the path was slow once, not that the member ahead stopped; in the
        patch pass the members ahead stop one after the other (each once it has what it missed), and each of those
        handovers waits this out. A push merely late costs a few GETs the stream would have brought."""
        estimate = self.client.path.rto
        if estimate.srtt is None:
            return estimate.rto
        return min(estimate.rto, max(estimate.bounds.minimum, estimate.srtt + RTO_K * estimate.rttvar))

    def _top_up_streamed(self) -> None:
        stream, window = self.stream, self.window
        assert stream is not None
        now = self.client.clock()
        rto = self._stream_rto()
        room = self.queued - len(window)
        asked, has = self.asked, self.assembly.has

        def missing(i: int) -> bool:
            return not has(i) and i not in asked

        live = stream.live(now, rto)
        if self._first_pass_ended(stream):
            self._begin_patch_pass(stream)
            return
        if live and self._led(stream.newest):
            if self.rest is not None:  # pushes came again after a quiet spell: stop asking beyond them
                self.rest = None
                asked.difference_update(window.withdraw(lambda i: i > stream.newest))
            for i in stream.due(now, rto, missing, room, self._patches_now):
                self.ask(i)
                asked.add(i)
                self.client.stream_holes += i > stream.first
            wake, hole_due = stream.quiet_at(rto), stream.next_due(rto)
            window.wake_at = hole_due if hole_due is not None and now < hole_due < wake else wake
            return
        # the stream ended, or this read leads it (its own replies reach as far as the pushes, or further): everything
        # left, in order, as without one (in the first pass, unless it patches now, from the join: the chunks
        # before it wait for the pass's end)
        window.wake_at = stream.quiet_at(rto) if live else None
        if self.rest is None:
            self.client.stream_quiet += not live
            self.rest = iter(range(0 if self._patches_now else stream.first, self.chunks or 1))
        rest = self.rest
        while room > 0 and (left := next(rest, None)) is not None:
            if missing(left):
                self.ask(left)
                asked.add(left)
                room -= 1


def _chunk_read(prefix_hash: int, chunk_idx: int) -> str:
    """How an error names the GET of one chunk (formatted only for an error: per chunk it was a reader's cost)."""
    return f"GET {prefix_hash:#018x} chunk {chunk_idx}"


def _status(code: int) -> Status | None:
    """The Status of a reply's code, None for a code the protocol does not define (a dict lookup: per chunk)."""
    return _STATUSES.get(code)


def _meta(reply: Header) -> Meta:
    status = _status(reply.status)
    if status is None:
        raise KVPError(f"unknown status {reply.status:#04x} in {describe(reply)}")
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
    parser.add_argument("--timeout", type=float, default=0.5,
                        help="seconds before a first resend until a round trip was measured (initial RTO)")
    parser.add_argument("--retries", type=int, default=3, help="resends of a STAT, LOOKUP_META, INSERT or TIER_MOVE")
    parser.add_argument("--give-up", type=float, default=30.0,
                        help="a block read or write fails after this many seconds without any reply (default 30)")
    parser.add_argument("--bypass", action="store_true", help="set F_BYPASS (switch must not answer)")
    defaults = ClientOptions()
    parser.add_argument("--window", type=int, default=defaults.window,
                        help=f"chunk requests in flight per block read or write (default {defaults.window})")
    parser.add_argument("--get-span", type=int, default=defaults.get_span,
                        help="most chunks one GET asks for, for blocks of chunks larger than 128 B (1: one per GET; "
                             f"default {defaults.get_span})")
    parser.add_argument("--no-stream", action="store_true",
                        help="do not set F_STREAM on GETs (never join a block's stream; pushed chunks are ignored)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="bytes per chunk of written blocks: 128, 256, ..., 8192 (default: 128 up to "
                             "32,640-byte blocks, beyond that the largest chunk the path MTU carries)")
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
    options = ClientOptions(parse_address(args.server), args.tenant, args.timeout, args.retries, args.bypass,
                            window=args.window, chunk_size=args.chunk_size, give_up=args.give_up,
                            stream=not args.no_stream, get_span=args.get_span)
    with KVPClient(options) as client:
        if args.command == "get":
            block = client.get_block(args.prefix_hash, args.chunks, args.version)
            lines = [f"block {args.prefix_hash:#018x} v{block.version}: {len(block.data)} bytes in "
                     f"{len(block.chunks)} chunks ({block.pushed} pushed)"]
            lines += [f"  chunk {c.idx}: {c.status.name} {c.latency * 1e6:.0f} µs ({c.attempts} tries)"
                      f"{' pushed' if c.pushed else ''}" for c in block.chunks]
            if args.out:
                args.out.write_bytes(block.data)
            else:
                lines.append(block.data.hex())
            return "\n".join(lines)
        if args.command == "put":
            data = args.file.read_bytes() if args.file else args.data.encode()
            client.put_block(args.prefix_hash, data, args.version)
            size = args.chunk_size or default_chunk_len(len(data), client.path_mtu())
            return (f"stored {len(data)} bytes as {args.prefix_hash:#018x} v{args.version} in "
                    f"{chunk_count(len(data), size)} chunks of {size} bytes")
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
