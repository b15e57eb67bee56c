"""The reader's side of a block's stream (docs/protocol.md, *Pushed chunks*) on a simulated clock.

`StreamPath` plays the switch and the storage node for one reader: its GETs reach a real in-process
`StorageNode` and come back a round trip later, and the test schedules pushed copies (F_PUSHED, req_id 0) of the
node's replies to the stream's origin, as a switch sends them to a subscriber. `SwitchedPath` (the last test, slow)
puts the real kvswitch program (in-process softswitch, the stream join on) between the reader, a scripted origin
and the node. Time is simulated (it moves only while the reader waits for something), so no verdict depends on how
busy the machine is.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import zlib
from collections.abc import Callable

import pytest

from kvpool.client import ClientOptions, KVPClient, build_parser, run
from kvpool.constants import Flag, Opcode, Status
from kvpool.server import StorageNode, StorageOptions
from kvpool.stream import StreamPatience, StreamPosition
from kvpool.wire import Header, encode
from tests.kvpool.test_client_loss import SimClock, SimTransport

READER = ("10.0.0.2", 40000)
ORIGIN = ("10.0.0.1", 40001)
PH = 0x5EA0
RTT = 0.002
"""Simulated seconds from a GET to its reply."""
CHUNK = 1024


class StreamPath:
    """A switch and a storage node on simulated time, seen from one reader (a `Transport`).

    The reader's datagrams go to the node (`drop(datagram, "out" | "in")` may lose one either way), its replies
    come back `RTT` later; `push(at, idx)` schedules the copy of the node's reply to the origin's GET of chunk
    `idx`, pushed to the reader at simulated time `at`; `at(t, action)` runs `action` at time t (a write, say)."""

    peer = "fake switch"

    def __init__(self, node: StorageNode, clock: SimClock, drop: Callable[[bytes, str], bool] | None = None) -> None:
        self.node = node
        self.clock = clock
        self.drop = drop
        self.due: list[tuple[float, int, bytes | Callable[[], None]]] = []
        self.seq = 0
        self.gets: list[int] = []
        """Chunk index of every GET the reader sent, resends included, in order."""
        self.get_flags: list[int] = []

    def _schedule(self, at: float, what: bytes | Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.due, (at, self.seq, what))

    def send(self, data: bytes) -> None:
        h = Header.unpack(data)
        if h.opcode == Opcode.GET:  # a span GET asks for several chunks (docs/protocol.md, *Span GETs*)
            asked = range(h.chunk_idx, min(h.chunk_idx + max(h.aux, 1), h.chunk_count))
            self.gets += asked
            self.get_flags += [h.flags] * len(asked)
        if self.drop is not None and self.drop(data, "out"):
            return
        for out in self.node.receive(data, READER):
            self._schedule(self.clock.now + RTT, b"".join(out.parts))

    def pushed_copy(self, idx: int, chunks: int, ph: int = PH, **changes: int) -> bytes:
        """The node's reply to the origin's GET of chunk `idx`, as the switch pushes it (`changes` to the header)."""
        request = encode(Header(Opcode.GET, req_id=77, prefix_hash=ph, chunk_idx=idx, chunk_count=chunks))
        (reply,) = self.node.receive(request, ORIGIN)
        data = b"".join(reply.parts)
        h = Header.unpack(data)
        h = h.replace(flags=h.flags | Flag.PUSHED, req_id=0, **changes)
        return h.pack() + data[len(h.pack()):]

    def push(self, at: float, idx: int, chunks: int, data: bytes | None = None) -> None:
        self._schedule(at, data if data is not None else self.pushed_copy(idx, chunks))

    def at(self, t: float, action: Callable[[], None]) -> None:
        self._schedule(t, action)

    def recv(self, timeout: float) -> bytes | None:
        while self.due and self.due[0][0] <= self.clock.now + timeout:
            when, _, what = heapq.heappop(self.due)
            self.clock.now = max(self.clock.now, when)
            if callable(what):
                what()
                continue
            if self.drop is not None and self.drop(what, "in"):
                continue
            return what
        self.clock.now += max(timeout, 0.0) + 1e-9
        return None

    def close(self) -> None:
        self.due.clear()


def stored(data: bytes, version: int = 1, ph: int = PH) -> StorageNode:
    node = StorageNode(StorageOptions())
    clock = SimClock()
    with KVPClient(ClientOptions(timeout=0.05), SimTransport(node, clock), clock=clock) as writer:
        writer.put_block(ph, data, version=version, chunk_size=CHUNK)
    return node


def reader(node: StorageNode, drop=None, **options) -> tuple[KVPClient, StreamPath, SimClock]:
    clock = SimClock()
    path = StreamPath(node, clock, drop)
    opts = dataclasses.replace(ClientOptions(timeout=0.05), **options)
    return KVPClient(opts, path, clock=clock), path, clock


def block(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n * CHUNK - 100)


def schedule_pushes(path: StreamPath, clock: SimClock, first: int, last: int, n: int, start: float,
                    every: float, skip: frozenset[int] = frozenset()) -> None:
    """Pushes of chunks first..last (inclusive), one every `every` seconds from `start` after now."""
    for k, idx in enumerate(range(first, last + 1)):
        if idx not in skip:
            path.push(clock.now + start + k * every, idx, n)


# ---- joining a stream -------------------------------------------------------------------------------------


@pytest.mark.parametrize("count_known", [True, False])
def test_a_reader_joining_at_chunk_k_takes_the_pushes_and_gets_exactly_the_chunks_it_missed(count_known):
    n, k = 200, 120
    data = block(n)
    node = stored(data)
    client, path, clock = reader(node)
    # the origin is at chunk k when the reader's first reply came; its pushes come every 0.5 ms from then on
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005)
    with client:
        got = client.get_block(PH, n if count_known else None)
    assert got.data == data and got.version == 1
    assert sorted(path.gets) == list(range(k)), "every missed chunk once, nothing the stream brought"
    assert got.pushed == n - k == client.pushed
    assert [c.idx for c in got.chunks if c.pushed] == list(range(k, n))
    assert all(f & Flag.STREAM for f in path.get_flags)
    assert client.pushed_duplicates == 0 and client.pushed_ignored == 0


def test_a_reader_faster_than_the_stream_does_not_ask_beyond_the_newest_push():
    """The stream is ahead of the read when it joins (chunk 100 pushed while its own replies reached chunk < 64):
    another member leads, and however fast the read could go alone it asks for nothing beyond the newest push."""
    n, k = 400, 100
    data = block(n, seed=2)
    node = stored(data)
    client, path, clock = reader(node)
    # slow origin: one chunk per 1 ms, while the reader alone would ask a window per 2 ms round trip
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.001)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    asked_early = [i for i in path.gets if i >= k]
    assert len(asked_early) == 0, "nothing beyond the join: the read's first window ended below it"
    assert got.pushed == n - k
    assert sorted(path.gets) == list(range(k)), "no chunk asked twice"


def test_a_reader_ahead_of_the_stream_leads_it():
    """The pushes start below what the read's own replies brought (chunk 10 pushed once it had its first window):
    this read is ahead, it leads, and reads on in order at its own pace (its replies beyond the front are what
    the switch pushes to the others); the pushes it gets are duplicates or fill nothing it waits for."""
    n, k = 400, 10
    data = block(n, seed=2)
    node = stored(data)
    client, path, clock = reader(node)
    started = clock.now
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.001)  # 0.4 s to the end
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert clock.now - started < 0.2, "at its own pace, not the stream's"
    assert sorted(set(path.gets)) == sorted(path.gets), "no chunk asked twice"
    assert len(path.gets) > n - 64 and got.pushed < 64


def test_pushes_that_stop_halfway_leave_the_rest_to_the_reader_once_the_stream_is_quiet():
    n, k, m = 300, 50, 180
    data = block(n, seed=3)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, m, n, start=RTT + 0.0001, every=0.0005)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert sorted(path.gets) == list(range(k)) + list(range(m + 1, n))
    assert got.pushed == m - k + 1


def test_a_lost_push_is_fetched_once_the_stream_has_passed_it():
    n, k, lost = 200, 40, 100
    data = block(n, seed=4)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005, skip=frozenset({lost}))
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert sorted(path.gets) == [*range(k), lost]
    assert got.pushed == n - k - 1 and not got.chunks[lost].pushed


def test_a_lost_last_push_is_fetched_when_the_stream_goes_quiet():
    n, k = 100, 30
    data = block(n, seed=5)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, n - 2, n, start=RTT + 0.0001, every=0.0005)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert sorted(path.gets) == [*range(k), n - 1]


def test_a_push_completes_an_outstanding_get_without_a_round_trip_sample():
    n = 64
    data = block(n, seed=6)
    node = stored(data)
    lost_reply = 20

    def drop_the_reply_of_chunk_20(datagram, direction):
        h = Header.unpack(datagram)
        return direction == "in" and h.req_id != 0 and h.chunk_idx == lost_reply

    client, path, clock = reader(node, drop=drop_the_reply_of_chunk_20, initial_window=32)
    # the reader asks 0..31 at once; the stream's copy of chunk 20 comes half a millisecond after its reply was
    # due, before the replies to the next round show it lost (RACK) and long before its timer runs out
    path.push(clock.now + RTT + 0.0005, lost_reply, n)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert path.gets.count(lost_reply) == 1, "the push answered it: never resent"
    chunk = got.chunks[lost_reply]
    assert chunk.pushed and chunk.attempts == 1 and chunk.latency == pytest.approx(RTT + 0.0005, abs=1e-4)
    assert client.path.rto.samples == n - 1, "the pushed copy is no round-trip sample"
    assert client.resent == 0


def test_pushes_before_the_reads_first_reply_are_held_until_it_decides_the_block():
    """A late reader joins with its first GET, so pushes come before its first reply: held, then taken once that
    reply decided version, count and chunk size (never fetched); held ones of another version are ignored."""
    n, k = 50, 20
    data = block(n, seed=7)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, k + 2, n, start=0.0001, every=0.0001)  # before the first reply (2 ms)
    stale = path.pushed_copy(k + 3, n, version=99)  # claims another version: must not decide the read's
    path.push(clock.now + 0.0004, k + 3, n, data=stale)
    schedule_pushes(path, clock, k + 4, n - 1, n, start=RTT + 0.0001, every=0.0005)
    with client:
        got = client.get_block(PH, None)
    assert got.data == data and got.version == 1
    assert client.pushed_ignored == 1, "the held push of another version, once the first reply decided"
    assert [c for c in range(k, k + 3) if got.chunks[c].pushed] == [k, k + 1, k + 2], "the held ones taken"
    assert sorted(path.gets) == [*range(k), k + 3], "never fetched what was held; the stale one's chunk fetched"


# ---- what a reader refuses -------------------------------------------------------------------------------


def test_pushed_chunks_of_another_block_version_count_or_damaged_are_ignored_and_fetched():
    n, k = 120, 30
    data = block(n, seed=8)
    node = stored(data)
    other = block(n, seed=9)
    with KVPClient(ClientOptions(timeout=0.05), SimTransport(node, SimClock()), clock=SimClock()) as writer:
        writer.put_block(PH + 1, other, version=1, chunk_size=CHUNK)
    client, path, clock = reader(node)
    t = clock.now + RTT + 0.0001
    bad = {
        60: path.pushed_copy(60, n, ph=PH + 1),  # another block's chunk 60
        61: path.pushed_copy(61, n, version=2),  # another version (the checksum covers the value only)
        62: path.pushed_copy(62, n, chunk_count=n + 1),  # another count
    }
    damaged = bytearray(path.pushed_copy(63, n))
    damaged[-1] ^= 0xFF
    bad[63] = bytes(damaged)
    for i, idx in enumerate(range(k, n)):
        path.push(t + i * 0.0005, idx, n, bad.get(idx))
    with client:
        got = client.get_block(PH, n)
    assert got.data == data and got.version == 1
    assert client.pushed_ignored == 4
    assert sorted(path.gets) == [*range(k), 60, 61, 62, 63]


def test_a_duplicate_push_is_counted_and_ignored():
    n, k = 80, 30  # k beyond the chunks the reader asks for before the first push comes (OWN_BEFORE_JOIN)
    data = block(n, seed=10)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005)
    schedule_pushes(path, clock, k, n - 2, n, start=RTT + 0.0002, every=0.0005)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert client.pushed == n - k
    assert client.pushed_duplicates == n - k - 1, "every second copy (the last chunk comes once: it ends the read)"
    assert sorted(path.gets) == list(range(k))


def test_a_write_during_a_streamed_read_restarts_it_at_the_new_version():
    n, k = 100, 30
    old, new = block(n, seed=11), block(n, seed=12)
    node = stored(old)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, 60, n, start=RTT + 0.0001, every=0.0005)  # v1 copies, then the write ends it
    written = []

    def write_v2() -> None:
        wclock = SimClock()
        with KVPClient(ClientOptions(timeout=0.05), SimTransport(node, wclock), clock=wclock) as writer:
            writer.put_block(PH, new, version=2, chunk_size=CHUNK)
        written.append(clock.now)

    path.at(clock.now + RTT + 0.0001 + 31 * 0.0005, write_v2)  # after push 60
    with client:
        got = client.get_block(PH, n)
    assert written, "the write happened during the read"
    assert got.version == 2 and got.data == new
    assert got.pushed == 0, "the restarted read took nothing of v1"


# ---- without a stream --------------------------------------------------------------------------------------


def test_without_pushes_a_read_asks_every_chunk_once_in_order_as_before():
    n = 150
    data = block(n, seed=13)
    node = stored(data)
    client, path, _ = reader(node)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data and got.pushed == 0
    assert path.gets == list(range(n))
    assert all(f & Flag.STREAM for f in path.get_flags)


def test_with_streaming_off_no_get_carries_f_stream_and_pushes_are_ignored():
    n, k = 60, 20
    data = block(n, seed=14)
    node = stored(data)
    client, path, clock = reader(node, stream=False)
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data and got.pushed == 0
    assert sorted(path.gets) == list(range(n))
    assert not any(f & Flag.STREAM for f in path.get_flags)
    assert client.pushed_ignored > 0, "pushes came during the read and were not taken"


def test_a_single_chunk_read_does_not_ask_for_a_stream():
    node = StorageNode(StorageOptions())
    wclock = SimClock()
    with KVPClient(ClientOptions(timeout=0.05), SimTransport(node, wclock), clock=wclock) as writer:
        writer.put_block(PH, b"x" * 100, version=1)
    client, path, _ = reader(node)
    with client:
        assert client.get_block(PH, 1).data == b"x" * 100
    assert path.get_flags == [0]


def test_the_cli_has_no_stream_and_prints_the_pushed_count(monkeypatch):
    args = build_parser().parse_args(["--no-stream", "get", "0x10"])
    assert args.no_stream
    captured = {}

    class FakeClient:
        def __init__(self, options):
            captured["options"] = options

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def get_block(self, ph, chunks, version):
            from kvpool.client import BlockRead, ChunkReply
            return BlockRead(b"ab", 1, (ChunkReply(0, Status.HIT_SERVER, 0.001, 1),
                                        ChunkReply(1, Status.HIT_SERVER, 0.0, 0, pushed=True)))

    monkeypatch.setattr("kvpool.client.KVPClient", FakeClient)
    text = run(args)
    assert captured["options"].stream is False
    assert "(1 pushed)" in text and "chunk 1: HIT_SERVER 0 µs (0 tries) pushed" in text


# ---- the stream's bookkeeping ------------------------------------------------------------------------------


def test_holes_are_due_when_old_or_far_behind_and_chunks_before_the_join_at_once():
    s = StreamPosition(10, now=0.0, patience=StreamPatience(lag=5))
    have: set[int] = set()

    def missing(i):
        return i not in have

    assert s.due(0.0, 0.1, missing, room=4) == [0, 1, 2, 3]
    assert s.due(0.0, 0.1, missing, room=100) == [4, 5, 6, 7, 8, 9]
    s.pushed(13, now=0.01)  # 11 and 12 skipped
    assert s.due(0.02, 0.1, missing, room=100) == [], "a hole is not due at once: the push may be overtaken"
    assert s.next_due(0.1) == pytest.approx(0.11)
    have.add(11)  # it came late after all
    assert s.due(0.12, 0.1, missing, room=100) == [12]
    s.pushed(15, now=0.13)
    for idx in range(16, 22):
        s.pushed(idx, now=0.14)
    assert s.due(0.14, 0.1, missing, room=100) == [14], "more than lag behind the newest: due before its time"
    assert s.live(0.14 + 0.19, 0.1) and not s.live(0.14 + 0.2, 0.1)


def test_pushes_that_resume_after_a_quiet_spell_stop_the_reader_asking_beyond_them_again():
    n, k = 600, 20
    data = block(n, seed=15)
    node = stored(data)
    client, path, clock = reader(node, window=4, initial_window=4)  # 2 chunks per ms on its own
    schedule_pushes(path, clock, k, 100, n, start=RTT + 0.0001, every=0.0005)
    # the origin stalls for 100 ms (the reader's RTO is 20 ms: it falls back), then goes on from chunk 400
    schedule_pushes(path, clock, 400, n - 1, n, start=RTT + 0.0001 + 80 * 0.0005 + 0.1, every=0.0005)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert sorted(set(path.gets)) == sorted(path.gets), "no chunk asked twice"
    assert set(range(k)) <= set(path.gets) and not set(range(k, 101)) & set(path.gets)
    assert 101 in path.gets, "it fell back while the stream was quiet"
    assert len([i for i in path.gets if i >= 400]) < 20, "once pushes came again it left them to the stream"
    assert got.pushed > 81 + 150


# ---- the window's part ---------------------------------------------------------------------------------------


def test_the_window_never_gives_a_request_req_id_0_and_delivers_pushes_only_through_events():
    from kvpool.rto import RtoBounds
    from kvpool.window import PathState, Pushed, Window

    node = stored(block(4, seed=16))
    clock = SimClock()
    path = StreamPath(node, clock)
    ids = iter([0, 5, 0, 7, 9])
    window = Window(path, lambda: next(ids), PathState.new(RtoBounds(0.05, 0.02, 1.0)), clock=clock)
    first = window.submit(0, Header(Opcode.GET, prefix_hash=PH, chunk_idx=0, chunk_count=4))
    second = window.submit(1, Header(Opcode.GET, prefix_hash=PH, chunk_idx=1, chunk_count=4))
    assert (first.req_id, second.req_id) == (5, 7)
    path.push(clock.now + 0.0005, 3, 4)
    events = list(window.events())
    assert [type(e).__name__ for e in events] == ["Pushed", "Answer", "Answer"]
    assert isinstance(events[0], Pushed) and events[0].reply.chunk_idx == 3 and window.pushed == 1
    assert window.strays == 0 and window.path.rto.samples == 2
    window.submit(2, Header(Opcode.GET, prefix_hash=PH, chunk_idx=2, chunk_count=4))
    path.push(clock.now + 0.0005, 3, 4)
    assert [a.tag for a in window.answers()] == [2], "answers() leaves pushes to nobody: a stray"
    assert window.strays == 1


def test_cancel_withdraw_and_wake_at():
    from kvpool.rto import RtoBounds
    from kvpool.window import PathState, Window

    node = stored(block(8, seed=17))
    clock = SimClock()
    path = StreamPath(node, clock)
    ids = iter(range(1, 100))
    window = Window(path, lambda: next(ids), PathState.new(RtoBounds(0.05, 0.02, 1.0), adaptive=False), cap=2,
                    clock=clock)
    for i in range(6):
        window.submit(i, Header(Opcode.GET, prefix_hash=PH, chunk_idx=i, chunk_count=8))
    assert window.withdraw(lambda i: i >= 4) == [4, 5] and window.waiting() == {0, 1, 2, 3}
    events = window.events()
    first = next(events)  # 0 and 1 went out (cap 2); chunk 0 answered
    assert first.tag == 0 and path.gets == [0, 1]
    gone = window.cancel(1)
    assert gone is not None and gone.attempts == 1 and window.cancel(3) is not None and window.cancel(3) is None
    window.wake_at = clock.now + 1.0
    rest = list(events)
    assert [getattr(e, "tag", None) for e in rest] == [2, None], "2 answered, then the wake-up; 3 never sent"
    assert path.gets == [0, 1, 2] and clock.now >= window.path.rto.rto
    assert window.strays == 1, "the cancelled request's late reply"


class TimedPath:
    """When each of the reader's GETs left (simulated time), beside `StreamPath.gets`."""

    def __init__(self, path: StreamPath, clock: SimClock) -> None:
        self.asked_at: list[float] = []
        send = path.send

        def timed_send(data: bytes) -> None:
            before = len(path.gets)
            send(data)
            self.asked_at += [clock.now] * (len(path.gets) - before)  # the time of each chunk asked (a span: all)

        path.send = timed_send  # type: ignore[method-assign]


