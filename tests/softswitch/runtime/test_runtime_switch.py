"""SoftSwitch behaviour beyond the conformance scripts: robustness, direct counters, errors, Target API."""

from __future__ import annotations

import logging
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softswitch.frontend import load_source
from softswitch.runtime.lower import LoweringError
from softswitch.runtime.switch import SoftSwitch
from softswitch.target import Exact, Replica, TableEntry, TargetError

CONFORMANCE = sorted((pathlib.Path(__file__).parents[1] / "conformance" / "programs").glob("*.p4"))
REPO = pathlib.Path(__file__).parents[3]

PRELUDE = """
#include <core.p4>
#include <v1model.p4>
header h_h { bit<8> a; bit<8> b; }
struct headers_t { h_h h; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
"""


def switch_with_ingress(body: str, extra: str = "") -> SoftSwitch:
    src = PRELUDE + extra + "control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n" \
        + body + "\n}\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n"
    return SoftSwitch.load(load_source(src, "inline.p4"), seed=3)


@pytest.fixture(scope="module")
def conformance_switches():
    return [SoftSwitch.load(p) for p in CONFORMANCE]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=64), port=st.integers(0, 510))
def test_arbitrary_bytes_never_raise(conformance_switches, data, port):
    for sw in conformance_switches:
        out = sw.process(port, data)
        assert isinstance(out, list)


def test_project_program_compiles_and_survives_garbage():
    sw = SoftSwitch.load(REPO / "p4src" / "kvswitch.p4")
    assert "MyIngress.kv_index" in sw.lowered.tables
    for n in (0, 1, 14, 33, 60):
        assert isinstance(sw.process(1, bytes(range(n))), list)


def test_failed_assert_drops_the_packet_and_logs(caplog):
    sw = switch_with_ingress("apply { assert(hdr.h.a != 7); sm.egress_spec = 1; }")
    with caplog.at_level(logging.ERROR):
        assert sw.process(0, b"\x07\x00") == []
    assert "assert failed" in caplog.text
    assert sw.process(0, b"\x06\x00") == [(1, b"\x06\x00")]


def test_direct_counter_counts_hits_of_each_entry_only():
    sw = switch_with_ingress("""
        direct_counter(CounterType.packets_and_bytes) hits;
        action fwd() { sm.egress_spec = 1; }
        table t { key = { hdr.h.a : exact; } actions = { fwd; NoAction; } counters = hits; default_action = NoAction(); }
        apply { t.apply(); }""")
    sw.table_insert(TableEntry("I.t", {"hdr.h.a": Exact(1)}, "I.fwd"))
    sw.table_insert(TableEntry("I.t", {"hdr.h.a": Exact(2)}, "I.fwd"))
    for payload in (b"\x01\x00", b"\x01\x00\x00", b"\x03\x00"):
        sw.process(0, payload)
    assert sw.direct_counter_read("I.t", {"hdr.h.a": Exact(1)}) == (2, 5)
    assert sw.direct_counter_read("I.t", {"hdr.h.a": Exact(2)}) == (0, 0)


def test_random_stays_within_bounds():
    sw = switch_with_ingress("apply { random(hdr.h.b, 8w10, 8w20); sm.egress_spec = 1; }")
    values = {sw.process(0, b"\x00\x00")[0][1][1] for _ in range(200)}
    assert values <= set(range(10, 21)) and len(values) > 3


def test_log_msg_goes_to_logging(caplog):
    sw = switch_with_ingress('apply { log_msg("a={} b={}", {hdr.h.a, hdr.h.b}); sm.egress_spec = 1; }')
    with caplog.at_level(logging.INFO, logger="softswitch.p4"):
        sw.process(0, b"\x05\x06")
    assert "a=5 b=6" in caplog.text


def test_clone_session_truncation_cuts_the_copy_only():
    sw = switch_with_ingress("apply { clone(CloneType.I2E, 32w9); sm.egress_spec = 1; }")
    sw.clone_session_set(9, [Replica(4)], truncate=1)
    assert sorted(sw.process(0, b"\x01\x02\x03")) == [(1, b"\x01\x02\x03"), (4, b"\x01")]


