"""v1model's queueing metadata as BMv2 gives it: `enq_qdepth` the packets queued on the egress port ahead of this
one, `deq_qdepth` those left behind it, `enq_timestamp`/`deq_timedelta` in microseconds. `process_burst` queues
a burst's copies before any egress runs, so the depths are exact (no clock or thread decides them)."""

from __future__ import annotations

from softswitch.frontend import load_source
from softswitch.runtime.switch import SoftSwitch

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_h { bit<8> port; bit<8> enq; bit<8> deq; bit<32> delta; }
struct headers_t { h_h h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = (bit<9>)hdr.h.port; }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.enq = (bit<8>)sm.enq_qdepth;
        hdr.h.deq = (bit<8>)sm.deq_qdepth;
        hdr.h.delta = sm.deq_timedelta;
    }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def switch() -> SoftSwitch:
    return SoftSwitch.load(load_source(PROGRAM, "queueing.p4"))


def frame(port: int) -> bytes:
    return bytes([port, 0xAA, 0xAA]) + bytes(4)


def test_a_lone_packet_finds_its_queue_empty() -> None:
    [(port, out)] = switch().process(1, frame(2))
    assert port == 2 and out[1:3] == bytes([0, 0])


def test_a_burst_to_one_port_queues_in_arrival_order() -> None:
    out = switch().process_burst([(1, frame(2))] * 5)
    assert [p for p, _ in out] == [2] * 5
    assert [(d[1], d[2]) for _, d in out] == [(0, 4), (1, 3), (2, 2), (3, 1), (4, 0)]


def test_each_port_has_its_own_queue() -> None:
    out = switch().process_burst([(1, frame(2)), (1, frame(3)), (1, frame(2)), (1, frame(3)), (1, frame(3))])
    depths = [(p, d[1], d[2]) for p, d in out]
    assert depths == [(2, 0, 1), (3, 0, 2), (2, 1, 0), (3, 1, 1), (3, 2, 0)]


def test_queues_are_empty_again_after_a_burst() -> None:
    sw = switch()
    sw.process_burst([(1, frame(2))] * 3)
    [(_, out)] = sw.process(1, frame(2))
    assert out[1:3] == bytes([0, 0])
    assert sw.process_burst([(1, frame(2))] * 2)[0][1][1:3] == bytes([0, 1])


def test_time_in_queue_is_in_microseconds(monkeypatch) -> None:
    """On a clock that moves 7 µs per reading, a packet's time in the queue is a whole number of readings
    (a multiple of 7 µs), and a queued packet waits at least one."""
    ticks = iter(range(0, 10**12, 7000))
    monkeypatch.setattr("softswitch.runtime.switch.time.monotonic_ns", lambda: next(ticks))
    out = switch().process_burst([(1, frame(2))] * 3)
    deltas = [int.from_bytes(d[3:7], "big") for _, d in out]
    assert all(x > 0 and x % 7 == 0 for x in deltas), deltas