LATE_N, LATE_K = 200, 120
"""`late_read`'s block (chunks) and the origin's chunk when the late reader's first push comes."""


def late_read(immediate_patch: bool):
    """A reader that joins a stream late: the origin is at chunk LATE_K when the reader's first reply came, and
    pushes the rest every 0.5 ms. Returns (client, path, its GETs' times, the read, the last push's time), the
    read's bytes and pushed count checked."""
    n, k = LATE_N, LATE_K
    data = block(n, seed=18)
    client, path, clock = reader(stored(data), immediate_patch=immediate_patch)
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005)
    last_push = clock.now + RTT + 0.0001 + (n - 1 - k) * 0.0005
    timed = TimedPath(path, clock)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data and got.pushed == n - k
    return client, path, timed, got, last_push


def test_by_default_the_missed_chunks_are_asked_for_only_once_the_first_pass_ended():
    n, k = LATE_N, LATE_K
    client, path, timed, _, last_push = late_read(immediate_patch=False)
    assert sorted(path.gets) == list(range(k)), "the same chunks as at once, no more"
    first_push = last_push - (n - 1 - k) * 0.0005
    before = [i for t, i in zip(timed.asked_at, path.gets, strict=True) if t < first_push]
    after = [(t, i) for t, i in zip(timed.asked_at, path.gets, strict=True) if t >= first_push]
    assert len(before) < 40, "without a push, the read went on in order"
    assert after and min(t for t, _ in after) >= last_push, "once it joined, it waited for the first pass's end"
    assert [i for _, i in after] == sorted(i for _, i in after), "then lowest first"
    assert client.stream_quiet == 0, "the last chunk's push ends the wait: nothing more can come"