def test_unsupported_construct_is_reported_with_its_source_position():
    with pytest.raises(LoweringError, match=r"inline\.p4:\d+:\d+: .*out/inout"):
        switch_with_ingress("action set(inout bit<8> x) { x = 1; } apply { set(hdr.h.a); }")


def test_recirculation_loops_end_after_max_passes(caplog):
    src = PRELUDE.replace(
        "control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }",
        "control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) "
        "{ apply { recirculate_preserving_field_list(0); } }")
    src += ("control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) "
            "{ apply { sm.egress_spec = 1; } }\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n")
    sw = SoftSwitch.load(load_source(src, "loop.p4"))
    with caplog.at_level(logging.WARNING):
        assert sw.process(0, b"\x01\x02") == []
    assert "pipeline passes" in caplog.text


def _egress_program(egress_apply: str) -> SoftSwitch:
    src = PRELUDE.replace(
        "control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }",
        f"control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ {egress_apply} }} }}")
    src += ("control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) "
            "{ apply { sm.egress_spec = 1; } }\nV1Switch(P(), V(), I(), E(), C(), D()) main;\n")
    sw = SoftSwitch.load(load_source(src, "chain.p4"))
    sw.clone_session_set(9, [Replica(2)])
    return sw


def test_a_chain_of_egress_clones_longer_than_max_passes_runs_to_its_end():
    """Each copy clones itself on from egress (as BMv2 runs it, without a bound): a chain of 100 copies, far past
    the 32-pass budget of recirculation loops (the stream join pushes through chains of up to 65)."""
    sw = _egress_program("hdr.h.b = hdr.h.b + 1; if (hdr.h.b < hdr.h.a) { clone(CloneType.E2E, 32w9); }")
    out = sw.process(0, bytes([100, 0]))
    assert sorted(b for _, (a, b) in out) == list(range(1, 101))
    assert [p for p, _ in out].count(1) == 1


def test_an_endless_egress_clone_loop_ends_at_max_egress_clones(caplog):
    sw = _egress_program("clone(CloneType.E2E, 32w9);")
    with caplog.at_level(logging.WARNING):
        out = sw.process(0, b"\x01\x02")
    assert len(out) == 1 + sw.max_egress_clones
    assert "egress clones" in caplog.text


@pytest.mark.parametrize(("call", "code"), [
    (lambda sw: sw.process(511, b""), "INVALID_ARGUMENT"),
    (lambda sw: sw.table_insert(TableEntry("I.nope", {}, "x")), "NOT_FOUND"),
    (lambda sw: sw.register_read("I.nope", 0), "NOT_FOUND"),
    (lambda sw: sw.counter_read("I.nope", 0), "NOT_FOUND"),
    (lambda sw: sw.clone_session_delete(3), "NOT_FOUND"),
])
def test_bad_requests_raise_target_errors(call, code):
    sw = switch_with_ingress("apply { sm.egress_spec = 1; }")
    with pytest.raises(TargetError) as err:
        call(sw)
    assert err.value.code == code


def test_digests_are_drained_once():
    sw = switch_with_ingress("apply { digest<digest_t>(1, { hdr.h.a }); sm.egress_spec = 1; }",
                             extra="struct digest_t { bit<8> a; }\n")
    sw.process(0, b"\x05\x00")
    sw.process(0, b"\x06\x00")
    assert [d.fields for d in sw.drain_digests()] == [(("a", 5),), (("a", 6),)]
    assert sw.drain_digests() == []


def test_configured_meter_colours_packets_beyond_the_peak_burst_red():
    sw = switch_with_ingress("""
        meter(4, MeterType.packets) m;
        apply { bit<2> colour; m.execute_meter(32w1, colour); hdr.h.b = (bit<8>)colour; sm.egress_spec = 1; }""")
    assert sw.process(0, b"\x00\x00") == [(1, b"\x00\x00")]          # unconfigured: green
    sw.meter_set("I.m", 1, cir=0.0, cburst=1, pir=0.0, pburst=2)
    colours = [sw.process(0, b"\x00\x00")[0][1][1] for _ in range(3)]
    assert colours == [0, 1, 2]                                         # green, yellow, red
