"""The lowering's fast paths behave as the plain ones: register accesses at one index under one bounds check
(values, order, out-of-range skips and logs, a read into its own index), a constant in-range register index,
counters counted inline, `bit<W>` shifts by a variable amount, `hash()` with constant base and max, keyless
tables' default action, one-expression functions inlined, hashed field lists packed per header validity."""

from __future__ import annotations

import logging
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softswitch.frontend import load_source
from softswitch.runtime import bits
from softswitch.runtime.switch import SoftSwitch

SOURCE = """
#include <core.p4>
#include <v1model.p4>
header q_h {
    bit<8> op; bit<8> idx; bit<32> v0; bit<32> v1; bit<32> v2;
    bit<8> s; bit<8> amt; bit<8> shl; bit<8> shr; bit<16> wide_shl; bit<8> near_top; bit<32> hashed;
}
header opt_h { bit<8> x; }
struct headers_t { q_h q; opt_h opt; }
bit<8> plus_one(in bit<8> x) { return x + 1; }
bit<16> widened_shift(in bit<8> x, in bit<8> n) { return ((bit<16>)x) << n; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.q); transition select(hdr.q.op) { 7: parse_opt; default: accept; } }
    state parse_opt { pkt.extract(hdr.opt); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) r0;
    register<bit<32>>(16) r1;
    register<bit<32>>(16) r2;
    register<bit<32>>(16) chain;
    counter(8, CounterType.packets_and_bytes) hits;
    action round_trip() {
        bit<32> i = (bit<32>)hdr.q.idx;
        r0.write(i, hdr.q.v0);
        r1.write(i, hdr.q.v1);
        r2.write(i, hdr.q.v2);
        r0.read(hdr.q.v2, i);
        r1.read(hdr.q.v0, i);
        r2.read(hdr.q.v1, i);
    }
    action chase() {
        bit<32> i = (bit<32>)hdr.q.idx;
        chain.read(i, i);
        r0.read(hdr.q.v0, i);
        r1.read(hdr.q.v1, i);
    }
    action constant_index() {
        r0.read(hdr.q.v0, 3);
        r1.read(hdr.q.v1, 3);
        r2.write(3, hdr.q.v2);
    }
    action locals_from_registers() {
        bit<32> a;
        bit<32> b;
        r0.read(a, (bit<32>)hdr.q.idx);
        r1.read(b, (bit<32>)hdr.q.idx);
        hdr.q.v0 = a + 1;
        hdr.q.v1 = b;
    }
    action set_v2(bit<32> v) { hdr.q.v2 = v; }
    table cfg { actions = { set_v2; } default_action = set_v2(7); }
    apply {
        if (hdr.q.op == 0) { round_trip(); }
        else if (hdr.q.op == 1) { chase(); }
        else if (hdr.q.op == 2) { constant_index(); }
        else if (hdr.q.op == 4) { locals_from_registers(); }
        else if (hdr.q.op == 5) { hits.count((bit<32>)hdr.q.idx); hits.count(7); }
        else if (hdr.q.op == 7 || hdr.q.op == 8) {
            /* fields of an invalid header are left out (opt is there for op 7 only) */
            hash(hdr.q.v0, HashAlgorithm.crc32, 32w0, { 8w0xAB, hdr.opt.x, hdr.q.s }, 64w4294967296);
            hash(hdr.q.v1, HashAlgorithm.crc32, 32w0, { 4w0xA, hdr.opt.x }, 64w4294967296);
        }
        else if (hdr.q.op == 6) {
            hdr.q.v0 = (bit<32>)plus_one(hdr.q.s);
            hdr.q.v1 = (bit<32>)widened_shift(plus_one(hdr.q.s), hdr.q.amt);
        }
        else { cfg.apply(); }
        hdr.q.shl = hdr.q.s << hdr.q.amt;
        hdr.q.shr = hdr.q.s >> hdr.q.amt;
        hdr.q.wide_shl = ((bit<16>)hdr.q.s) << hdr.q.amt;
        hash(hdr.q.near_top, HashAlgorithm.crc32, 8w250, { hdr.q.s }, 16w100);
        hash(hdr.q.hashed, HashAlgorithm.crc32, 32w5, { hdr.q.s, hdr.q.amt }, 32w1000);
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.q); pkt.emit(hdr.opt); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
FIELDS = [("op", 1), ("idx", 1), ("v0", 4), ("v1", 4), ("v2", 4), ("s", 1), ("amt", 1), ("shl", 1), ("shr", 1),
          ("wide_shl", 2), ("near_top", 1), ("hashed", 4)]


def packet(**values: int) -> bytes:
    return b"".join(values.get(name, 0).to_bytes(size, "big") for name, size in FIELDS)


def fields(data: bytes) -> dict[str, int]:
    out, pos = {}, 0
    for name, size in FIELDS:
        out[name] = int.from_bytes(data[pos:pos + size], "big")
        pos += size
    return out


def run(sw: SoftSwitch, **values: int) -> dict[str, int]:
    [(port, data)] = sw.process(0, packet(**values))
    assert port == 1
    return fields(data)


@pytest.fixture
def sw() -> SoftSwitch:
    return SoftSwitch.load(load_source(SOURCE, "fastpaths.p4"))


@pytest.fixture(scope="module")
def shared_sw() -> SoftSwitch:
    """One switch for a property test's examples (stateless packets: loading one per example is the cost)."""
    return SoftSwitch.load(load_source(SOURCE, "fastpaths.p4"))