def test_with_immediate_patch_the_missed_chunks_are_asked_for_at_once():
    """The behaviour before the patch pass (`immediate_patch`): the chunks before the join are asked for while
    the pushes come, and the read ends about with the stream."""
    _, path, timed, _, last_push = late_read(immediate_patch=True)
    assert sorted(path.gets) == list(range(LATE_K))
    assert max(timed.asked_at) < last_push, "every missed chunk asked for before the stream's last push"


OWN_BEFORE_JOIN = 24
"""Chunks a reader of `patch_pass_read` gets with its own GETs before the first push (chunk k) reaches it: its
first window (8), then the two spans of 8 that the burst of their replies opens (read whole before the window
sends again: slow start doubled it to 16)."""


def patch_pass_read(n: int, k: int, seed: int, patch_pushes: list[int], every: float = 0.00005, **options):
    """A reader that joins at chunk k of a stream whose first pass pushes chunks k..n-1 (one per 0.5 ms), then,
    0.1 ms after the last of them (well before the reader's own patch GETs can come back), a patch pass led by
    another late member (on a shorter path) pushes `patch_pushes` in order, one per `every` seconds. (the
    result, the client, the path, the time of the patch pass's first push, the reader's GET times)."""
    data = block(n, seed=seed)
    node = stored(data)
    client, path, clock = reader(node, **options)
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.0005)
    first_patch = clock.now + RTT + 0.0001 + (n - 1 - k) * 0.0005 + 0.0001
    for m, idx in enumerate(patch_pushes):
        path.push(first_patch + m * every, idx, n)
    timed = TimedPath(path, clock)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    return got, client, path, first_patch, timed.asked_at


