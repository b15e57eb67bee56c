"""A reader's span GETs (docs/protocol.md, *Span GETs*): consecutive chunks asked by one datagram, aligned groups,
each chunk still its own request (timer, resend, congestion), on simulated time against an in-process node.

What could go wrong, and is checked: a span that crosses its group's boundary (readers of one block would then send
different spans and never coalesce), a span of slot-sized chunks (the switch answers those one at a time), more
chunks in flight than the window allows, a lost reply costing its whole span again instead of its one chunk, and
wrong bytes.
"""

from __future__ import annotations

import os
import random

import pytest

from kvpool.client import ClientOptions, KVPClient
from kvpool.constants import KVP_MAX_GET_SPAN, Opcode
from kvpool.server import StorageNode, StorageOptions
from kvpool.transport import LossyTransport
from kvpool.wire import Header
from tests.kvpool.test_client_loss import SimClock, local_client
from tests.kvpool.test_transport_control import DelayTransport

PH = 0x5A17
CHUNK = 8192


class GetLog:
    """The GET datagrams a reader sent (`drop` hook of `LossyTransport`), optionally losing some."""

    def __init__(self, lose_out=None, lose_in=None) -> None:
        self.gets: list[Header] = []
        self.lose_out = lose_out
        self.lose_in = lose_in
        self.in_flight = 0
        """Chunks asked and not answered yet (for the window bound)."""
        self.most_in_flight = 0

    def __call__(self, data: bytes, direction: str) -> bool:
        h = Header.unpack(data)
        if direction == "out" and h.opcode == Opcode.GET:
            self.gets.append(h)
            if self.lose_out is not None and self.lose_out(h):
                return True
            self.in_flight += min(max(h.aux, 1), h.chunk_count - h.chunk_idx)
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            return False
        if direction == "in" and h.opcode == Opcode.GET_REPLY:
            self.in_flight -= 1
            return self.lose_in is not None and self.lose_in(h)
        return False

    def chunks_asked(self) -> list[int]:
        return [i for h in self.gets for i in range(h.chunk_idx, min(h.chunk_idx + max(h.aux, 1), h.chunk_count))]


def stored(n: StorageNode, size: int, chunk_size: int = CHUNK) -> bytes:
    data = os.urandom(size)
    with local_client(n, chunk_size=chunk_size) as writer:
        writer.put_block(PH, data, version=1)
    return data


