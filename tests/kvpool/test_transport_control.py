"""The client's transport control on a simulated clock: RTO from round trips, backoff, the congestion window's
growth and cuts (loss, F_CONGESTED, BUSY), the silence bound, and reads under loss that never give up early.

Everything here runs on simulated time (`SimClock`, `SimTransport` from test_client_loss): a clock that moves
only while the client waits for something that cannot come, so no verdict depends on how busy the machine is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random

import pytest

from kvpool.client import ClientOptions, KVPClient, KVPTimeout
from kvpool.congestion import CongestionWindow, Pacer, WindowLimits
from kvpool.constants import Flag, Opcode
from kvpool.rto import RtoBounds, RtoEstimator
from kvpool.server import StorageNode, StorageOptions
from kvpool.transport import LossyTransport
from kvpool.wire import Header
from tests.kvpool.test_client_loss import SimClock, SimTransport

# ---- RTO (RFC 6298) ---------------------------------------------------------------------------------------


def test_the_rto_starts_at_the_initial_value_and_follows_rfc_6298():
    rto = RtoEstimator(RtoBounds(initial=0.5, minimum=0.001, maximum=60))
    assert rto.rto == 0.5 and rto.srtt is None
    rto.sample(0.1)  # first: SRTT = R, RTTVAR = R/2
    assert rto.srtt == pytest.approx(0.1) and rto.rttvar == pytest.approx(0.05)
    assert rto.rto == pytest.approx(0.1 + 4 * 0.05)
    rto.sample(0.2)  # RTTVAR = 3/4 0.05 + 1/4 |0.1 - 0.2|, SRTT = 7/8 0.1 + 1/8 0.2
    assert rto.rttvar == pytest.approx(0.0625) and rto.srtt == pytest.approx(0.1125)
    assert rto.rto == pytest.approx(0.1125 + 4 * 0.0625)


def test_steady_round_trips_bring_the_rto_down_to_its_floor():
    rto = RtoEstimator(RtoBounds(initial=0.5, minimum=0.02, maximum=4.0))
    for _ in range(200):
        rto.sample(0.001)
    assert rto.srtt == pytest.approx(0.001, rel=1e-3)
    assert rto.rto == 0.02


def test_backoff_doubles_per_send_up_to_the_maximum():
    rto = RtoEstimator(RtoBounds(initial=0.1, minimum=0.02, maximum=1.0))
    assert [rto.backoff(n) for n in (1, 2, 3, 4, 5, 6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


# ---- the congestion window -----------------------------------------------------------------------------


def test_slow_start_doubles_per_window_then_grows_one_per_window():
    w = CongestionWindow(WindowLimits(initial=4, cap=1000))
    w.ssthresh = 16
    for _ in range(4):
        w.on_reply(False)
    assert w.cwnd == 8  # one per reply in slow start: doubled in one window
    for _ in range(8):
        w.on_reply(False)
    assert w.cwnd == 16
    for _ in range(16):  # congestion avoidance: + 1/cwnd per reply, about one per window
        w.on_reply(False)
    assert 16.9 < w.cwnd < 17.1


def test_the_window_never_grows_past_its_cap_nor_below_its_minimum():
    w = CongestionWindow(WindowLimits(initial=8, cap=32))
    for _ in range(1000):
        w.on_reply(False)
    assert w.cwnd == 32 and w.size == 32
    for t in range(100):
        w.on_loss(sent_at=float(t), now=t + 0.5)
    assert w.cwnd == 1 and w.size == 1


def test_a_loss_cuts_the_window_to_seven_tenths_once_per_round_trip():
    w = CongestionWindow(WindowLimits(initial=32, cap=32))
    w.on_loss(sent_at=1.0, now=2.0)
    assert w.cwnd == pytest.approx(22.4)
    w.on_loss(sent_at=1.5, now=2.1)  # sent before the cut: the same loss event
    assert w.cwnd == pytest.approx(22.4)
    w.on_loss(sent_at=2.05, now=3.0)  # sent after it: a new event
    assert w.cwnd == pytest.approx(22.4 * 0.7) and w.losses == 3 and w.cuts == 2


def test_busy_halves_the_window_once_per_round_trip():
    w = CongestionWindow(WindowLimits(initial=20, cap=32))
    w.on_busy(sent_at=1.0, now=1.1)
    w.on_busy(sent_at=1.05, now=1.2)
    assert w.cwnd == 10 and w.busy == 2 and w.cuts == 1


def test_marks_cut_by_alpha_over_two_and_alpha_follows_the_marked_fraction():
    w = CongestionWindow(WindowLimits(initial=32, cap=1000))
    w.ssthresh = 32
    assert w.alpha == 1.0
    for _ in range(32):  # one round, every reply marked: alpha stays 1, the window halves
        w.on_reply(True)
    assert w.cwnd == 16 and w.alpha == pytest.approx(1.0)
    seen = [w.alpha]
    while w.alpha > 0.1:  # unmarked rounds: alpha decays by (1 - g) per round, nothing is cut
        cwnd = w.cwnd
        w.on_reply(False)
        assert w.cwnd > cwnd
        if w.alpha != seen[-1]:
            seen.append(w.alpha)
    assert seen == pytest.approx([(15 / 16) ** k for k in range(len(seen))])
    assert len(seen) - 1 == 36  # (15/16)^36 < 0.1 < (15/16)^35
    cuts, i = w.cuts, 0
    while w.cuts == cuts:  # one reply in ten marked: at the end of the round, a small cut of alpha / 2
        before = w.cwnd
        w.on_reply(i % 10 == 0)
        i += 1
    assert w.cwnd == pytest.approx(before * (1 - w.alpha / 2), rel=1e-3) and 0.08 < w.alpha < 0.1


def test_a_fixed_window_ignores_every_signal():
    w = CongestionWindow(WindowLimits(initial=8, cap=32), adaptive=False)
    w.on_loss(0.0, 1.0)
    w.on_busy(1.5, 2.0)
    for _ in range(100):
        w.on_reply(True)
    assert w.size == 32 and w.marks == 100


def test_pacing_allows_a_burst_then_one_send_per_interval():
    p = Pacer(burst=2)
    now, interval = 10.0, 0.001
    sent = 0
    while p.delay(now, interval) == 0:
        p.sent(now, interval)
        sent += 1
    assert sent == 3  # the burst (2) plus the send the rate allows now
    assert p.delay(now, interval) == pytest.approx(interval)
    now += interval
    assert p.delay(now, interval) == 0


# ---- the client on simulated time ----------------------------------------------------------------------


def sim_client(node: StorageNode, loss: float = 0.0, seed: int = 0, drop=None, transport=None,
               **options) -> KVPClient:
    clock = SimClock()
    inner = transport(node, clock) if transport is not None else SimTransport(node, clock)
    lossy = LossyTransport(inner, loss, random.Random(seed), drop)
    return KVPClient(dataclasses.replace(ClientOptions(timeout=0.05, retries=0), **options), lossy, clock=clock)


def stored(blocks: dict[int, bytes], chunk_size: int = 1024) -> StorageNode:
    node = StorageNode(StorageOptions())
    with sim_client(node) as writer:
        for ph, data in blocks.items():
            writer.put_block(ph, data, version=1, chunk_size=chunk_size)
    return node


def test_the_window_grows_while_replies_come_unmarked():
    node = stored({1: bytes(256 * 1024)})
    with sim_client(node, window=64, initial_window=2) as client:
        client.get_block(1)
        assert client.path.congestion.cwnd == 64 and client.resent == 0


class MarkingTransport(SimTransport):
    """Every reply comes with F_CONGESTED set, as a switch with an egress queue over its threshold sends it."""

    def recv(self, timeout):
        data = super().recv(timeout)
        if data is None:
            return None
        marked = bytearray(data)
        marked[5] |= Flag.CONGESTED  # flags: byte 5 of the header (magic 2, ver, opcode, status)
        return bytes(marked)


def test_marked_replies_shrink_the_window_to_its_minimum_and_the_read_still_completes():
    data = random.Random(5).randbytes(256 * 1024)
    node = stored({1: data})
    with sim_client(node, transport=MarkingTransport, window=64, initial_window=32) as client:
        assert client.get_block(1).data == data
        assert client.path.congestion.size == 1 and client.path.congestion.marks == 256
        assert client.resent == 0, "a mark is not a loss"


def test_rtt_samples_follow_karns_rule():
    node = stored({1: bytes(50 * 1024)})
    dropped = []

    def drop_chunk_7_twice(data, direction):
        h = Header.unpack(data)
        if direction == "out" and h.opcode == Opcode.GET and h.chunk_idx == 7 and len(dropped) < 2:
            dropped.append(h.chunk_idx)
            return True
        return False

    with sim_client(node, drop=drop_chunk_7_twice) as client:
        block = client.get_block(1, chunks=50)
        assert [c.attempts for c in block.chunks if c.attempts > 1] == [3]
        assert client.path.rto.samples == 49, "the resent chunk's reply is no sample"
        assert client.resent == 2
        assert client.path.rto.srtt is not None and client.path.rto.srtt < 0.001, \
            "the resend's reply did not count as a round trip of a whole timeout"


class BusyNode(StorageNode):
    """Answers the first `busy` GETs of every chunk BUSY (as a node over its queue limit does)."""

    def __init__(self, busy: int) -> None:
        super().__init__(StorageOptions())
        self.busy = busy
        self.shed: dict[int, int] = {}

    def receive(self, data, peer):
        h = Header.unpack(data) if len(data) >= 44 else None
        if h is not None and h.opcode == Opcode.GET and self.shed.get(h.chunk_idx, 0) < self.busy:
            self.shed[h.chunk_idx] = self.shed.get(h.chunk_idx, 0) + 1
            return self._busy(data, peer)  # one BUSY per chunk it asks for
        return super().receive(data, peer)


def test_busy_is_retried_after_a_backoff_never_counted_as_a_try_and_cuts_the_window():
    data = random.Random(3).randbytes(20 * 1024)
    node = BusyNode(busy=3)
    with sim_client(node) as writer:
        writer.put_block(9, data, version=1, chunk_size=1024)
    with sim_client(node, retries=0, initial_window=16, window=16) as client:  # retries=0: no try to spare
        assert client.get_block(9, chunks=20).data == data
        assert client.busy == 60 and client.resent == 0
        assert client.path.congestion.busy == 60 and client.path.congestion.cwnd < 16


def test_a_read_fails_only_after_give_up_seconds_of_silence_naming_what_was_last_heard():
    node = stored({0xD0: bytes(100 * 1024)})
    answered = []

    def silent_after_ten_replies(data, direction):
        if direction == "in":
            answered.append(data)
        return direction == "in" and len(answered) > 10

    with sim_client(node, drop=silent_after_ten_replies, give_up=7.0, max_rto=1.0) as client, \
            pytest.raises(KVPTimeout) as err:
        started = client.clock()  # the simulated clock: no real time passes
        try:
            client.get_block(0xD0, chunks=100)
        finally:
            simulated_s = client.clock() - started
    text = str(err.value)
    assert "7s of silence" in text and "ph=0x00000000000000d0" in text and "in-process node" in text
    assert "last heard" in text and "GET_REPLY" in text and "HIT_SERVER" in text
    assert 7.0 <= simulated_s < 7.1, "failed exactly when 7 simulated seconds passed without a reply"


def test_a_read_that_hears_something_keeps_going_however_many_times_one_request_was_lost():
    node = stored({1: bytes(40 * 1024)})
    lost = []

    def lose_chunk_3_twenty_times(data, direction):
        h = Header.unpack(data)
        if direction == "out" and h.chunk_idx == 3 and len(lost) < 20:
            lost.append(h)
            return True
        return False

    with sim_client(node, drop=lose_chunk_3_twenty_times, retries=0, max_rto=0.5) as client:
        block = client.get_block(1, chunks=40)
    assert block.chunks[3].attempts == 21


# ---- the failure of four readers under 5% loss per hop ----------------------------------------------------

HOP_LOSS = 0.05
EACH_WAY = 1 - (1 - HOP_LOSS) ** 2
"""Reader -> switch -> storage node and back: two lossy veth hops each way (18.5% per round trip)."""


@pytest.mark.parametrize("seed", [3, 12, 20, 23])
def test_a_4_mib_read_in_1_kib_chunks_under_5_percent_loss_per_hop_completes(seed):
    """Four readers of their own 4 MiB block (4,096 chunks) at 5% loss on each of the 4 hops of a round trip
    with the timers of the failed run (1 s, 5 retries): before, 6 tries per request were the limit, and one
    request in 25,000 loses all 6 at that rate, so about one read in seven gave up with "no reply ... after 6
    tries" while every other request was being answered (these seeds all failed). Now a read gives up only
    after `give_up` seconds of silence."""
    data = random.Random(seed).randbytes(4 << 20)
    node = stored({100: data})
    clock = SimClock()
    transport = LossyTransport(SimTransport(node, clock), EACH_WAY, random.Random(seed))
    with KVPClient(ClientOptions(timeout=1.0, retries=5, window=32), transport, clock=clock) as client:
        assert client.get_block(100).data == data


def test_a_read_rides_through_five_seconds_of_total_outage_as_a_switch_restart():
    data = random.Random(8).randbytes(400 * 1024)
    node = stored({0x5E: data})
    clock = SimClock()
    outage: list[float] = []
    replies, sent_during = [], []

    def switch_down(datagram, direction):
        """Down for 5 s from the 50th reply on: nothing passes either way."""
        if not outage and len(replies) == 50:
            outage[:] = [clock.now, clock.now + 5.0]
        down = bool(outage) and outage[0] <= clock.now < outage[1]
        if down and direction == "out":
            sent_during.append(clock.now)
        elif direction == "in" and not down:
            replies.append(clock.now)
        return down

    transport = LossyTransport(SimTransport(node, clock), 0.0, random.Random(0), switch_down)
    with KVPClient(ClientOptions(timeout=0.05, retries=0), transport, clock=clock) as client:
        block = client.get_block(0x5E, chunks=400)
    assert block.data == data
    assert clock.now > outage[1], "the read spanned the outage"
    assert len(sent_during) >= 5, "it kept resending through the outage"
    assert max(c.attempts for c in block.chunks) <= 8, "backoff: no more than a few resends in 5 s"


class DelayTransport(SimTransport):
    """Replies come back `rtt` simulated seconds after their request was sent (in order), not at once."""

    rtt = 0.010

    def __init__(self, node, clock):
        super().__init__(node, clock)
        self.due: list[tuple[float, bytes]] = []
        self.sends: list[tuple[float, int]] = []

    def send(self, data):
        self.sends.append((self.clock.now, Header.unpack(data).chunk_idx))
        before = len(self.inbox)
        super().send(data)
        replies = [self.inbox.pop() for _ in range(len(self.inbox) - before)][::-1]  # (a span GET's: in order)
        self.due += [(self.clock.now + self.rtt, reply) for reply in replies]

    def recv(self, timeout):
        if self.due and self.due[0][0] <= self.clock.now + timeout:
            at, data = self.due.pop(0)
            self.clock.now = max(self.clock.now, at)
            return data
        self.clock.now += max(timeout, 0.0) + 1e-9
        return None


def test_a_lost_request_is_resent_once_a_later_request_is_answered_before_its_timer_runs_out():
    node = stored({1: bytes(64 * 1024)})
    clock = SimClock()
    sends_of_2: list[float] = []

    def drop_chunk_2_once(data, direction):
        h = Header.unpack(data)
        if direction == "out" and h.chunk_idx == 2:
            sends_of_2.append(clock.now)
            return len(sends_of_2) == 1
        return False

    inner = DelayTransport(node, clock)
    transport = LossyTransport(inner, 0.0, random.Random(0), drop_chunk_2_once)
    options = ClientOptions(timeout=0.5, retries=0, initial_window=4, window=4, get_span=1)  # one GET per chunk
    with KVPClient(options, transport, clock=clock) as client:
        block = client.get_block(1, chunks=64)
    assert block.chunks[2].attempts == 2 and client.resent == 1
    first, again = sends_of_2[0] - 1000.0, sends_of_2[1] - 1000.0
    assert first == 0.0
    assert again == pytest.approx(2 * DelayTransport.rtt), \
        "resent when the next round's reply showed it missing, not after the 0.5 s initial RTO"


class MtuTransport(SimTransport):
    """A path whose MTU the transport reports, as `UdpTransport.path_mtu` does from IP_MTU."""

    mtu = 1500

    def path_mtu(self):
        return self.mtu


@pytest.mark.parametrize(("mtu", "chunk"), [(1500, 1024), (9000, 8192), (4000, 2048)])
def test_put_block_picks_the_chunk_size_from_the_path_mtu(mtu, chunk):
    node = StorageNode(StorageOptions())
    data = random.Random(mtu).randbytes(100_000)
    MtuTransport.mtu = mtu
    with sim_client(node, transport=MtuTransport) as client:
        assert client.path_mtu() == mtu
        client.put_block(1, data, version=1)
        block = client.get_block(1)
    assert block.data == data and len(block.chunks) == -(-len(data) // chunk)


def test_a_udp_transport_reads_the_path_mtu_towards_its_server():
    from kvpool.transport import UdpTransport

    with contextlib.closing(UdpTransport(("127.0.0.1", 9))) as transport:
        assert transport.path_mtu() == 65535  # loopback: 65,536, reported by IP_MTU as 65,535


def test_a_spurious_timeout_raises_the_rto_floor_which_decays_back_with_samples():
    rto = RtoEstimator(RtoBounds(initial=0.5, minimum=0.02, maximum=4.0))
    for _ in range(20):
        rto.sample(0.001)
    assert rto.rto == 0.02
    rto.spurious()
    rto.spurious()
    assert rto.floor == pytest.approx(0.08) and rto.rto == pytest.approx(0.08)
    for _ in range(30):
        rto.spurious()
    assert rto.floor == 1.0, "at most a quarter of the maximum"
    for _ in range(500):
        rto.sample(0.001)
    assert 0.5 < rto.floor < 0.7, "decays slowly: 0.999 per sample"
    for _ in range(4000):
        rto.sample(0.001)
    assert rto.rto == 0.02


def test_undo_restores_the_window_a_spurious_loss_cut_took():
    w = CongestionWindow(WindowLimits(initial=20, cap=32))
    w.on_loss(sent_at=1.0, now=2.0)
    assert w.cwnd == pytest.approx(14)
    w.undo()
    assert w.cwnd == 20 and w.undone == 1
    w.undo()  # once per cut
    assert w.cwnd == 20 and w.undone == 1
    w.on_busy(sent_at=3.0, now=4.0)
    w.undo()  # a BUSY is never spurious: the node said it
    assert w.cwnd == 10


class SlowReplyTransport(DelayTransport):
    """As DelayTransport, but the first reply to chunk 5 takes 0.3 s (a stalled switch or reader)."""

    def send(self, data):
        h = Header.unpack(data)
        before = len(self.due)
        super().send(data)
        if h.chunk_idx == 5 and not getattr(self, "slowed", False) and len(self.due) > before:
            self.slowed = True
            at, reply = self.due.pop()
            self.due.append((at + 0.3, reply))
        self.due.sort(key=lambda d: d[0])


def test_a_resend_whose_first_reply_comes_after_all_is_recognised_and_undone():
    node = stored({1: bytes(256 * 1024)})
    clock = SimClock()
    inner = SlowReplyTransport(node, clock)
    options = ClientOptions(timeout=0.05, retries=0, initial_window=4, window=4, get_span=1)  # one GET per chunk
    with KVPClient(options, inner, clock=clock) as client:
        proved: list[float | None] = []
        spurious = client.path.rto.spurious
        client.path.rto.spurious = lambda took=None: (proved.append(took), spurious(took))[1]  # type: ignore[method-assign]
        client.get_block(1, chunks=256)  # 64 round trips of 10 ms: the late reply comes during the read
        assert client.resent >= 1 and client.spurious == 1
        assert client.path.rto.spurious_timeouts == 1 and client.path.congestion.undone == 1
        assert client.path.congestion.cwnd == 4, "the window the spurious cut took is back"
    (took,) = proved
    assert took is not None and 0.02 <= took < 0.3, "the wait from the first send to the first reply (the resend's), " \
        "not the late reply's 0.3 s"


def test_a_spurious_timeout_raises_the_floor_to_the_wait_it_proved_and_no_further():
    rto = RtoEstimator(RtoBounds(initial=0.5, minimum=0.02, maximum=4.0))
    for _ in range(20):
        rto.sample(0.001)
    rto.spurious(took=0.025)
    assert rto.floor == pytest.approx(1.25 * 0.025) and rto.rto == pytest.approx(1.25 * 0.025)
    for _ in range(10):  # stalls of one length, recurring: the floor stays at what they take
        rto.spurious(took=0.025)
    assert rto.floor == pytest.approx(1.25 * 0.025)
    rto.spurious(took=0.01)
    assert rto.floor == pytest.approx(1.25 * 0.025), "a shorter wait never lowers it"
    rto.spurious(took=3.0)
    assert rto.floor == pytest.approx(2 * 1.25 * 0.025), "at most double per timeout"
    for _ in range(10):
        rto.spurious(took=3.0)
    assert rto.floor == 1.0, "at most a quarter of the maximum"


def test_a_client_paces_with_room_for_a_whole_span_ahead():
    """A span GET is one datagram asking for `get_span` chunks: a pacer allowing fewer ahead of its rate would
    hold every span after the first until its credit came, whatever the window's room."""
    node = StorageNode(StorageOptions())
    wide = sim_client(node, get_span=16)
    narrow = sim_client(node, get_span=4)
    assert wide.path.pacer.burst == 16 and narrow.path.pacer.burst == 8
    assert sim_client(node, get_span=16, congestion_control=False).path.pacer.burst > 1 << 20, "unpaced"
    p = wide.path.pacer
    now, interval = 5.0, 0.001
    p.sent(now, interval * 16)  # one span just left
    assert p.delay(now, interval) == pytest.approx(0.0), "the next span may follow at once"
    p.sent(now, interval * 16)
    assert p.delay(now, interval) > 0, "two spans ahead of the rate: the third waits"