def test_in_the_patch_pass_a_reader_follows_the_member_ahead_of_it():
    """The patch pass's pushes run ahead of the reader's own patch GETs: it takes them, asks for nothing beyond
    the newest one, and fetches only what its first patch GETs (sent before the first patch push came) brought."""
    n, k = 300, 200
    got, client, path, first_patch, asked_at = patch_pass_read(n, k, 41, list(range(k)))
    first_new = first_patch + OWN_BEFORE_JOIN * 0.00005  # the first patch push of a chunk the reader lacks
    patch_gets = [i for t, i in zip(asked_at, path.gets, strict=True) if first_patch - RTT < t < first_new]
    assert patch_gets == list(range(OWN_BEFORE_JOIN, OWN_BEFORE_JOIN + len(patch_gets))), "lowest first"
    assert [i for t, i in zip(asked_at, path.gets, strict=True) if t >= first_new] == [], \
        "nothing asked once the patch pass's pushes came"
    assert sorted(set(path.gets)) == sorted(path.gets), "no chunk asked twice"
    assert got.pushed >= n - len(path.gets) and len(patch_gets) <= 2 * 32
    assert client.stream_quiet == 0 and client.stream_holes == 0


def test_in_the_patch_pass_a_lost_push_is_asked_for_as_a_hole():
    n, k, lost = 300, 200, 150
    _, client, path, _, _ = patch_pass_read(n, k, 42, [i for i in range(k) if i != lost])
    assert lost in path.gets and path.gets.count(lost) == 1
    assert client.stream_holes == 1 and client.stream_quiet == 0
    assert len(path.gets) < 2 * 32 + 8


def test_when_the_patch_pass_goes_quiet_the_reader_asks_for_everything_left():
    """The member leading the patch pass stops halfway (it had all it missed, or died): after the quiet spell
    the reader fetches the rest, in order, each chunk once."""
    n, k, m = 300, 200, 120
    _, client, path, first_patch, asked_at = patch_pass_read(n, k, 43, list(range(m)))
    assert set(range(m, k)) <= set(path.gets), "the chunks the patch pass did not bring"
    assert sorted(set(path.gets)) == sorted(path.gets), "no chunk asked twice"
    late = [i for t, i in zip(asked_at, path.gets, strict=True) if t > first_patch + m * 0.00005]
    assert late == list(range(m, k)), "after the quiet spell: the rest, lowest first"
    assert client.stream_quiet == 1


def test_a_first_pass_that_goes_quiet_is_led_on_by_the_reader_which_then_patches_lowest_first():
    """The first pass stops before the last chunk (its leader stalled or died): after the quiet spell the read
    leads the rest of the first pass (its replies beyond the front would feed the others), and once it has the
    last chunk it asks for the chunks before its join, lowest first, as in any patch pass."""
    n, k, m = 300, 100, 180
    data = block(n, seed=44)
    node = stored(data)
    client, path, clock = reader(node)
    schedule_pushes(path, clock, k, m, n, start=RTT + 0.0001, every=0.0005)
    last_push = clock.now + RTT + 0.0001 + (m - k) * 0.0005
    timed = TimedPath(path, clock)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data and got.pushed == m - k + 1
    early = [i for t, i in zip(timed.asked_at, path.gets, strict=True) if t <= last_push]
    late = [i for t, i in zip(timed.asked_at, path.gets, strict=True) if t > last_push]
    assert max(early) < k, "nothing beyond the join while the first pass went on"
    rest, patches = list(range(m + 1, n)), sorted(set(range(k)) - set(early))
    assert late == rest + patches, "the rest of the first pass in order, then the missed chunks lowest first"
    assert client.stream_quiet == 1