@pytest.mark.parametrize("count_known", [False, True])
def test_a_read_asks_in_aligned_spans_and_gets_the_right_bytes(count_known):
    n = StorageNode(StorageOptions())
    chunks = 45
    data = stored(n, chunks * CHUNK - 100)
    log = GetLog()
    span_width = ClientOptions().get_span  # the default width, as a user's reads ask
    with local_client(n, drop=log, window=2 * span_width, initial_window=2 * span_width) as reader:
        got = reader.get_block(PH, chunks if count_known else None)
        datagrams, requests = reader.datagrams, reader.sent
    assert got.data == data
    assert log.chunks_asked() == list(range(chunks)), "every chunk asked once, in order"
    spans = [(h.chunk_idx, max(h.aux, 1)) for h in log.gets]
    assert spans[0] == (0, 1), "the first chunk tells the block's chunk size: asked alone"
    # A read that knows the count but not the chunk size sends its first window one chunk per GET (slot-sized
    # GETs, the switch's kind); the GETs still queued when the first reply tells the size leave in spans.
    guessed = 2 * span_width if count_known else 1
    assert all(span == 1 for _, span in spans[:guessed])
    for first, span in spans[guessed:]:
        end = first + span
        assert 1 < span <= span_width and (end % span_width == 0 or end == chunks), f"span {first}+{span} not aligned"
    assert len(spans) <= guessed + -(-chunks // span_width) + 1 and (datagrams, requests) == (len(spans), chunks)


def test_one_get_per_chunk_with_a_span_of_one_and_for_slot_sized_chunks():
    n = StorageNode(StorageOptions())
    data = stored(n, 20 * CHUNK)
    log = GetLog()
    with local_client(n, drop=log, get_span=1) as reader:
        assert reader.get_block(PH).data == data
    assert [h.aux for h in log.gets] == [0] * 20 and log.chunks_asked() == list(range(20))

    small = StorageNode(StorageOptions())
    data = stored(small, 30 * 128, chunk_size=128)
    log = GetLog()
    with local_client(small, drop=log) as reader:
        assert reader.get_block(PH).data == data
    assert [h.aux for h in log.gets] == [0] * 30, "the switch answers slot-sized chunks: never asked in spans"


@pytest.mark.parametrize("window", [3, 8, 20])
def test_a_span_never_puts_more_chunks_in_flight_than_the_window_and_takes_at_most_half_of_it(window):
    n = StorageNode(StorageOptions())
    data = stored(n, 64 * CHUNK)
    log = GetLog()
    with local_client(n, drop=log, window=window, initial_window=window) as reader:
        assert reader.get_block(PH, 64).data == data
    assert log.most_in_flight <= window
    # a span takes at most half the window (a power of two), so the path never idles a round trip waiting for room
    assert max(max(h.aux, 1) for h in log.gets) == {3: 1, 8: 4, 20: 8}[window], "spans as long as half the window"


def test_a_lost_reply_costs_its_chunk_alone_and_a_lost_span_its_chunks():
    n = StorageNode(StorageOptions())
    data = stored(n, 32 * CHUNK)
    lost_reply, lost_span = [], []

    def lose_in(h: Header) -> bool:
        if h.chunk_idx == 11 and not lost_reply:
            lost_reply.append(h.chunk_idx)
            return True
        return False

    def lose_out(h: Header) -> bool:
        if h.chunk_idx == 16 and h.aux > 1 and not lost_span:
            lost_span.append(h.aux)
            return True
        return False

    log = GetLog(lose_out, lose_in)
    with local_client(n, drop=log, window=16, initial_window=16) as reader:
        assert reader.get_block(PH, 32).data == data
        resent = reader.resent
    assert lost_reply == [11] and lost_span == [8]
    asked = log.chunks_asked()
    again = sorted(i for i in set(asked) if asked.count(i) > 1)
    assert again == [11, *range(16, 24)] and resent == 9, "only what was lost is asked again"


def test_a_span_longer_than_the_protocol_allows_is_refused_at_construction():
    with pytest.raises(ValueError):
        ClientOptions(get_span=KVP_MAX_GET_SPAN + 1)
    with pytest.raises(ValueError):
        ClientOptions(get_span=0)


def test_a_span_waiting_for_room_does_not_wait_out_a_lost_request():
    """A span waits for room for all its chunks while replies come; when the only request in flight was lost, no
    reply comes to make room: after a reordering window the span leaves shorter, and its replies show the loss
    (RACK), so the lost chunk is resent about two round trips in, not after the 0.5 s initial RTO."""
    n = StorageNode(StorageOptions())
    data = stored(n, 64 * 1024, chunk_size=1024)
    clock = SimClock()
    sends_of_2: list[float] = []

    def drop_chunk_2_once(data: bytes, direction: str) -> bool:
        h = Header.unpack(data)
        if direction == "out" and h.opcode == Opcode.GET and h.chunk_idx <= 2 < h.chunk_idx + max(h.aux, 1):
            sends_of_2.append(clock.now)
            return len(sends_of_2) == 1
        return False

    transport = LossyTransport(DelayTransport(n, clock), 0.0, random.Random(0), drop_chunk_2_once)
    options = ClientOptions(timeout=0.5, initial_window=4, window=4, get_span=4)
    with KVPClient(options, transport, clock=clock) as client:
        got = client.get_block(PH, 64)
    assert got.data == data and got.chunks[2].attempts == 2
    assert sends_of_2[1] - sends_of_2[0] < 4 * DelayTransport.rtt, "resent after a few round trips, not the RTO"
