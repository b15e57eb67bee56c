"""Tables, actions and the apply block: the properties the executor and the P4Info generator read."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, ir, load_source
from tests.softswitch.frontend.frontend_programs import program

INGRESS = """
    direct_counter(CounterType.packets_and_bytes) index_hits;
    action set_slot(bit<12> slot, bool pinned) { meta.b = (bit<16>)slot; }
    action drop() { mark_to_drop(standard_metadata); }
    @name("kv_index") @brief("prefix hash to slot")
    table index_t {
        key = {
            hdr.eth.dst: exact @name("prefix_hash");
            hdr.eth.ether_type[15:8]: ternary;
            hdr.eth.isValid(): exact;
            meta.c: optional;
        }
        actions = { set_slot; @tableonly drop; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 4096;
        counters = index_hits;
        support_timeout = true;
    }
    @name(".global_fwd")
    table fwd {
        key = { standard_metadata.ingress_port: exact; meta.b: range; }
        actions = { set_slot; drop; }
        default_action = set_slot(7, true);
        const entries = {
            (1, 0 .. 100): drop();
            (2, _): set_slot(0xfff, false);
        }
    }
"""


@pytest.fixture(scope="module")
def ingress() -> ir.Control:
    prog = load_source(program(ingress=INGRESS, apply="        index_t.apply();\n        fwd.apply();"), "t.p4")
    c = prog.control("MyIngress")
    assert c is not None
    return c


def test_table_names_follow_name_annotations_like_p4info(ingress: ir.Control) -> None:
    assert [t.qualified_name for t in ingress.tables] == ["MyIngress.kv_index", "global_fwd"]
    assert ingress.table("kv_index") is ingress.tables[0]


def test_table_keys_have_match_kinds_and_p4info_names(ingress: ir.Control) -> None:
    t = ingress.tables[0]
    assert [(k.name, k.match_kind) for k in t.keys] == [
        ("prefix_hash", "exact"), ("hdr.eth.ether_type[15:8]", "ternary"), ("hdr.eth.isValid()", "exact"),
        ("meta.c", "optional")]
    assert t.keys[0].expr.type == ir.BitType(48)
    assert t.keys[1].expr.type == ir.BitType(8) and isinstance(t.keys[1].expr, ir.Slice)
    assert t.keys[2].expr.type == ir.BoolType()


def test_table_properties(ingress: ir.Control) -> None:
    t = ingress.tables[0]
    assert [a.action for a in t.actions] == ["MyIngress.set_slot", "MyIngress.drop", "NoAction"]
    assert ir.find_annotation(t.actions[1].annotations, "tableonly") is not None
    assert ir.find_annotation(t.actions[2].annotations, "defaultonly") is not None
    assert t.default_action.action == "NoAction" and t.default_action_const
    assert t.size == 4096 and t.support_timeout
    assert t.counters == "MyIngress.index_hits" and t.meters is None
    assert ir.find_annotation(t.annotations, "brief").values == ("prefix hash to slot",)  # type: ignore[union-attr]


def test_default_action_arguments_are_folded_to_the_parameter_types(ingress: ir.Control) -> None:
    fwd = ingress.tables[1]
    assert not fwd.default_action_const
    slot, pinned = fwd.default_action.args
    assert slot == ir.Constant(7, ir.BitType(12), slot.loc)
    assert isinstance(pinned, ir.BoolConst) and pinned.value is True
    action = ingress.action("set_slot")
    assert action is not None
    assert [(p.name, p.direction) for p in action.data_params] == [
        ("slot", ir.Direction.NONE), ("pinned", ir.Direction.NONE)]


def test_const_entries_have_keysets_per_key_and_folded_action_data(ingress: ir.Control) -> None:
    fwd = ingress.tables[1]
    assert fwd.entries_const and len(fwd.entries) == 2
    first, second = fwd.entries
    port, rng = first.keysets
    assert isinstance(port, ir.KeysetExact) and port.value == ir.Constant(1, ir.BitType(9), port.value.loc)
    assert isinstance(rng, ir.KeysetRange) and (rng.low.value, rng.high.value) == (0, 100)  # type: ignore[union-attr]
    assert first.action.action == "MyIngress.drop" and first.action.args == ()
    assert isinstance(second.keysets[1], ir.KeysetDefault)
    assert second.action.args[0] == ir.Constant(0xFFF, ir.BitType(12), second.action.args[0].loc)


def test_table_without_default_action_defaults_to_no_action_as_defaultonly() -> None:
    ingress = "    action a() { }\n    table t { key = { meta.a: exact; } actions = { a; } }"
    prog = load_source(program(ingress=ingress, apply="        t.apply();"), "t.p4")
    t = prog.table("MyIngress.t")
    assert t is not None and t.default_action.action == "NoAction" and not t.default_action_const
    assert [r.action for r in t.actions] == ["MyIngress.a", "NoAction"]
    assert ir.find_annotation(t.actions[1].annotations, "defaultonly") is not None
    assert t.size is None and t.entries == ()


def test_switch_on_action_run_uses_action_names_and_merges_fall_through_labels() -> None:
    ingress = ("    action a() { } action b() { } action c() { }\n"
               "    table t { key = { meta.a: exact; } actions = { a; b; c; } }")
    apply = "        switch (t.apply().action_run) {\n            a:\n            b: { meta.a = 1; }\n" \
            "            default: { exit; }\n        }"
    prog = load_source(program(ingress=ingress, apply=apply), "t.p4")
    (sw,) = prog.control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(sw, ir.Switch) and isinstance(sw.expr, ir.ActionRun)
    assert sw.expr.apply.table == "MyIngress.t"
    assert [c.labels for c in sw.cases] == [("MyIngress.a", "MyIngress.b"), (None,)]
    assert isinstance(sw.cases[1].body.stmts[0], ir.Exit)


def test_hit_and_miss_apply_the_table_and_give_bool() -> None:
    ingress = "    table t { key = { meta.a: exact; } actions = { NoAction; } }"
    prog = load_source(program(ingress=ingress, apply="        if (!t.apply().hit) { meta.a = 1; }"), "t.p4")
    (stmt,) = prog.control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert isinstance(stmt, ir.If) and isinstance(stmt.cond, ir.UnaryOp)
    hit = stmt.cond.operand
    assert isinstance(hit, ir.TableHitMiss) and hit.which == "hit" and hit.apply.table == "MyIngress.t"


def test_table_applied_in_both_branches_of_an_if_is_accepted() -> None:
    ingress = "    table t { key = { meta.a: exact; } actions = { NoAction; } }"
    apply = "        if (meta.a == 0) { t.apply(); } else { t.apply(); }"
    prog = load_source(program(ingress=ingress, apply=apply), "t.p4")
    assert prog.table("MyIngress.t") is not None


def test_table_applied_again_after_exit_branch_is_accepted() -> None:
    ingress = "    table t { key = { meta.a: exact; } actions = { NoAction; } }"
    apply = "        if (meta.a == 0) { t.apply(); exit; }\n        t.apply();"
    assert load_source(program(ingress=ingress, apply=apply), "t.p4").table("MyIngress.t") is not None


def test_table_applied_inside_an_action_is_rejected() -> None:
    ingress = ("    table t { key = { meta.a: exact; } actions = { NoAction; } }\n"
               "    action go() { t.apply(); }")
    with pytest.raises(P4Error, match="tables cannot be applied inside an action"):
        load_source(program(ingress=ingress), "t.p4")


def test_direct_counter_can_be_attached_to_one_table_only() -> None:
    ingress = ("    direct_counter(CounterType.packets) dc;\n"
               "    table t1 { key = { meta.a: exact; } actions = { NoAction; } counters = dc; }\n"
               "    table t2 { key = { meta.b: exact; } actions = { NoAction; } counters = dc; }")
    with pytest.raises(P4Error, match="already attached to table 't1'"):
        load_source(program(ingress=ingress), "t.p4")