def test_taken_pushes_keep_a_read_from_the_silence_bound_duplicates_do_not():
    from kvpool.errors import KVPTimeout

    n, k = 100, 50
    data = block(n, seed=19)
    node = stored(data)
    replies: list[bytes] = []

    def only_the_first_reply(datagram, direction):
        """The reader's own GETs are answered once (chunk 0: the version), then never again."""
        if direction != "in" or Header.unpack(datagram).req_id == 0:
            return False
        replies.append(datagram)
        return len(replies) > 1

    client, path, clock = reader(node, drop=only_the_first_reply, give_up=1.0, initial_window=1)
    started = clock.now
    # one push every 60 ms for 3 s (three times give_up), then the same chunks again as duplicates for 3 s
    schedule_pushes(path, clock, k, n - 1, n, start=RTT + 0.0001, every=0.06)
    last_new = started + RTT + 0.0001 + (n - 1 - k) * 0.06
    schedule_pushes(path, clock, k, n - 1, n, start=last_new - started + 0.06, every=0.06)
    with client, pytest.raises(KVPTimeout, match="1s of silence"):
        client.get_block(PH, n)
    assert client.pushed == n - k and client.pushed_duplicates > 0
    assert last_new + 1.0 <= clock.now < last_new + 1.1, \
        "it failed give_up after the last new chunk, neither earlier (pushes were progress) nor later (duplicates)"


def test_a_stream_behind_the_read_does_not_hold_it_back():
    """The stream stalls, the read falls back and gets ahead of it; when pushes come again they bring only
    chunks the read has: it goes on at its own pace instead of waiting for the stream to catch up."""
    n, k = 600, 20
    data = block(n, seed=20)
    node = stored(data)
    client, path, clock = reader(node, window=4, initial_window=4)  # 2 chunks per ms on its own
    started = clock.now
    schedule_pushes(path, clock, k, 100, n, start=RTT + 0.0001, every=0.0005)
    # 150 ms of silence, then the stream goes on from where it stopped, at one chunk per 2 ms (1 s to the end)
    schedule_pushes(path, clock, 101, n - 1, n, start=RTT + 0.0001 + 80 * 0.0005 + 0.15, every=0.002)
    with client:
        got = client.get_block(PH, n)
    assert got.data == data
    assert sorted(set(path.gets)) == sorted(path.gets), "no chunk asked twice"
    assert clock.now - started < 0.5, "at its own pace, not the stream's second"
    assert client.stream_quiet == 1 and client.pushed_duplicates > 0


# ---- through the kvswitch program ----------------------------------------------------------------------------


def _ipv4_frame(src_mac: str, dst_mac: str, src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    """Ethernet / IPv4 (checksummed) / UDP (checksum 0) around a KVP message."""
    import socket
    import struct

    def mac(text: str) -> bytes:
        return bytes(int(b, 16) for b in text.split(":"))

    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), 0, 0, 64, 17, 0,
                         socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    header = header[:10] + struct.pack("!H", ~total & 0xFFFF) + header[12:]
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0)
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + header + udp + payload


def _udp_of(frame: bytes) -> tuple[tuple[str, int], tuple[str, int], bytes]:
    """(source, destination, payload) of an Ethernet / IPv4 / UDP frame."""
    import socket
    import struct

    ihl = (frame[14] & 0x0F) * 4
    ip = frame[14:14 + ihl]
    sport, dport, length, _ = struct.unpack("!HHHH", frame[14 + ihl:22 + ihl])
    payload = frame[22 + ihl:14 + ihl + length]
    return (socket.inet_ntoa(ip[12:16]), sport), (socket.inet_ntoa(ip[16:20]), dport), payload


class SwitchedPath:
    """A reader behind port 1 of the in-process kvswitch program with the stream join on, the storage node (a
    real `StorageNode`) behind port 2, and an origin reader (scripted GETs) behind port 1 too, all on one
    simulated clock: each datagram crosses the program, the node answers at once, frames reach the readers `RTT`
    later. A `Transport` for the reader's `KVPClient`."""

    peer = "kvswitch program"

    def __init__(self, target, node: StorageNode, clock: SimClock, reader_port: int, origin_port: int) -> None:
        from kvtesting.kvnet import CLIENT_IP, STORAGE_IP

        self.target, self.node, self.clock = target, node, clock
        self.reader = (CLIENT_IP, reader_port)
        self.origin = (CLIENT_IP, origin_port)
        self.storage = (STORAGE_IP, 7420)
        self.due: list[tuple[float, int, bytes | tuple[int, int]]] = []
        self.seq = 0
        self.node_gets: list[tuple[int, int]] = []
        """(UDP port of the reader, chunk) of every GET the storage node received."""

    def _at(self, t: float, what) -> None:
        self.seq += 1
        heapq.heappush(self.due, (t, self.seq, what))

    def origin_get(self, at: float, idx: int, chunks: int, ph: int) -> None:
        self._at(at, (idx, chunks, ph))

    def _cross(self, port: int, frame: bytes) -> None:
        """`frame` into the program at `port`; what leaves towards the node is answered, what leaves towards
        port 1 is delivered (to the reader) after RTT."""
        from kvtesting.kvnet import STORAGE_MAC, SWITCH_MAC

        for out_port, out in self.target.process(port, frame):
            src, dst, payload = _udp_of(out)
            if out_port == 2:
                h = Header.unpack(payload)
                if h.opcode == Opcode.GET:  # (a span GET: each chunk it asks for)
                    asked = range(h.chunk_idx, min(h.chunk_idx + max(h.aux, 1), h.chunk_count))
                    self.node_gets += [(src[1], c) for c in asked]
                for reply in self.node.receive(payload, src):
                    self._cross(2, _ipv4_frame(STORAGE_MAC, SWITCH_MAC, self.storage, reply.to, b"".join(reply.parts)))
            elif out_port == 1 and dst == self.reader:
                self._at(self.clock.now + RTT, payload)

    def send(self, data: bytes) -> None:
        from kvtesting.kvnet import CLIENT_MAC, SWITCH_MAC

        self._cross(1, _ipv4_frame(CLIENT_MAC, SWITCH_MAC, self.reader, self.storage, data))

    def recv(self, timeout: float) -> bytes | None:
        from kvtesting.kvnet import CLIENT_MAC, SWITCH_MAC

        while self.due and self.due[0][0] <= self.clock.now + timeout:
            when, _, what = heapq.heappop(self.due)
            self.clock.now = max(self.clock.now, when)
            if isinstance(what, bytes):
                return what
            idx, chunks, ph = what
            get = encode(Header(Opcode.GET, flags=Flag.STREAM, req_id=1000 + idx, prefix_hash=ph, chunk_idx=idx,
                                chunk_count=chunks, chunk_shift=10))
            self._cross(1, _ipv4_frame(CLIENT_MAC, SWITCH_MAC, self.origin, self.storage, get))
        self.clock.now += max(timeout, 0.0) + 1e-9
        return None

    def close(self) -> None:
        self.due.clear()