def test_accesses_at_one_index_share_one_bounds_check(sw: SoftSwitch) -> None:
    """What this file tests is the grouped form: round_trip's six accesses compile under one check."""
    source = sw.dump_source()
    body = source[source.index("def act_"):]
    round_trip = next(part for part in body.split("\ndef ") if "round_trip" in part.splitlines()[0])
    assert round_trip.count(" < 16:") == 1, round_trip


def test_grouped_writes_then_reads_keep_their_order(sw: SoftSwitch) -> None:
    got = run(sw, op=0, idx=5, v0=11, v1=22, v2=33)
    # r0..r2 written first, then read back in turn: v2 := r0, v0 := r1, v1 := r2 (the v2 written, not the new one)
    assert (got["v0"], got["v1"], got["v2"]) == (22, 33, 11)
    assert [sw.register_read(f"I.r{k}", 5) for k in range(3)] == [11, 22, 33]


def test_out_of_range_index_skips_and_logs_every_access(sw: SoftSwitch, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="softswitch.p4"):
        got = run(sw, op=0, idx=16, v0=11, v1=22, v2=33)
    assert (got["v0"], got["v1"], got["v2"]) == (11, 22, 33)  # reads skipped: the fields keep their values
    assert all(sw.register_read(f"I.r{k}", i) == 0 for k in range(3) for i in range(16))
    logged = [r.getMessage() for r in caplog.records if "out of range" in r.getMessage()]
    assert len(logged) == 6, logged
    assert [m.split()[1].rstrip(":") for m in logged] == ["I.r0", "I.r1", "I.r2", "I.r0", "I.r1", "I.r2"]


def test_locals_first_set_by_skipped_reads_keep_their_declared_zero(sw: SoftSwitch) -> None:
    sw.register_write("I.r0", 4, 40)
    sw.register_write("I.r1", 4, 41)
    got = run(sw, op=4, idx=4, v0=5, v1=6)
    assert (got["v0"], got["v1"]) == (41, 41)
    got = run(sw, op=4, idx=200, v0=5, v1=6)  # out of range: a and b as declared (0)
    assert (got["v0"], got["v1"]) == (1, 0)


