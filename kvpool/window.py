"""A window of KVP requests in flight: send up to `size`, match replies by req_id, resend each one that is late.

Block reads and writes move many chunks; one round trip per chunk (or one round per batch, resending the whole
batch on any loss) caps a client at a few MB/s. The window keeps `size` requests outstanding, gives each its own
timer, and resends only the ones whose reply is missing, reusing their req_id so a late first reply still counts.
It knows nothing of blocks: the caller tags each request (the chunk index), reads `Answer`s as they come, and
may submit more, ask for a resend (a reply that failed verification), or clear everything (a restart).

Chunk indices, counts and sizes only pass through the codec (`kvpool.wire.Header`): protocol v2's wider index and
per-block chunk size changed the codec, not this module (a reply's value is `1 << chunk_shift` bytes).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kvpool.constants import KVP_HEADER_LEN, REPLY_OF, Flag, Opcode
from kvpool.errors import KVPTimeout
from kvpool.transport import Transport
from kvpool.wire import HEADER, Header, check, encode, has_magic

_REPLY_CODE = {int(req): int(rep) for req, rep in REPLY_OF.items()}


def answers(reply: Header, request: Header) -> bool:
    """Whether `reply` is the reply to `request`: its reply opcode, same req_id and block-chunk key."""
    return (reply.opcode == _REPLY_CODE.get(request.opcode) and reply.req_id == request.req_id
            and reply.key == request.key)


def describe(h: Header) -> str:
    """A short text of a header for error messages."""
    try:
        op = Opcode(h.opcode).name
    except ValueError:
        op = f"op{h.opcode:#04x}"
    return f"{op} ph={h.prefix_hash:#018x} chunk={h.chunk_idx}/{h.chunk_count} v={h.version} req={h.req_id}"


@dataclass(slots=True)
class _Outstanding:
    tag: int
    header: Header
    data: bytes
    attempts: int = 0
    sent_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply matched to its request."""

    tag: int
    """What the caller tagged the request with (a chunk index)."""
    request: Header
    reply: Header
    value: bytes | memoryview
    """The reply's value bytes (`1 << chunk_shift`, padding included) when F_VALUE is set, else b"" (a view
    into the datagram: no copy)."""
    latency: float
    """Seconds from the last send of the request to this reply."""
    attempts: int
    """Times the request was sent."""
    malformed: bool
    """The reply breaks the validity rules (still delivered: a refusal may echo a malformed request)."""
    sent: bytes
    """The request as sent (for a resend)."""


class Window:
    """Requests in flight over one transport, at most `size` at a time, each tried at most `tries` times."""

    def __init__(self, transport: Transport, size: int, timeout: float, tries: int,
                 next_req_id: Callable[[], int], clock: Callable[[], float] = time.perf_counter) -> None:
        if size < 1 or tries < 1 or timeout <= 0:
            raise ValueError("a window needs size >= 1, tries >= 1 and timeout > 0")
        self.transport = transport
        self.size = size
        self.timeout = timeout
        self.tries = tries
        self._next_req_id = next_req_id
        self._clock = clock
        self._queue: deque[_Outstanding] = deque()
        self._flight: OrderedDict[int, _Outstanding] = OrderedDict()
        self.submitted = 0
        self.sent = 0
        """Datagrams sent, resends included."""
        self.strays = 0
        """Datagrams that answered nothing outstanding (late duplicates, replies to cleared requests)."""
        self.wrong: list[str] = []
        """Replies with our req_id that did not answer the request (wrong key or opcode)."""

    def submit(self, tag: int, header: Header, value: bytes | memoryview | None = None) -> Header:
        """Queue a request (its req_id is assigned here); it is sent when the window has room."""
        header = header.replace(req_id=self._next_req_id() & 0xFFFFFFFF)
        self._queue.append(_Outstanding(tag, header, encode(header, value)))
        self.submitted += 1
        return header

    def retry(self, answer: Answer) -> bool:
        """Send `answer`'s request again (its reply failed the caller's checks); False when out of tries."""
        if answer.attempts >= self.tries:
            return False
        self._queue.appendleft(_Outstanding(answer.tag, answer.request, answer.sent, answer.attempts))
        return True

    def clear(self) -> None:
        """Forget every queued and outstanding request; their late replies count as strays."""
        self._queue.clear()
        self._flight.clear()

    def __len__(self) -> int:
        """Requests queued or outstanding."""
        return len(self._queue) + len(self._flight)

    @property
    def idle(self) -> bool:
        return not self._queue and not self._flight

    def _send(self, item: _Outstanding) -> None:
        item.attempts += 1
        item.sent_at = self._clock()
        self._flight[item.header.req_id] = item
        self._flight.move_to_end(item.header.req_id)
        self.transport.send(item.data)
        self.sent += 1

    def _timeout_error(self) -> KVPTimeout:
        first = next(iter(self._flight.values()))
        detail = f"; wrong replies: {self.wrong[:3]}" if self.wrong else ""
        return KVPTimeout(f"no reply from {self.transport.peer} to {len(self._flight) + len(self._queue)} of "
                          f"{self.submitted} requests (first: {describe(first.header)}) after {self.tries} tries "
                          f"of {self.timeout}s{detail}")

    def answers(self) -> Iterator[Answer]:
        """Replies as they arrive, until nothing is queued or outstanding; raises KVPTimeout when a request
        was sent `tries` times without a reply. The caller may submit, retry or clear while iterating."""
        while self._queue or self._flight:
            while self._queue and len(self._flight) < self.size:
                self._send(self._queue.popleft())
            now = self._clock()
            for item in [i for i in self._flight.values() if now - i.sent_at >= self.timeout]:
                if item.attempts >= self.tries:
                    raise self._timeout_error()
                self._send(item)  # its own timer: only late requests are resent
            wait = min(i.sent_at for i in self._flight.values()) + self.timeout - self._clock()
            data = self.transport.recv(wait)
            if data is None:
                continue
            answer = self._match(data)
            if answer is not None:
                yield answer

    def _match(self, data: bytes) -> Answer | None:
        if len(data) < HEADER.size or not has_magic(data):
            self.strays += 1
            return None
        reply = Header.unpack(data)
        item = self._flight.get(reply.req_id)
        if item is None:
            self.strays += 1
            return None
        reason = check(data)
        if reason is None and not answers(reply, item.header):
            self.wrong.append(f"{describe(reply)} does not answer {describe(item.header)}")
            return None  # a reply to something else that carries our req_id: keep waiting
        if reason is not None:
            self.wrong.append(f"{describe(reply)} ({reason.value})")
        del self._flight[reply.req_id]
        value: bytes | memoryview = b""
        if reason is None and reply.flags & Flag.VALUE:
            value = memoryview(data)[KVP_HEADER_LEN:KVP_HEADER_LEN + reply.chunk_len]
        return Answer(item.tag, item.header, reply, value, self._clock() - item.sent_at, item.attempts,
                      reason is not None, item.data)