@pytest.fixture(scope="module")
def kvswitch_program():
    from kvtesting.kvnet import P4_MAIN

    if not (P4_MAIN.parent / "stream.p4").is_file():
        pytest.skip("the program has no stream join (p4src/stream.p4 is missing)")
    from softswitch.frontend import load_program

    return load_program(str(P4_MAIN))


def streaming_switch(program):
    """The in-process switch with routes, port roles and the stream join as the controller installs them."""
    from controller.streaming import (
        CONFIG_ACTION,
        CONFIG_TABLE,
        STORAGE_PORT_ACTION,
        STORAGE_PORT_KEY,
        STORAGE_PORT_TABLE,
        StreamingOptions,
        session_of,
    )
    from kvtesting.kvnet import CPU_PORT, KvNet
    from softswitch.runtime import SoftSwitch
    from softswitch.target import Exact, Replica, TableEntry

    target = SoftSwitch.load(program, cpu_port=CPU_PORT)
    enums = {name: {m: program.type(name).value_of(m) for m in program.type(name).members}
             for name in ("port_role_t", "kvp_event_t", "stream_event_t")}
    net = KvNet(target, enums)
    net.install_routes()
    net.set_port_roles()
    for port in (1, 2, 3, 4):
        target.clone_session_set(session_of(port), [Replica(port)])
    target.table_insert(TableEntry(STORAGE_PORT_TABLE, {STORAGE_PORT_KEY: Exact(2)}, STORAGE_PORT_ACTION, {}))
    target.table_set_default(CONFIG_TABLE, CONFIG_ACTION, StreamingOptions(idle_us=30_000_000).config_params())
    return target


@pytest.mark.slow  # loading the program takes seconds; the read itself runs on the simulated clock
def test_a_reader_joins_a_stream_of_the_kvswitch_program_and_the_node_serves_the_block_about_once(kvswitch_program):
    n, k = 64, 24
    data = random.Random(21).randbytes(n * CHUNK)
    node = stored(data)
    clock = SimClock()
    path = SwitchedPath(streaming_switch(kvswitch_program), node, clock, reader_port=40002, origin_port=40001)
    for idx in range(n):  # the origin asks a chunk per ms; the reader starts when it is at chunk k
        path.origin_get(clock.now - k * 0.001 + idx * 0.001, idx, n, PH)
    path.recv(0.0)  # the origin's first k GETs, before the reader starts
    with KVPClient(ClientOptions(timeout=0.05), path, clock=clock) as client:
        got = client.get_block(PH, None)
    assert got.data == data
    origin_gets = [c for port, c in path.node_gets if port == 40001]
    reader_gets = sorted(c for port, c in path.node_gets if port == 40002)
    assert origin_gets == list(range(n))
    assert got.pushed >= n - k - 8, "the pushes from the first reply on"
    assert reader_gets == sorted({c for c in range(n) if not got.chunks[c].pushed}), "the rest, each once"
    assert len(path.node_gets) < n + k + 8, "the node served the block once plus what the reader missed"


@pytest.mark.slow  # loading the program takes seconds; the read itself runs on the simulated clock
def test_a_late_reader_patches_in_the_kvswitch_programs_patch_pass_each_missed_chunk_once(kvswitch_program):
    """With the real program: the reader joins at chunk k, takes the first pass's pushes, and asks for the chunks
    before its join only once the first pass ended (the switch's patch pass began); its patches at or beyond the
    patch front are pushed to the origin (which has them), and the patch pass ends at the join point."""
    from controller.streaming import EVENTS

    n, k = 64, 24
    data = random.Random(22).randbytes(n * CHUNK)
    node = stored(data)
    clock = SimClock()
    target = streaming_switch(kvswitch_program)
    path = SwitchedPath(target, node, clock, reader_port=40002, origin_port=40001)
    for idx in range(n):
        path.origin_get(clock.now - k * 0.001 + idx * 0.001, idx, n, PH)
    path.recv(0.0)
    origin_done = clock.now + (n - k) * 0.001
    asked_at: list[tuple[float, int]] = []
    cross = path._cross

    def timed_cross(port: int, frame: bytes) -> None:
        src, _, payload = _udp_of(frame)
        if port == 1 and src == path.reader and Header.unpack(payload).opcode == Opcode.GET:
            asked_at.append((clock.now, Header.unpack(payload).chunk_idx))
        cross(port, frame)

    path._cross = timed_cross  # type: ignore[method-assign]
    with KVPClient(ClientOptions(timeout=0.05), path, clock=clock) as client:
        got = client.get_block(PH, None)
    assert got.data == data
    reader_gets = sorted(c for port, c in path.node_gets if port == 40002)
    assert reader_gets == sorted({c for c in range(n) if not got.chunks[c].pushed}), "the rest, each once"
    first_push = min(c for c in range(n) if got.chunks[c].pushed)
    patches = [(t, c) for t, c in asked_at if c < first_push and t > asked_at[0][0] + 2 * RTT]
    assert patches and min(t for t, _ in patches) >= origin_done, "the missed chunks once the first pass ended"
    enums = kvswitch_program.type("stream_event_t")

    def event(name: str) -> int:
        return target.counter_read(EVENTS, enums.value_of(name))[0]

    assert (event("PATCH_PASS"), event("ENDED_LAST")) == (1, 0)
    assert event("PATCH_PUSHED") > 0 and event("ENDED_PATCHED") == 1, "the patch front reached the join point"


# ---- two members feeding each other (the frontier: whichever reads ahead leads) ---------------------------------


RECENT = 64
"""STREAM_RECENT: the chunks below a stream's front whose first reply the switch still pushes when the front skipped
them (p4src/stream.p4)."""