def test_a_read_into_its_own_index_ends_the_group(sw: SoftSwitch) -> None:
    """chain.read(i, i) changes i: the reads after it use the new index."""
    sw.register_write("I.chain", 2, 9)
    sw.register_write("I.r0", 2, 100)
    sw.register_write("I.r1", 2, 101)
    sw.register_write("I.r0", 9, 900)
    sw.register_write("I.r1", 9, 901)
    got = run(sw, op=1, idx=2)
    assert (got["v0"], got["v1"]) == (900, 901)


def test_a_constant_index_reads_and_writes(sw: SoftSwitch) -> None:
    sw.register_write("I.r0", 3, 30)
    sw.register_write("I.r1", 3, 31)
    got = run(sw, op=2, v2=77)
    assert (got["v0"], got["v1"]) == (30, 31)
    assert sw.register_read("I.r2", 3) == 77


def test_counters_count_inline_and_log_out_of_range(sw: SoftSwitch, caplog: pytest.LogCaptureFixture) -> None:
    size = len(packet())
    run(sw, op=5, idx=2)
    run(sw, op=5, idx=2)
    with caplog.at_level(logging.ERROR, logger="softswitch.runtime.externs"):
        run(sw, op=5, idx=8)
    assert sw.counter_read("I.hits", 2) == (2, 2 * size)
    assert sw.counter_read("I.hits", 7) == (3, 3 * size)
    assert sum(sw.counter_read("I.hits", i)[0] for i in range(8)) == 5, "the index 8 counted nowhere"
    assert any("out-of-range index 8" in r.getMessage() for r in caplog.records)


def test_one_expression_functions_are_their_expression(sw: SoftSwitch) -> None:
    control = sw.dump_source().split("\ndef ingress(F):")[1]
    assert "plus_one(" not in control and "widened_shift(" not in control, "inlined"
    for s, amt in ((0, 0), (255, 1), (200, 9), (17, 15), (17, 16), (3, 255)):
        got = run(sw, op=6, s=s, amt=amt)
        assert (got["v0"], got["v1"]) == ((s + 1) & 0xFF, bits.shl((s + 1) & 0xFF, amt, 16))


@pytest.mark.parametrize("with_opt", [True, False])
def test_hashed_field_lists_leave_out_invalid_headers(sw: SoftSwitch, with_opt: bool) -> None:
    data = packet(op=7 if with_opt else 8, s=0x5C) + (b"\x3D" if with_opt else b"")
    [(port, out)] = sw.process(0, data)
    assert port == 1
    got = fields(out)
    if with_opt:
        assert out[-1:] == b"\x3D"
        assert (got["v0"], got["v1"]) == (zlib.crc32(bytes([0xAB, 0x3D, 0x5C])), zlib.crc32(bytes([0xA3, 0xD0])))
    else:
        assert (got["v0"], got["v1"]) == (zlib.crc32(bytes([0xAB, 0x5C])), zlib.crc32(bytes([0xA0])))


def test_keyless_table_runs_the_default_the_control_plane_sets(sw: SoftSwitch) -> None:
    assert run(sw, op=3)["v2"] == 7
    sw.table_set_default("I.cfg", "I.set_v2", {"v": 123456})
    assert run(sw, op=3)["v2"] == 123456


@settings(max_examples=200, deadline=None)
@given(s=st.integers(0, 255), amt=st.integers(0, 255))
def test_variable_shifts_and_constant_hash_bounds_match_reference(shared_sw: SoftSwitch, s: int, amt: int) -> None:
    got = run(shared_sw, op=3, s=s, amt=amt)
    assert got["shl"] == bits.shl(s, amt, 8)
    assert got["shr"] == bits.shr(s, amt, 8)
    assert got["wide_shl"] == bits.shl(s, amt, 16)
    # base + max overflows bit<8>: BMv2's formula, folded into the field's width
    assert got["near_top"] == (250 + zlib.crc32(bytes([s])) % 100) & 0xFF
    assert got["hashed"] == 5 + zlib.crc32(bytes([s, amt])) % 1000

