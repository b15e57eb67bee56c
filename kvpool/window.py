"""A window of KVP requests in flight: sent as the congestion window allows, matched by req_id, resent when late.

Block reads and writes move many chunks; one round trip per chunk caps a client at a few MB/s. The window keeps
requests outstanding, as many as the client's congestion window allows (`kvpool.congestion`: grown by replies,
cut by F_CONGESTED marks, losses and BUSY), paced over a round trip, each with its own timer from the measured
round trip (`kvpool.rto`, RFC 6298, backed off per resend). A request whose timer runs out is presumed lost: it
leaves the window's count of requests in flight and is resent first when there is room, reusing its req_id so a
late first reply still counts. A BUSY reply (the storage node shed the request) is not an answer: the request
is resent after a backoff, and never counts as a try.

When a request fails is the window's other rule: a block read or write fails only when **nothing at all** has
answered for `silence` seconds (the client's `give_up`), never because one request was unlucky several times in
a row: under independent loss some request always is, in a block of thousands (docs/protocol.md, *Transport*).
One-request calls (STAT, LOOKUP_META, ...) may also bound their tries (`tries`), so a liveness probe stays quick.

It knows nothing of blocks: the caller tags each request (the chunk index), reads `Answer`s as they come, and
may submit more, ask for a resend (a reply that failed verification), or clear everything (a restart).

Span GETs (docs/protocol.md, *Span GETs*): with a `span` above 1, GETs of consecutive chunks of one block that were
submitted one after the other (so their req_ids are consecutive) leave as ONE datagram asking for all of them
(`aux` = how many); the storage node answers each chunk with req_id + its offset, so every chunk keeps its own
request here: its own timer, loss detection, resend (alone) and congestion accounting. A span ends at a multiple
of `span` (chunk indexes), so readers of one block send the same span GETs and the switch can coalesce them. Only
chunks larger than a switch slot are asked in spans (the switch answers slot-sized chunks one GET at a time).

A reader of a block's stream (docs/protocol.md, *Pushed chunks*) reads `events()` instead: besides `Answer`s, the
well-formed GET_REPLYs a switch pushed (F_PUSHED, `req_id` 0, answering nothing) come as `Pushed`, and a `None`
when the caller's `wake_at` time came; it may `cancel` a request a pushed copy made unneeded and `withdraw` queued
ones. A pushed copy is no reply of this window: it takes no round-trip sample, grows or cuts no congestion
window, and keeps no request from timing out; only the caller says when one counts as progress (`progress`).
req_id 0 is never given to a request, so a pushed copy can never be taken for an answer.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kvpool.congestion import PACING_BURST, CongestionWindow, Pacer, WindowLimits
from kvpool.constants import KVP_HEADER_LEN, KVP_MAX_GET_SPAN, KVP_SLOT_SHIFT, REPLY_OF, Flag, Opcode, Status
from kvpool.errors import KVPTimeout
from kvpool.rto import RtoBounds, RtoEstimator
from kvpool.transport import Transport
from kvpool.wire import HEADER, Header, Reason, checked, encode

_REPLY_CODE = {int(req): int(rep) for req, rep in REPLY_OF.items()}
REORDERING = 1 / 4
"""A request counts as lost when one sent this fraction of SRTT after it was answered (RACK's reo_wnd)."""
MIN_REORDERING = 0.001
"""Seconds: the least reordering window, so requests sent in one burst never count each other lost."""
RESENDS_REMEMBERED = 4096
"""Answered resends remembered to recognise their duplicate replies (spurious resends)."""
DAMAGED_REPLIES = 4
"""Replies of one request that failed the caller's checks (`Window.retry`) before it gives up on it."""
_BUSY = int(Status.BUSY)
_CONGESTED = int(Flag.CONGESTED)
_VALUE = int(Flag.VALUE)
_PUSHED = int(Flag.PUSHED)
_GET_REPLY = int(Opcode.GET_REPLY)
_GET = int(Opcode.GET)
_AUX = slice(40, 44)
"""Bytes of `aux` in a header (docs/protocol.md): a span GET's chunk count."""
PUSHED_REQ_ID = 0
"""The req_id of every pushed copy; never given to a request."""


def answers(reply: Header, request: Header) -> bool:
    """Whether `reply` is the reply to `request`: its reply opcode, same req_id and block-chunk key (compared
    field by field: building two checked `ChunkKey`s per reply was a fifth of a reader's time per chunk)."""
    return (reply.opcode == _REPLY_CODE.get(request.opcode) and reply.req_id == request.req_id
            and reply.chunk_idx == request.chunk_idx and reply.prefix_hash == request.prefix_hash
            and reply.tenant == request.tenant)


def _with_req_id(h: Header, req_id: int) -> Header:
    """`h` with another req_id (what `Header.replace` does, without `dataclasses.replace`'s cost per chunk)."""
    return Header(h.opcode, h.status, h.flags, h.tenant, req_id, h.prefix_hash, h.chunk_idx, h.chunk_count,
                  h.value_len, h.version, h.value_csum, h.aux, h.magic, h.ver, h.chunk_shift)


def _datagram(item: _Outstanding) -> bytes:
    """What `item` sends: its datagram, or its header packed now when it is the header alone."""
    return item.data or item.header.pack()


def describe(h: Header) -> str:
    """A short text of a header for error messages."""
    try:
        op = Opcode(h.opcode).name
    except ValueError:
        op = f"op{h.opcode:#04x}"
    return f"{op} ph={h.prefix_hash:#018x} chunk={h.chunk_idx}/{h.chunk_count} v={h.version} req={h.req_id}"


def _status_name(code: int) -> str:
    try:
        return Status(code).name
    except ValueError:
        return f"status {code:#04x}"


@dataclass(slots=True)
class _Outstanding:
    tag: int
    header: Header
    data: bytes
    """The datagram, or b"" for a request that is its header alone: packed when it is sent alone (`_datagram`; a
    span GET sends its first request's header only, so its other members are never packed)."""
    attempts: int = 0
    """Times sent (BUSY resends included)."""
    busy: int = 0
    """BUSY replies received: those sends are not tries."""
    sent_at: float = 0.0
    first_sent_at: float = 0.0
    deadline: float = 0.0
    in_flight: bool = False
    """Counted in the window: sent, not answered, not presumed lost."""
    seq: int = 0
    """The send's number in this window (later sends, higher numbers)."""
    done: bool = False
    """Answered (or cleared): a copy left in a resend queue is skipped."""


@dataclass(slots=True)
class Answer:
    """A reply matched to its request (read-only by convention: not a frozen dataclass, whose construction costs
    a microsecond more, once per chunk a reader reads)."""

    tag: int
    """What the caller tagged the request with (a chunk index)."""
    request: Header
    reply: Header
    value: bytes | memoryview
    """The reply's value bytes (`1 << chunk_shift`, padding included) when F_VALUE is set, else b"" (a view
    into the datagram: no copy; valid until the transport's next `recv`, as the datagram is: copy to keep it)."""
    latency: float
    """Seconds from the last send of the request to this reply."""
    attempts: int
    """Times the request was sent."""
    malformed: bool
    """The reply breaks the validity rules (still delivered: a refusal may echo a malformed request)."""
    sent: bytes
    """The request as sent (for a resend); b"" for a request that is its header alone (`request.pack()`)."""


@dataclass(slots=True)
class Pushed:
    """A GET_REPLY a switch pushed to this reader (F_PUSHED, req_id 0): well-formed (`kvpool.wire.check`) with a
    value, not yet checked against any block (that is the reader's part). Read-only by convention (per chunk,
    as `Answer`)."""

    reply: Header
    value: bytes | memoryview
    """The chunk (`1 << chunk_shift` bytes, padding included; a view into the datagram, valid until the
    transport's next `recv`: copy to keep it)."""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """A request a pushed copy made unneeded (`Window.cancel`)."""

    attempts: int
    """Times it had been sent (0: still queued)."""
    waited: float
    """Seconds since its last send (0.0 when never sent)."""


@dataclass(slots=True)
class PathState:
    """What a client knows of its path to the storage node, shared by its windows: timers and congestion."""

    rto: RtoEstimator
    congestion: CongestionWindow
    pacer: Pacer
    resent_answered: dict[int, float] = field(default_factory=dict)
    """req_ids of resent requests that were answered, oldest first, each with the wait from its first send to its
    first reply: a later duplicate reply proves the resend was not needed, and that the path may take that long
    (`RtoEstimator.spurious`; recognised by any window of the client, the duplicate may come after its call ended)."""

    @classmethod
    def new(cls, rto: RtoBounds | None = None, limits: WindowLimits | None = None, adaptive: bool = True,
            pacing: bool = True, pacing_burst: int = PACING_BURST) -> PathState:
        """`pacing_burst`: requests that may leave ahead of the paced rate; at least a span GET's chunks, or every
        span waits for its credit after the one before (docs/protocol.md, *Window and span*)."""
        return cls(RtoEstimator(rto), CongestionWindow(limits, adaptive), Pacer(burst=pacing_burst if pacing else 1 << 30))


class Window:
    """Requests in flight over one transport, as many as `path.congestion` allows (at most `cap`)."""

    def __init__(self, transport: Transport, next_req_id: Callable[[], int], path: PathState, *,
                 silence: float = 30.0, tries: int | None = None, cap: int | None = None, span: int = 1,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if silence <= 0 or (tries is not None and tries < 1) or (cap is not None and cap < 1):
            raise ValueError("a window needs silence > 0, tries >= 1 and cap >= 1")
        if not 1 <= span <= KVP_MAX_GET_SPAN:
            raise ValueError(f"a GET's span is 1 .. {KVP_MAX_GET_SPAN}, not {span}")
        self.transport = transport
        self.span = span
        """Most chunks one GET asks for (1: one GET per chunk)."""
        self.path = path
        self.silence = silence
        self.tries = tries
        self.cap = cap
        self._next_req_id = next_req_id
        self._clock = clock
        self._queue: deque[_Outstanding] = deque()
        """Submitted, never sent."""
        self._resend: deque[_Outstanding] = deque()
        """Presumed lost or damaged: sent again before anything new."""
        self._delayed: list[tuple[float, int, _Outstanding]] = []
        """Shed with BUSY: (not before, seq, item), resent after their backoff."""
        self._pending: dict[int, _Outstanding] = {}
        """Sent and unanswered, by req_id (late replies to presumed-lost requests still match)."""
        self._timers: list[tuple[float, int, int]] = []
        """(deadline, send seq, req_id) of every send; stale ones are skipped."""
        self._seq = 0
        self._order: deque[tuple[int, _Outstanding]] = deque()
        """(seq, item) of every send, oldest first: the order losses are detected in (`_detect_losses`)."""
        self._answered_at = float("-inf")
        """When the latest reply to a request of this window came."""
        self._delivered_sent_at = float("-inf")
        """When the most recently sent request that was answered was sent (RACK's RACK.xmit_ts)."""
        self._in_flight = 0
        self._losses_due = False
        """A reply moved `_delivered_sent_at` on: look for losses once the burst is read."""
        self.submitted = 0
        self.sent = 0
        """Requests sent, resends included (a span GET sends one per chunk it asks for)."""
        self.datagrams = 0
        """Datagrams sent: `sent` less what span GETs merged."""
        self.resent = 0
        """Requests presumed lost and resent (timer ran out, or a later request was answered first); BUSY
        resends not included."""
        self.busy = 0
        """BUSY replies received."""
        self.strays = 0
        """Datagrams that answered nothing outstanding (late duplicates, replies to cleared requests)."""
        self.spurious = 0
        """Resends proved unneeded: the request's second reply came too (the cut was undone, `kvpool.rto`)."""
        self.wrong: list[str] = []
        """Replies with our req_id that did not answer the request (wrong key or opcode)."""
        self._heard_at: float | None = None
        self._last_heard: Header | None = None
        self._damaged: Counter[int] = Counter()
        self.wake_at: float | None = None
        """`events()` yields None once the clock reaches this (then clears it), and until then keeps receiving even
        with nothing queued or outstanding (a reader waiting for pushed chunks); None: no wake-up."""
        self.pushed = 0
        """Pushed copies delivered by `events()` (well-formed GET_REPLYs with F_PUSHED and req_id 0)."""
        self._take_pushed = False

    @property
    def size(self) -> int:
        """Requests that may be in flight now (the congestion window, within `cap`)."""
        size = self.path.congestion.size
        return size if self.cap is None else min(size, self.cap)

    def new_req_id(self) -> int:
        """A req_id for a request of this window (never PUSHED_REQ_ID)."""
        req_id = self._next_req_id() & 0xFFFFFFFF
        if req_id == PUSHED_REQ_ID:
            req_id = self._next_req_id() & 0xFFFFFFFF
        return req_id

    def submit(self, tag: int, header: Header, value: bytes | memoryview | None = None) -> Header:
        """Queue a request (its req_id is assigned here); it is sent when the window has room."""
        return self.submit_numbered(tag, _with_req_id(header, self.new_req_id()), value)

    def submit_numbered(self, tag: int, header: Header, value: bytes | memoryview | None = None) -> Header:
        """`submit` a request whose header already carries a req_id from `new_req_id` (a reader builds its GET's
        header once, not twice: per chunk)."""
        self._queue.append(_Outstanding(tag, header, b"" if value is None else encode(header, value)))
        self.submitted += 1
        return header

    def retry(self, answer: Answer) -> bool:
        """Send `answer`'s request again (its reply failed the caller's checks); False when out of tries, or when
        its replies failed `DAMAGED_REPLIES` times (a reply damaged every time is not loss: resending cannot help)."""
        self._damaged[answer.tag] += 1
        if (self.tries is not None and answer.attempts >= self.tries) or self._damaged[answer.tag] >= DAMAGED_REPLIES:
            return False
        item = _Outstanding(answer.tag, answer.request, answer.sent, answer.attempts)
        self._pending[answer.request.req_id] = item
        self._resend.appendleft(item)
        return True

    def clear(self) -> None:
        """Forget every queued and outstanding request; their late replies count as strays."""
        for item in self._pending.values():
            item.done = True
        self._queue.clear()
        self._resend.clear()
        self._delayed.clear()
        self._pending.clear()
        self._timers.clear()
        self._order.clear()
        self._in_flight = 0

    def cancel(self, tag: int) -> Cancelled | None:
        """Forget the queued or outstanding request tagged `tag` (a pushed copy brought its chunk): out of the
        window's count without any signal to the timers or the congestion window; its late reply counts as a
        stray. None when no such request is waiting."""
        for req_id, item in self._pending.items():
            if item.tag == tag and not item.done:
                del self._pending[req_id]
                item.done = True
                if item.in_flight:
                    item.in_flight = False
                    self._in_flight -= 1
                return Cancelled(item.attempts, self._clock() - item.sent_at)
        for item in self._queue:
            if item.tag == tag:
                self._queue.remove(item)
                return Cancelled(0, 0.0)
        return None

    def withdraw(self, unwanted: Callable[[int], bool]) -> list[int]:
        """Take back the queued requests, never sent, whose tag is `unwanted`; their tags, in queue order."""
        taken = [item.tag for item in self._queue if unwanted(item.tag)]
        if taken:
            self._queue = deque(item for item in self._queue if not unwanted(item.tag))
        return taken

    def waiting(self) -> set[int]:
        """Tags of the requests queued or outstanding."""
        return {item.tag for item in self._queue} | {item.tag for item in self._pending.values()}

    def progress(self, reply: Header) -> None:
        """The caller took `reply` (a pushed chunk) as progress: the silence bound counts from now."""
        self._heard_at = self._clock()
        self._last_heard = reply

    def __len__(self) -> int:
        """Requests queued or outstanding."""
        return len(self._queue) + len(self._pending)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._pending

    # ---- sending ----------------------------------------------------------------------------------------

    def _send(self, item: _Outstanding, now: float, first_rto: float | None = None) -> None:
        """Account for one send of `item` (the caller sends the datagram); `first_rto`: the RTO of a first try,
        when the caller (a span of fresh requests) computed it once for all."""
        item.attempts += 1
        item.sent_at = now
        if item.attempts == 1:
            item.first_sent_at = now
        tries = item.attempts - item.busy
        item.deadline = now + (first_rto if first_rto is not None and tries == 1 else self.path.rto.backoff(tries))
        item.in_flight = True
        self._in_flight += 1
        req_id = item.header.req_id
        self._pending[req_id] = item
        self._seq += 1
        item.seq = self._seq
        self._order.append((self._seq, item))
        heapq.heappush(self._timers, (item.deadline, self._seq, req_id))
        self.sent += 1

    def _send_one(self, item: _Outstanding, now: float) -> None:
        self._send(item, now)
        self.transport.send(_datagram(item))
        self.datagrams += 1

    def _span_now(self) -> int:
        """The span GETs are asked in now: `span`, or while the window holds fewer than two spans (after losses, or
        at the start) the largest power of two that half the window holds. A span waits for room for all its
        chunks: a span as large as the window would leave the path idle for a round trip each time."""
        half = self.size // 2
        if half >= self.span:
            return self.span
        return 1 << (max(half, 1).bit_length() - 1)

    def _span_wanted(self, h: Header, span: int) -> int:
        """How many chunks a span GET led by the request `h` would ask for: up to the next multiple of `span` (or
        the block's end); 1 when `h` cannot lead one (not a GET, or a chunk a switch slot holds)."""
        if h.opcode != _GET or h.chunk_shift <= KVP_SLOT_SHIFT:
            return 1
        return min(span - h.chunk_idx % span, h.chunk_count - h.chunk_idx)

    def _span_at_head(self, most: int) -> list[_Outstanding]:
        """The queued requests that may leave as one span GET of at most `most` chunks: the first in the queue
        and the GETs queued right after it for the next chunks of its block, with the next req_ids."""
        queue = self._queue
        h = queue[0].header
        group = [queue[0]]
        for want in range(1, min(most, len(queue))):
            g = queue[want].header
            if (g.chunk_idx != h.chunk_idx + want or g.req_id != (h.req_id + want) & 0xFFFFFFFF or g.opcode != _GET
                    or g.prefix_hash != h.prefix_hash or g.tenant != h.tenant or g.flags != h.flags
                    or g.version != h.version or g.chunk_count != h.chunk_count or g.chunk_shift != h.chunk_shift):
                break
            group.append(queue[want])
        return group

    def _send_span(self, group: list[_Outstanding], now: float) -> None:
        """Send `group` (from `_span_at_head`, still queued) as one GET whose aux is its length."""
        popleft, send, rto = self._queue.popleft, self._send, self.path.rto.backoff(1)
        for item in group:
            popleft()
            send(item, now, rto)
        data = bytearray(_datagram(group[0]))
        data[_AUX] = len(group).to_bytes(4, "big")
        self.transport.send(bytes(data))
        self.datagrams += 1

    def _next_to_send(self, now: float) -> _Outstanding | None:
        while self._resend and self._resend[0].done:
            self._resend.popleft()
        if self._resend:
            return self._resend.popleft()
        if self._delayed and self._delayed[0][0] <= now:
            return heapq.heappop(self._delayed)[2]
        return self._queue.popleft() if self._queue else None

    def _has_ready(self, now: float) -> bool:
        return bool(self._resend or self._queue or (self._delayed and self._delayed[0][0] <= now))

    def _send_what_fits(self, now: float) -> float | None:
        """Send while the window has room and pacing allows; the seconds until pacing allows the next, if any.
        A span GET goes when the window has room for all its chunks (`_span_now` keeps it within half the
        window), or shorter when no reply came for a reordering window (limited transmit, below)."""
        congestion = self.path.congestion
        while self._in_flight < self.size and self._has_ready(now):
            srtt = self.path.rto.srtt  # nothing to pace by before the first round trip was measured
            interval = 0.0 if srtt is None else Pacer.interval(srtt, congestion.cwnd,
                                                               congestion.cwnd < congestion.ssthresh)
            delay = self.path.pacer.delay(now, interval)
            if delay > 0:
                return delay
            while self._resend and self._resend[0].done:
                self._resend.popleft()
            fresh = not self._resend and not (self._delayed and self._delayed[0][0] <= now)
            span = self._span_now() if fresh and self.span > 1 and self._queue else 1
            wanted = self._span_wanted(self._queue[0].header, span) if span > 1 else 1
            if wanted > 1:
                room = self.size - self._in_flight
                if room < wanted:
                    # Room for the whole span comes with the next replies, while they come. When none came for a
                    # reordering window, what is in flight may be lost (and no later request could show it): the
                    # span leaves shorter, as TCP's limited transmit sends on, so its replies can reveal the loss.
                    hold_until = self._answered_at + max(self.path.rto.smoothed * REORDERING, MIN_REORDERING)
                    if now < hold_until:
                        return hold_until - now
                group = self._span_at_head(min(wanted, room))
                if len(group) > 1:
                    self.path.pacer.sent(now, interval * len(group))
                    self._send_span(group, now)
                    continue
            item = self._next_to_send(now)
            if item is None:
                break
            if item.done:
                continue
            self.path.pacer.sent(now, interval)
            self._send_one(item, now)
        return None

    # ---- timers -----------------------------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        """Requests whose timer ran out: presumed lost, resent first (one window cut per round trip)."""
        while self._timers and self._timers[0][0] <= now:
            deadline, _, req_id = heapq.heappop(self._timers)
            item = self._pending.get(req_id)
            if item is None or not item.in_flight or item.deadline != deadline:
                continue
            if self.tries is not None and item.attempts - item.busy >= self.tries:
                raise self._timeout_error(f"after {item.attempts - item.busy} tries", item)
            self._lost(item, now)

    def _lost(self, item: _Outstanding, now: float) -> None:
        """`item` is presumed lost: out of the window's count, the window cut, resent before anything new."""
        item.in_flight = False
        self._in_flight -= 1
        self.path.congestion.on_loss(item.sent_at, now)
        self.resent += 1
        self._resend.append(item)

    def _detect_losses(self, now: float) -> None:
        """Requests presumed lost because a request sent REORDERING of a round trip after them was answered
        (RACK, RFC 8985, by send time): the switch and the node answer in order, so one lost request is resent
        after about a round trip instead of a whole RTO, while the rest of the window goes on."""
        gap = max(self.path.rto.smoothed * REORDERING, MIN_REORDERING)
        order = self._order
        while order:
            seq, item = order[0]
            if item.done or not item.in_flight or item.seq != seq:
                order.popleft()  # answered, already presumed lost, or resent since (a newer entry)
                continue
            if item.sent_at + gap > self._delivered_sent_at:
                return
            order.popleft()
            self._lost(item, now)

    def _next_deadline(self) -> float | None:
        while self._timers:
            deadline, _, req_id = self._timers[0]
            item = self._pending.get(req_id)
            if item is not None and item.in_flight and item.deadline == deadline:
                return deadline
            heapq.heappop(self._timers)
        return None

    def _timeout_error(self, why: str, first: _Outstanding | None = None) -> KVPTimeout:
        if first is None:
            first = min(self._pending.values(), key=lambda i: i.sent_at, default=None)
        waiting = len(self._pending) + len(self._queue)
        what = describe(first.header) if first is not None else "nothing"
        heard = "nothing heard since it began"
        if self._heard_at is not None and self._last_heard is not None:
            heard = (f"last heard {self._clock() - self._heard_at:.1f}s ago: {describe(self._last_heard)} "
                     f"{_status_name(self._last_heard.status)}")
        detail = f"; wrong replies: {self.wrong[:3]}" if self.wrong else ""
        rto = self.path.rto
        srtt = f"{rto.srtt * 1e3:.1f} ms" if rto.srtt is not None else "none"
        return KVPTimeout(f"no reply from {self.transport.peer} to {what} {why} ({waiting} of {self.submitted} "
                          f"requests unanswered; {heard}; srtt {srtt}, rto {rto.rto * 1e3:.0f} ms){detail}")

    # ---- receiving ------------------------------------------------------------------------------------

    def answers(self) -> Iterator[Answer]:
        """Replies as they arrive, until nothing is queued or outstanding; raises KVPTimeout when nothing
        answered for `silence` seconds (or a request was tried `tries` times). The caller may submit, retry or
        clear while iterating. Pushed copies count as strays here (`events` takes them)."""
        for event in self._receive(pushes=False):
            assert isinstance(event, Answer)
            yield event

    def events(self) -> Iterator[Answer | Pushed | None]:
        """As `answers`, and also the pushed copies that arrive (`Pushed`) and a None when `wake_at` came; runs
        until nothing is queued or outstanding and no wake-up is set. The caller may also cancel, withdraw and
        set `wake_at` while iterating."""
        return self._receive(pushes=True)

    def _receive(self, pushes: bool) -> Iterator[Answer | Pushed | None]:
        started = self._clock()
        self._take_pushed = pushes
        while self._queue or self._pending or self.wake_at is not None:
            now = self._clock()
            quiet_since = self._heard_at if self._heard_at is not None else started
            if now - quiet_since >= self.silence:
                raise self._timeout_error(f"in {self.silence:g}s of silence")
            if self.wake_at is not None and now >= self.wake_at:
                self.wake_at = None
                yield None
                continue
            pace_wait = self._send_what_fits(now)
            deadline = self._next_deadline()
            if deadline is not None and deadline <= now:
                # Read what already arrived before calling anything lost: a reader that was not scheduled for a
                # while finds its replies waiting, and they are not losses. At most what is in flight can be there.
                for _ in range(self._in_flight + 1):
                    data = self.transport.recv(0.0)
                    if data is None:
                        break
                    answer = self._match(data)
                    if answer is not None:
                        yield answer
                self._after_burst()
                self._expire(self._clock())
                continue
            waits = [quiet_since + self.silence - now]
            if pace_wait is not None:
                waits.append(pace_wait)
            if deadline is not None:
                waits.append(deadline - now)
            if self.wake_at is not None:
                waits.append(self.wake_at - now)
            if self._delayed and self._delayed[0][0] > now and self._in_flight < self.size:
                waits.append(self._delayed[0][0] - now)  # (one already due is ready: pacing says when)
            data = self.transport.recv(max(min(waits), 0.0))
            # Then what else is already queued, up to a span's worth, before sending or checking timers again: a
            # span's replies come together, and the bookkeeping above is done once for them instead of per reply.
            # Not more: the replies of a span free the room the next span GET waits for, and reading on first
            # would hold it back while the switch and the node idle (a whole window read first: 0.36x the
            # switch's rate instead of 0.5x on bench/path_rate.py at MTU 1500).
            most = self.span
            while data is not None:
                answer = self._match(data)
                if answer is not None:
                    yield answer
                most -= 1
                if most <= 0:
                    break
                data = self.transport.recv(0.0)
            self._after_burst()

    def _after_burst(self) -> None:
        """What a burst of replies tells once it was read: the requests sent well before the newest one answered
        are lost (RACK, `_detect_losses`; once per burst, not per reply: a reply later in the burst may still
        answer one)."""
        if self._losses_due:
            self._losses_due = False
            self._detect_losses(self._clock())

    def _match(self, data: bytes | memoryview) -> Answer | Pushed | None:
        verdict = checked(data)  # (the header unpacked once: this is a reader's cost per chunk)
        reason: Reason | None
        if type(verdict) is Header:
            reason, reply = None, verdict
        elif len(data) < HEADER.size or verdict is Reason.NOT_KVP:
            self.strays += 1
            return None
        else:
            assert isinstance(verdict, Reason)
            reason, reply = verdict, Header.unpack(data)
        req_id = reply.req_id
        item = self._pending.get(req_id)
        if item is None:
            if req_id == PUSHED_REQ_ID and self._take_pushed:
                pushed = self._pushed(reply, data) if reason is None else None
                if pushed is not None:
                    return pushed
            self.strays += 1
            took = self.path.resent_answered.pop(req_id, None)
            if took is not None and reason is None:
                self.path.rto.spurious(took)  # both sends were answered: the timer ran out too early
                self.path.congestion.undo()
                self.spurious += 1
            return None
        request = item.header
        if reason is None and not answers(reply, request):
            self.wrong.append(f"{describe(reply)} does not answer {describe(request)}")
            return None  # a reply to something else that carries our req_id: keep waiting
        now = self._clock()
        self._heard_at = self._answered_at = now
        self._last_heard = reply  # formatted only for an error
        if reason is None and reply.status == _BUSY:
            self._shed(item, now)
            return None
        if reason is not None:
            self.wrong.append(f"{describe(reply)} ({reason.value})")
        del self._pending[req_id]
        item.done = True
        attempts = item.attempts
        if attempts > item.busy + 1:  # resent: a second reply would show the resend was not needed
            remembered = self.path.resent_answered
            remembered[req_id] = now - item.first_sent_at
            if len(remembered) > RESENDS_REMEMBERED:
                del remembered[next(iter(remembered))]
        if item.in_flight:
            item.in_flight = False
            self._in_flight -= 1
        sent_at = item.sent_at
        path = self.path
        if attempts == 1:  # Karn: a resent request's reply may answer any of its sends
            path.rto.sample(now - sent_at)
            if sent_at > self._delivered_sent_at:
                self._delivered_sent_at = sent_at
                self._losses_due = True  # looked for once the burst of replies is read (`_receive`)
        path.congestion.on_reply(bool(reply.flags & _CONGESTED))
        value: bytes | memoryview = b""
        if reason is None and reply.flags & _VALUE:
            view = data if type(data) is memoryview else memoryview(data)
            value = view[KVP_HEADER_LEN:KVP_HEADER_LEN + (1 << reply.chunk_shift)]
        return Answer(item.tag, request, reply, value, now - sent_at, attempts, reason is not None, item.data)

    def _pushed(self, reply: Header, data: bytes | memoryview) -> Pushed | None:
        """`data` (well-formed: `_match` checked it) as a pushed copy, or None when it is not a pushed GET_REPLY
        with a value."""
        if reply.opcode != _GET_REPLY or not reply.flags & _PUSHED or not reply.flags & _VALUE:
            return None
        self.pushed += 1
        return Pushed(reply, memoryview(data)[KVP_HEADER_LEN:KVP_HEADER_LEN + reply.chunk_len])

    def _shed(self, item: _Outstanding, now: float) -> None:
        """The node answered BUSY: cut the window, resend after a backoff that doubles per BUSY in a row."""
        self.busy += 1
        item.busy += 1
        if item.in_flight:
            item.in_flight = False
            self._in_flight -= 1
        self.path.congestion.on_busy(item.sent_at, now)
        if item.attempts == item.busy:  # its only sends were shed: still a round trip of the path
            self.path.rto.sample(now - item.sent_at)
        self._seq += 1
        heapq.heappush(self._delayed, (now + self.path.rto.backoff(item.busy), self._seq, item))