class FrontierSwitch:
    """Two (or more) real readers on one simulated clock, behind a switch that runs the stream join's frontier
    rule (docs/dataplane.md, *Stream join*): every reader is a member of the block's stream (the first one its
    origin; a reader that starts late from its first GET on, its join point the front then); a member's reply
    is pushed to the other members when its chunk is at or beyond the front (then the front moves past it) or it
    is the origin's, or when it is the first reply of a chunk within `RECENT` below the front that the front
    skipped (replies out of order); the last chunk pushed ends the stream, or, when a reader joined past chunk 0,
    begins the patch pass: a member's reply at or beyond the patch front and below the highest join point is
    pushed (and, as in the first pass, a skipped chunk's first reply within `RECENT` below the patch front), and
    the patch front reaching that join point ends the stream.

    Each reader runs `get_block` in its own thread; the clock moves only when every reader still reading waits
    for a datagram (a discrete-event simulation: no verdict depends on how fast the threads run). A reader's
    reply passes the switch `rtt(name, now, chunk)` after its GET (and reaches every reader at once)."""

    def __init__(self, node: StorageNode, rtt: Callable[[str, float, int], float]) -> None:
        import threading

        self.node = node
        self.rtt = rtt
        self.clock = SimClock()
        self.lock = threading.Condition()
        self.due: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.inboxes: dict[str, list[bytes]] = {}
        self.waiting: dict[str, float] = {}
        self.reading: set[str] = set()
        self.members: list[tuple[str, tuple[str, int]]] = []
        self.front = 0
        self.ended = False
        self.gets: dict[str, list[int]] = {}
        self.join_points: dict[str, int] = {}
        self.patch_front: int | None = None
        """None: the first pass; else the patch pass's front."""
        self.recent: set[int] = set()
        """Chunks pushed in the pass under way (the switch keeps the `RECENT` below the front)."""

    def endpoint(self, name: str, address: tuple[str, int], late: bool = False) -> FrontierSwitch.Endpoint:
        """A reader; `late`: a member only from its first GET on (else from the start, in creation order)."""
        self.inboxes[name] = []
        self.gets[name] = []
        if not late:
            self.members.append((name, address))
        self.reading.add(name)
        return FrontierSwitch.Endpoint(self, name, address)

    def _join(self, name: str, address: tuple[str, int]) -> None:
        if all(member != name for member, _ in self.members) and not self.ended:
            self.members.append((name, address))
            self.join_points[name] = self.front

    def _reply_passes(self, name: str, data: bytes) -> None:
        h = Header.unpack(data)
        self.inboxes[name].append(data)
        if (self.ended or h.status not in (Status.HIT_SERVER, Status.HIT_SWITCH) or not h.flags & Flag.VALUE
                or all(member != name for member, _ in self.members)):
            return
        join_max = max(self.join_points.values(), default=0)
        chunk = h.chunk_idx
        top = self.front if self.patch_front is None else self.patch_front
        skipped = top - RECENT <= chunk < top and chunk not in self.recent
        if self.patch_front is not None:
            if not self.patch_front <= chunk < join_max and not skipped:
                return  # a patch
            self.recent.add(chunk)
            self.patch_front = max(self.patch_front, chunk + 1)
            self.ended = self.patch_front == join_max
        else:
            beyond = chunk >= self.front
            if not beyond and not skipped and name != self.members[0][0]:
                return  # a patch
            self.recent.add(chunk)
            self.front = max(self.front, chunk + 1)
            if chunk == h.chunk_count - 1:
                self.ended = join_max == 0
                self.patch_front = None if self.ended else 0
                self.recent = set()
        pushed = h.replace(flags=h.flags | Flag.PUSHED, req_id=0).pack() + data[len(h.pack()):]
        for other, _ in self.members:
            if other != name:
                self.inboxes[other].append(pushed)

    def all_blocked(self) -> bool:
        """Every reader still reading waits, with nothing to read and its deadline not reached."""
        now = self.clock.now
        return all(self.waiting.get(name, now) > now and not self.inboxes[name] for name in self.reading)

    def _step(self) -> None:
        """Every reader still reading waits: move the clock to the next event or deadline, deliver what is due."""
        deadline = min(self.waiting.values())
        when = min(self.due[0][0], deadline) if self.due else deadline
        self.clock.now = max(self.clock.now, when)
        while self.due and self.due[0][0] <= self.clock.now:
            heapq.heappop(self.due)[2]()
        self.lock.notify_all()

    class Endpoint:
        """One reader's transport."""

        peer = "frontier switch"

        def __init__(self, switch: FrontierSwitch, name: str, address: tuple[str, int]) -> None:
            self.switch, self.name, self.address = switch, name, address

        def send(self, data: bytes) -> None:
            sw = self.switch
            with sw.lock:
                h = Header.unpack(data)
                if h.opcode == Opcode.GET:  # (a span GET: each chunk it asks for)
                    sw.gets[self.name] += range(h.chunk_idx, min(h.chunk_idx + max(h.aux, 1), h.chunk_count))
                    sw._join(self.name, self.address)
                for out in sw.node.receive(data, self.address):
                    reply = b"".join(out.parts)
                    sw.seq += 1
                    at = sw.clock.now + sw.rtt(self.name, sw.clock.now, h.chunk_idx)
                    heapq.heappush(sw.due, (at, sw.seq, lambda r=reply: sw._reply_passes(self.name, r)))

        def recv(self, timeout: float) -> bytes | None:
            sw = self.switch
            with sw.lock:
                inbox = sw.inboxes[self.name]
                deadline = sw.clock.now + max(timeout, 0.0) + 1e-9
                while not inbox and sw.clock.now < deadline:
                    sw.waiting[self.name] = deadline
                    if sw.all_blocked():
                        sw._step()
                    else:
                        sw.lock.wait(1.0)
                    sw.waiting.pop(self.name, None)
                return inbox.pop(0) if inbox else None

        def sleep_until(self, t: float) -> None:
            """Wait until simulated time `t` (the clock moves when every reader still reading waits)."""
            sw = self.switch
            with sw.lock:
                while sw.clock.now < t:
                    sw.waiting[self.name] = t
                    if sw.all_blocked():
                        sw._step()
                    else:
                        sw.lock.wait(1.0)
                    sw.waiting.pop(self.name, None)

        def done(self) -> None:
            sw = self.switch
            with sw.lock:
                sw.reading.discard(self.name)
                sw.lock.notify_all()

        def close(self) -> None:
            pass


