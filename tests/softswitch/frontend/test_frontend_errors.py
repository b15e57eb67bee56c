"""Malformed programs: each yields exactly one P4Error at the marked file:line:col with a clear message."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, load_program, load_source
from tests.softswitch.frontend.frontend_programs import locate, program

# (test id, program text with a $E marker where the error must point, message fragment)
CASES = [
    ("undeclared_name", program(apply="        $Efoo = 1;"), "undeclared name 'foo'"),
    ("assign_width_mismatch", program(apply="        meta.a = $Emeta.b;"),
     "type mismatch: expected bit<8>, got bit<16>"),
    ("operand_width_mismatch", program(apply="        meta.c = (bit<32>)($Emeta.a + meta.b);"),
     "type mismatch: bit<8> vs bit<16>"),
    ("varbit_field", program(types="header opt_h { $Evarbit<32> options; }"), "unsupported construct 'varbit'"),
    ("missing_semicolon", program(apply="        meta.a = 1\n        $Emeta.b = 2;"),
     "syntax error: unexpected 'meta'"),
    ("table_applied_twice_on_one_path", program(
        ingress="    table t { key = { meta.a: exact; } actions = { NoAction; } }",
        apply="        t.apply();\n        if (meta.a == 1) { $Et.apply(); }"),
     "table 'MyIngress.t' is applied more than once on one path"),
    ("register_index_not_bit32", program(
        ingress="    register<bit<32>>(16) r;",
        apply="        r.read(meta.c, $Emeta.b);"),
     "register index must be bit<32>, not bit<16>"),
    ("register_of_struct", program(
        types="struct pair_t { bit<8> x; bit<8> y; }",
        ingress="    register<pair_t>(16) $Er;"),
     "register element type must be bit<W> or int<W>"),
    ("two_lpm_keys", program(
        ingress="    table t { key = { meta.c: lpm; $Emeta.b: lpm; } actions = { NoAction; } }",
        apply="        t.apply();"),
     "multiple lpm keys in table 't'"),
    ("division_by_variable", program(apply="        meta.a = $Emeta.a / meta.a;"),
     "'/' by a non-constant value"),
    ("xxhash64", program(apply="        hash(meta.c, $EHashAlgorithm.xxhash64, 32w0, { meta.a }, 32w16);"),
     "unsupported construct 'HashAlgorithm.xxhash64"),
    ("for_loop_with_runtime_bound", program(apply="        for (bit<8> i = 0; $Ei < meta.a; i = i + 1) { }"),
     "for-loop condition must be a compile-time constant"),
    ("break_statement", program(apply="        for (bit<8> i in 0 .. 3) { $Ebreak; }"),
     "unsupported construct 'break statement'"),
    ("extern_declaration", program(top="$Eextern void my_fn();"), "unsupported construct 'extern declaration'"),
    ("write_to_in_parameter", program(deparser="        $Ehdr.eth.dst = 0;"),
     "cannot write to 'in' parameter 'hdr'"),
    ("default_action_not_listed", program(
        ingress="    action a() { }\n    table t { actions = { NoAction; } default_action = $Ea(); }",
        apply="        t.apply();"),
     "action 'a' in default_action is not in the table's actions list"),
    ("undeclared_state", program(start="        transition $Eparse_foo;"), "undeclared state 'parse_foo'"),
    ("recirculate_in_ingress", program(apply="        $Erecirculate_preserving_field_list(0);"),
     "recirculate_preserving_field_list may only be called in egress"),
    ("slice_out_of_range", program(apply="        meta.a = $Emeta.b[16:9];"), "slice [16:9] out of range for bit<16>"),
    ("unknown_table_property", program(
        ingress="    table t { actions = { NoAction; } $Ecolour = 3; }", apply="        t.apply();"),
     "unknown table property 'colour'"),
    ("function_like_macro", "$E#define MAX(a, b) a\n" + program(), "unsupported construct 'function-like macro'"),
    ("undeclared_type", program(meta="    $Eslot_t slot;"), "undeclared type 'slot_t'"),
    ("missing_field", program(apply="        meta.a = $Ehdr.eth.vlan;"), "header ethernet_h has no field 'vlan'"),
    ("bool_condition_required", program(apply="        if ($Emeta.a) { }"), "type mismatch: expected bool, got bit<8>"),
    ("action_data_is_read_only", program(
        ingress="    action set(bit<8> v) { $Ev = 1; }"), "cannot write to action data parameter 'v'"),
    ("duplicate_p4info_name", program(
        ingress='    @name("t") table t1 { actions = { NoAction; } }\n    @name("t") table $Et2 { actions = { NoAction; } }'),
     "duplicate control-plane name 'MyIngress.t'"),
    ("implicit_literal_too_wide", program(apply="        if (meta.a == $E300) { }"), "value 300 does not fit in bit<8>"),
    ("defaultonly_action_in_entry", program(
        ingress="    action a() { }\n    table t { key = { meta.a: exact; } actions = { @defaultonly a; }\n"
                "        const entries = { $E1: a(); } }"),
     "action 'MyIngress.a' is @defaultonly and cannot be used in an entry"),
    ("literal_too_wide", program(apply="        meta.a = $E8w256;"), "value of '8w256' does not fit in bit<8>"),
    # control composition: the instance's `in` parameter is the caller's meta.a used in place
    ("instance_writes_its_in_parameter", program(
        types="control Sub(in bit<8> x)(bit<8> k) { apply { $Ex = k; } }",
        ingress="    Sub(1) s;", apply="        s.apply(meta.a);"),
     "cannot write to 'in' parameter 'x'"),
    ("instance_directionless_argument_not_constant", program(
        types="control Sub(inout bit<8> y, bit<8> d) { apply { y = d; } }",
        ingress="    Sub() s;", apply="        s.apply(meta.a, $Emeta.a);"),
     "argument used for directionless parameter 'd' must be a compile-time constant"),
    ("instance_constructor_argument_not_constant", program(
        types="control Sub(inout bit<8> y)(bit<8> k) { apply { y = k; } }",
        ingress="    Sub($Emeta.a) s;", apply="        s.apply(meta.a);"),
     "constructor argument 'k' of Sub must be a compile-time constant"),
    ("instance_applied_in_an_action", program(
        types="control Sub(inout bit<8> y) { apply { y = 1; } }",
        ingress="    Sub() s;\n    action go() { $Es.apply(meta.a); }"),
     "a control cannot be applied inside an action"),
    ("instance_table_applied_twice", program(
        types="control Sub(inout bit<8> y) { table t { key = { y: exact; } actions = { NoAction; } }\n"
              "    apply { $Et.apply(); } }",
        ingress="    Sub() s;", apply="        s.apply(meta.a);\n        s.apply(meta.a);"),
     "table 'MyIngress.s.t' is applied more than once on one path"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in CASES], ids=[c[0] for c in CASES])
def test_malformed_program_gives_one_located_error(text: str, message: str) -> None:
    source, line, col = locate(text)
    with pytest.raises(P4Error) as info:
        load_source(source, "bad.p4")
    err = info.value
    assert (err.loc.file, err.loc.line, err.loc.col) == ("bad.p4", line, col), str(err)
    assert message in err.message
    assert str(err) == f"bad.p4:{line}:{col}: {err.message}"


def test_error_in_included_file_names_that_file(tmp_path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "defs.p4").write_text("const bit<8> A = 1;\nconst bit<8> B = undefined_thing;\n")
    main = "#include \"inc/defs.p4\"\n" + program()
    (tmp_path / "main.p4").write_text(main)
    with pytest.raises(P4Error) as info:
        load_program(str(tmp_path / "main.p4"))
    assert info.value.loc.file == str(tmp_path / "inc" / "defs.p4")
    assert (info.value.loc.line, info.value.loc.col) == (2, 18)
    assert "undeclared name 'undefined_thing'" in info.value.message


def test_missing_include_is_located_at_the_directive(tmp_path) -> None:
    (tmp_path / "main.p4").write_text("// top\n#include \"nowhere.p4\"\n" + program())
    with pytest.raises(P4Error) as info:
        load_program(str(tmp_path / "main.p4"))
    assert (info.value.loc.line, info.value.loc.col) == (2, 1)
    assert "cannot find include file 'nowhere.p4'" in info.value.message


def test_unreadable_program_file_is_a_p4error(tmp_path) -> None:
    with pytest.raises(P4Error, match="cannot read file"):
        load_program(str(tmp_path / "absent.p4"))


def test_unknown_type_of_a_local_variable_is_reported_as_undeclared_type() -> None:
    source, line, col = locate(program(apply="        $Ecookie_t c;"))
    with pytest.raises(P4Error) as info:
        load_source(source, "bad.p4")
    assert (info.value.loc.line, info.value.loc.col) == (line, col)
    assert info.value.message == "undeclared type 'cookie_t'"


def test_file_that_is_not_utf8_is_a_p4error(tmp_path) -> None:
    path = tmp_path / "latin1.p4"
    path.write_bytes(b"// caf\xe9\n")
    with pytest.raises(P4Error, match="is not UTF-8 text"):
        load_program(str(path))


def test_absurdly_deep_nesting_is_a_p4error_not_a_crash() -> None:
    depth = 1500
    source = program(apply=f"        meta.a = {'(meta.a + ' * depth}1{')' * depth};")
    with pytest.raises(P4Error, match="nested too deeply"):
        load_source(source, "deep.p4")


def test_empty_program_has_no_package() -> None:
    with pytest.raises(P4Error, match="no package instantiation") as info:
        load_source("", "empty.p4")
    assert str(info.value).startswith("empty.p4:1:1: ")
