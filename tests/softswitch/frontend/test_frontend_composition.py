"""Control composition in the front end: what an inlined instance becomes (names, copies, folded constants)."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, load_source
from softswitch.runtime.switch import SoftSwitch
from softswitch.target import Exact, TableEntry
from tests.softswitch.frontend.frontend_programs import program

# One instance, two jobs: the caller names the job with a constant. p4c folds the constant in each copy of the
# body, so each table is applied once on every path; so must we.
TWO_JOBS = program(
    types="""control Job(inout bit<8> x, in bit<8> op) {
    action set(bit<8> v) { x = v; }
    table first { key = { x: exact; } actions = { set; NoAction; } default_action = NoAction(); }
    table second { key = { x: exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply {
        if (op == 1) { first.apply(); } else { second.apply(); }
    }
}""",
    ingress="    Job() job;",
    apply="""        job.apply(meta.a, 1);
        job.apply(meta.a, 2);
        hdr.eth.ether_type = (bit<16>)meta.a;
        standard_metadata.egress_spec = 1;""")


def test_a_constant_argument_is_folded_in_each_copy_of_the_body() -> None:
    prog = load_source(TWO_JOBS, "two_jobs.p4")
    ingress = prog.control("MyIngress")
    assert [t.qualified_name for t in ingress.tables] == ["MyIngress.job.first", "MyIngress.job.second"]
    sw = SoftSwitch.load(prog)
    sw.table_insert(TableEntry("MyIngress.job.first", {"x": Exact(0)}, "MyIngress.job.set", {"v": 5}))
    sw.table_insert(TableEntry("MyIngress.job.second", {"x": Exact(5)}, "MyIngress.job.set", {"v": 9}))
    [(port, out)] = sw.process(0, bytes(14))
    assert port == 1 and out[12:14] == bytes([0, 9]), "first (op 1) then second (op 2), in order"


def test_the_same_jobs_chosen_at_run_time_apply_a_table_twice_on_one_path() -> None:
    text = TWO_JOBS.replace("job.apply(meta.a, 1);", "job.apply(meta.a, meta.a);")
    with pytest.raises(P4Error, match="applied more than once on one path"):
        load_source(text, "two_jobs.p4")


# A counter the caller owns, handed by one instance to an instance of its own (extern arguments through two
# levels, as p4src/from_port.p4 hands `steer_events` to SteerAnswer). Checked on its own, `Mid` sees `c` as its
# parameter; inlined in MyIngress, both levels count into MyIngress's counter.
HANDED_ON = program(
    types="""control Leaf(counter c, in bit<32> index) {
    apply { c.count(index); }
}
control Mid(counter c) {
    Leaf() leaf;
    apply {
        leaf.apply(c, 1);
        leaf.apply(c, 2);
    }
}""",
    ingress="""    counter(4, CounterType.packets) hits;
    Mid() mid;""",
    apply="""        mid.apply(hits);
        standard_metadata.egress_spec = 1;""")


def test_an_extern_argument_is_handed_on_to_an_instance_of_the_instance() -> None:
    sw = SoftSwitch.load(load_source(HANDED_ON, "handed_on.p4"))
    sw.process(0, bytes(14))
    assert [sw.counter_read("MyIngress.hits", i)[0] for i in range(4)] == [0, 1, 1, 0]