def read_together(switch: FrontierSwitch, readers: list[tuple[str, tuple[str, int]]], n: int,
                  starts: dict[str, float] | None = None, count_known: bool = True, **options):
    """Each reader's `get_block` in its own thread, all started at once (or a reader in `starts` that many
    simulated seconds later), knowing the block's chunk count `n` or not (`count_known`); (their results, their
    clients)."""
    starts = starts or {}
    import threading

    results: dict[str, object] = {}
    clients: dict[str, KVPClient] = {}

    def run_one(name: str, endpoint: FrontierSwitch.Endpoint) -> None:
        try:
            endpoint.sleep_until(switch.clock.now + starts.get(name, 0.0))
            with clients[name]:
                results[name] = clients[name].get_block(PH, n if count_known else None)
        except Exception as exc:  # reported by the test
            results[name] = exc
        finally:
            endpoint.done()

    threads = []
    for name, address in readers:
        endpoint = switch.endpoint(name, address, late=name in starts)
        clients[name] = KVPClient(ClientOptions(timeout=0.05, **options), endpoint, clock=switch.clock)
        threads.append(threading.Thread(target=run_one, args=(name, endpoint), daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)  # a hang of the simulation itself, not a verdict on the reads
        assert not thread.is_alive(), "the simulation hung"
    return results, clients


def jitter(name: str, chunk: int, seed: int) -> float:
    """A fixed fraction in [0, 1) for each (reader, chunk, seed): the same whatever order the threads run in."""
    return zlib.crc32(f"{name}:{chunk}:{seed}".encode()) / 2**32


def test_two_readers_released_together_share_one_lead_without_a_stall():
    """Two members start together on paths of the same 2 ms round trip, give or take 0.2 ms per request: each
    has a window in flight, so whichever's replies pass the switch first leads and the other takes its pushes
    (its replies beyond the front would lead in turn). Whatever the order: every byte right, no stall (no
    quiet-stream fallback, done about when one reader alone would be), and the node serves about one block: the
    replies that come out of order (the jitter) no longer leave holes that the follower reads itself, since the
    switch pushes a skipped chunk's first reply (before: up to 1.5 blocks, the lead moving between them as each
    one's own replies of the holes overtook the pushes). (Each asks in span GETs until its first push, then one GET
    per chunk: raced per span, both led for longer, 1.63 blocks.)"""
    n = 1000
    data = block(n, seed=31)
    for seed in range(6):
        node = stored(data)
        switch = FrontierSwitch(node, lambda name, now, chunk, seed=seed: 0.002 + 0.0002 * jitter(name, chunk, seed))
        started = switch.clock.now
        results, clients = read_together(switch, [("A", ORIGIN), ("B", READER)], n)
        for name in ("A", "B"):
            got = results[name]
            assert not isinstance(got, Exception), got
            assert got.data == data and got.version == 1, (seed, name)
            assert clients[name].stream_quiet == 0, (seed, name, "a stall waited out")
        asked = len(switch.gets["A"]) + len(switch.gets["B"])
        assert asked <= 1.05 * n, (seed, f"{asked} GETs for {n} chunks")
        assert switch.clock.now - started < 0.1, (seed, "no stall: about one reader's time alone (70 ms)")
        assert max(results["A"].pushed, results["B"].pushed) > 0.95 * n, (seed, "one fed the other")


def test_a_follower_is_fed_by_the_leader_and_asks_only_what_it_missed():
    """One leader on a fast path, a follower on a slow one: the follower takes the pushes and, once behind,
    asks for nothing beyond the newest one."""
    n = 1000
    data = block(n, seed=32)
    node = stored(data)
    switch = FrontierSwitch(node, lambda name, now, chunk: 0.001 if name == "A" else 0.003)
    results, clients = read_together(switch, [("A", ORIGIN), ("B", READER)], n)
    a, b = results["A"], results["B"]
    assert not isinstance(a, Exception) and not isinstance(b, Exception), (a, b)
    assert a.data == data and b.data == data
    assert b.pushed > n - 100
    assert len(switch.gets["A"]) == n, "the leader read every chunk once"
    assert len(switch.gets["B"]) < 100, "the follower only what it got itself before the leader passed it"
    assert clients["B"].stream_quiet == 0


def test_late_readers_share_their_missed_chunks_in_the_patch_pass():
    """A reads alone from 0; B starts 15 ms later, C 30 ms later (each joins at the front then). By default B and
    C ask for what they missed once the first pass ended and share it in the patch pass: the node serves the block
    once plus about C's missed prefix (B's lies inside it), against both prefixes with immediate patches."""
    n = 1000
    data = block(n, seed=33)
    served, joins = {}, {}
    for immediate in (False, True):
        node = stored(data)
        switch = FrontierSwitch(node, lambda name, now, chunk: 0.002)
        results, clients = read_together(switch, [("A", ORIGIN), ("B", READER), ("C", ("10.0.0.3", 40003))], n,
                                         starts={"B": 0.015, "C": 0.030}, immediate_patch=immediate)
        for name in ("A", "B", "C"):
            got = results[name]
            assert not isinstance(got, Exception), got
            assert got.data == data, (immediate, name)
        served[immediate] = sum(len(g) for g in switch.gets.values())
        joins[immediate] = switch.join_points
        assert 0 < joins[immediate]["B"] < joins[immediate]["C"] < n, joins
        if not immediate:
            assert switch.patch_front == joins[immediate]["C"] and switch.ended, "the patch pass reached C's join"
            assert max(clients[name].stream_quiet for name in "BC") <= 1
    early = 2 * 2 * 32  # what B and C each read of the block's start before their first push, at most
    # and in the patch pass, a window each of holes at most: which of B and C leads the patch pass and when the
    # other takes over depends on how the reader threads interleave at equal simulated times (1,568 or less)
    handover = 2 * 32
    assert served[False] <= n + joins[False]["C"] + early + handover, (served, joins)
    assert served[True] >= n + joins[True]["B"] + joins[True]["C"] - early, (served, joins)
    assert served[False] < served[True]


@pytest.mark.parametrize("count_known", [True, False])
def test_eight_readers_spread_over_a_lone_block_time_cost_the_node_one_block_plus_the_last_join_point(count_known):
    """Eight readers whose starts are spread evenly over the time one reader alone takes for the block, behind a
    switch whose round trip grows by half with each member it copies to (the softswitch's copies: the stream slows
    as readers join, so the last one joins about a third into the block). The node serves at least the block plus
    the last joiner's missed prefix (the join point max, J), which only it holds; the patch pass must cost no more:
    each late reader's first window (before its first push) and a little slack, not a burst of everyone's GETs of
    the same chunks when the patch pass begins or whenever the member leading it has what it needs (a member whose
    turn comes asks one chunk first, and follows if the leader's pushes come before its reply), nor a GET per
    member of every
    chunk the front skipped when replies come out of order (before: 0.4-0.55 of a block more, each late reader
    waiting out a quiet stream several times). A reader that does not know the count asks chunk 0 alone first;
    the pushes held until its reply then put it in the stream before it asks for more, and the last joiner leads
    the whole patch pass."""
    n, readers = 2048, 8
    data = block(n, seed=34)
    lone = FrontierSwitch(stored(data), lambda name, now, chunk: 0.002)
    started = lone.clock.now
    read_together(lone, [("A", ORIGIN)], n)
    spread = lone.clock.now - started
    names = [chr(ord("A") + i) for i in range(readers)]
    addresses = [(f"10.0.0.{i + 1}", 40001 + i) for i in range(readers)]
    for seed in range(3):
        members: list[tuple[str, tuple[str, int]]] = []

        def rtt(name: str, now: float, chunk: int, seed: int = seed, members: list = members) -> float:
            return 0.002 * (1 + 0.5 * len(members)) + 0.0002 * jitter(name, chunk, seed)

        switch = FrontierSwitch(stored(data), rtt)
        switch.members = members
        results, clients = read_together(switch, list(zip(names, addresses, strict=True)), n, count_known=count_known,
                                         starts={name: spread * i / (readers - 1) for i, name in enumerate(names) if i})
        for name in names:
            got = results[name]
            assert not isinstance(got, Exception), got
            assert got.data == data, (seed, name)
            assert clients[name].stream_quiet == 0, (seed, name, "a quiet stream waited out")
        served = sum(len(g) for g in switch.gets.values())
        last_join = max(switch.join_points.values())
        for name, joined in switch.join_points.items():  # the counter the benchmark reports per reader
            assert joined <= clients[name].stream_missed < joined + 64, (seed, name, joined)
        assert 0.25 * n < last_join < 0.5 * n, (seed, switch.join_points)
        # each late reader's first GETs before its first push: a window of single GETs when it knows the count;
        # only chunk 0 when it does not (the pushes held until that reply put it in the stream first)
        first_windows = (8 if count_known else 1) * (readers - 1)
        assert served <= n + last_join + first_windows + 16, (seed, served, last_join)
        if not count_known:
            last = max(switch.join_points, key=switch.join_points.__getitem__)
            assert len(switch.gets[last]) <= last_join + 10, (seed, "the last joiner led the whole patch pass")
