"""Types, widths, name resolution and constant folding in the IR the checker produces."""

from __future__ import annotations

from softswitch.frontend import ir, load_source
from tests.softswitch.frontend.frontend_programs import program


def _ingress(prog: ir.Program) -> ir.Control:
    c = prog.control("MyIngress")
    assert c is not None
    return c


def _apply_stmts(src: str, **parts: str) -> tuple[ir.Stmt, ...]:
    return _ingress(load_source(program(apply=src, **parts), "t.p4")).apply.stmts


def test_typedef_resolves_to_its_base_width_and_keeps_the_name_on_fields() -> None:
    prog = load_source(program(types="typedef bit<12> slot_t;\ntypedef slot_t slot2_t;",
                               meta="    slot2_t slot;"), "t.p4")
    meta = prog.type("metadata_t")
    assert isinstance(meta, ir.StructType)
    f = meta.field("slot")
    assert f is not None and f.type == ir.BitType(12) and f.type_name == "slot2_t"


def test_define_and_const_expressions_fold_to_literals_with_width() -> None:
    src = "#define WIDTH 10\n" + program(top="const bit<32> COUNT = 32w1 << WIDTH;\n"
                                             "const int HALF = (1 << WIDTH) / 2;\n"
                                             "const bit<8> WRAPPED = 8w250 + 8w10;\n"
                                             "const bit<8> SATURATED = 8w250 |+| 8w10;\n"
                                             "const int<8> SIGNED = 8s127 + 8s1;\n"
                                             "const bit<12> JOINED = 8w0xAB ++ 4w0xC;\n"
                                             "const bool FLAG = COUNT > 1000 && !(HALF == 0);")
    prog = load_source(src, "t.p4")
    got = {c.name: c.value for c in prog.constants}
    assert got["COUNT"] == ir.Constant(1024, ir.BitType(32), got["COUNT"].loc)
    assert got["HALF"] == ir.Constant(512, ir.IntType(), got["HALF"].loc)
    assert (got["WRAPPED"].value, got["SATURATED"].value, got["SIGNED"].value) == (4, 255, -128)
    assert got["JOINED"].value == 0xABC and got["JOINED"].type == ir.BitType(12)
    assert isinstance(got["FLAG"], ir.BoolConst) and got["FLAG"].value is True


def test_int_literal_takes_the_width_of_the_other_operand() -> None:
    (stmt,) = _apply_stmts("        meta.b = meta.b + 7;")
    assert isinstance(stmt, ir.Assign) and isinstance(stmt.rhs, ir.BinaryOp)
    assert stmt.rhs.type == ir.BitType(16)
    assert stmt.rhs.right == ir.Constant(7, ir.BitType(16), stmt.rhs.right.loc)


def test_negative_literal_assigned_to_bit_wraps_like_p4c() -> None:
    (stmt,) = _apply_stmts("        meta.a = -1;")
    assert isinstance(stmt, ir.Assign) and stmt.rhs == ir.Constant(255, ir.BitType(8), stmt.rhs.loc)


def test_member_chains_are_typed_and_rooted_at_the_block_parameter() -> None:
    (stmt,) = _apply_stmts("        meta.b = hdr.eth.ether_type;")
    assert isinstance(stmt, ir.Assign)
    rhs = stmt.rhs
    assert isinstance(rhs, ir.Member) and rhs.member == "ether_type" and rhs.type == ir.BitType(16)
    assert isinstance(rhs.expr, ir.Member) and isinstance(rhs.expr.type, ir.HeaderType)
    root = rhs.expr.expr
    assert isinstance(root, ir.VarRef) and root.kind is ir.VarKind.BLOCK_PARAM and root.name == "hdr"


def test_locals_action_params_and_block_params_are_told_apart_and_shadowing_is_renamed() -> None:
    ingress = ("    bit<8> x;\n"
               "    action set(bit<8> v) { bit<8> x = v; meta.a = x; }")
    prog = load_source(program(ingress=ingress, apply="        set(meta.a);\n        x = 1;"), "t.p4")
    c = _ingress(prog)
    assert c.locals[0].name == "x"
    action = c.action("set")
    assert action is not None and action.qualified_name == "MyIngress.set"
    decl, assign = action.body.stmts
    assert isinstance(decl, ir.VarDecl) and decl.name == "x__1"
    assert isinstance(decl.init, ir.VarRef) and decl.init.kind is ir.VarKind.ACTION_PARAM
    assert isinstance(assign, ir.Assign) and isinstance(assign.rhs, ir.VarRef) and assign.rhs.name == "x__1"
    call, local_assign = c.apply.stmts
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.ActionCall)
    assert call.call.action == "MyIngress.set" and call.call.directions == (ir.Direction.IN,)
    assert isinstance(local_assign, ir.Assign) and local_assign.lhs == ir.VarRef(
        "x", ir.VarKind.LOCAL, ir.BitType(8), local_assign.lhs.loc)


def test_slices_are_lvalues_with_the_width_of_the_slice() -> None:
    (stmt,) = _apply_stmts("        meta.b[11:8] = meta.a[3:0];")
    assert isinstance(stmt, ir.Assign) and isinstance(stmt.lhs, ir.Slice)
    assert (stmt.lhs.hi, stmt.lhs.lo, stmt.lhs.type) == (11, 8, ir.BitType(4))
    assert isinstance(stmt.rhs, ir.Slice) and stmt.rhs.type == ir.BitType(4)


def test_concatenation_and_casts_have_the_expected_widths() -> None:
    stmts = _apply_stmts("        meta.c = (bit<32>)(meta.a ++ meta.b);\n"
                         "        meta.a = (bit<8>)(int<8>)meta.a;")
    first, second = stmts
    assert isinstance(first, ir.Assign) and isinstance(first.rhs, ir.Cast)
    inner = first.rhs.expr
    assert isinstance(inner, ir.BinaryOp) and inner.op == "++" and inner.type == ir.BitType(24)
    assert isinstance(second, ir.Assign) and isinstance(second.rhs, ir.Cast)
    assert second.rhs.expr.type == ir.BitType(8, signed=True)


def test_serializable_enum_keeps_underlying_width_and_member_values() -> None:
    types = "enum bit<8> op_t { GET = 1, PUT = 0x10 }\nenum color_t { RED, GREEN }"
    prog = load_source(program(types=types, meta="    op_t op;",
                               apply="        meta.op = op_t.PUT;\n        meta.a = (bit<8>)op_t.GET;"), "t.p4")
    op = prog.type("op_t")
    assert isinstance(op, ir.EnumType) and op.underlying == ir.BitType(8)
    assert op.members == ("GET", "PUT") and op.values == (1, 16) and op.value_of("PUT") == 16
    color = prog.type("color_t")
    assert isinstance(color, ir.EnumType) and color.underlying is None and color.value_of("GREEN") == 1
    set_op, cast = _ingress(prog).apply.stmts
    assert isinstance(set_op, ir.Assign) and set_op.rhs == ir.EnumMember(op, "PUT", set_op.rhs.loc)
    assert isinstance(cast, ir.Assign) and cast.rhs == ir.Constant(1, ir.BitType(8), cast.rhs.loc)


def test_header_width_counts_enum_and_bool_fields() -> None:
    types = "enum bit<8> op_t { GET = 1 }\nheader msg_h { bit<16> magic; op_t op; bit<4> a; bit<4> b; }"
    prog = load_source(program(types=types), "t.p4")
    msg = prog.type("msg_h")
    assert msg.width == 32
    assert ir.bit_width(msg) == 32 and ir.bit_width(prog.type("op_t")) == 8 and ir.bit_width(ir.BoolType()) == 1


def test_errors_are_numbered_after_the_core_ones() -> None:
    prog = load_source(program(top="error { BadMagic, BadVersion }"), "t.p4")
    assert prog.errors[:3] == ("NoError", "PacketTooShort", "NoMatch")
    assert prog.error_code("BadMagic") == 7 and prog.error_code("BadVersion") == 8


def test_header_validity_methods_and_ternary_operator() -> None:
    stmts = _apply_stmts("        hdr.eth.setInvalid();\n"
                         "        meta.a = hdr.eth.isValid() ? 8w1 : 2;")
    call, assign = stmts
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.HeaderMethodCall)
    assert call.call.method == "setInvalid" and call.call.type == ir.VoidType()
    assert isinstance(assign, ir.Assign) and isinstance(assign.rhs, ir.Mux)
    assert isinstance(assign.rhs.cond, ir.HeaderMethodCall) and assign.rhs.cond.type == ir.BoolType()
    assert assign.rhs.else_ == ir.Constant(2, ir.BitType(8), assign.rhs.else_.loc)


def test_extern_calls_carry_directions_and_type_arguments() -> None:
    ingress = "    register<bit<64>>(1024) values;"
    apply = ("        bit<64> v;\n"
             "        values.read(v, 5);\n"
             "        hash(meta.c, HashAlgorithm.crc32, 32w0, { meta.a, meta.b }, 32w1024);\n"
             "        mark_to_drop(standard_metadata);")
    prog = load_source(program(ingress=ingress, apply=apply), "t.p4")
    c = _ingress(prog)
    inst = c.instances[0]
    assert inst.qualified_name == "MyIngress.values" and inst.size == 1024
    assert inst.type == ir.ExternType("register", (ir.BitType(64),))
    _decl, read, hashed, drop = c.apply.stmts
    assert isinstance(read, ir.CallStmt) and isinstance(read.call, ir.ExternMethodCall)
    assert read.call.extern == "register" and read.call.method == "read"
    assert read.call.directions == (ir.Direction.OUT, ir.Direction.IN)
    assert read.call.args[1] == ir.Constant(5, ir.BitType(32), read.call.args[1].loc)
    assert isinstance(read.call.target, ir.ExternInstanceRef) and read.call.target.name == "MyIngress.values"
    assert isinstance(hashed, ir.CallStmt) and isinstance(hashed.call, ir.ExternFunctionCall)
    data = hashed.call.args[3]
    assert isinstance(data, ir.ListExpr) and data.type == ir.TupleType((ir.BitType(8), ir.BitType(16)))
    assert hashed.call.directions[0] is ir.Direction.OUT
    assert isinstance(drop, ir.CallStmt) and isinstance(drop.call, ir.ExternFunctionCall)
    assert drop.call.directions == (ir.Direction.INOUT,)


def test_digest_types_are_collected_once_per_struct() -> None:
    types = "struct learn_t { bit<48> src; bit<9> port; }"
    apply = ("        digest<learn_t>(1, { hdr.eth.src, standard_metadata.ingress_port });\n"
             "        digest<learn_t>(1, { hdr.eth.dst, standard_metadata.ingress_port });")
    prog = load_source(program(types=types, apply=apply), "t.p4")
    assert [d.name for d in prog.digests] == ["learn_t"]
    call = _ingress(prog).apply.stmts[0]
    assert isinstance(call, ir.CallStmt) and isinstance(call.call, ir.ExternFunctionCall)
    assert isinstance(call.call.args[1], ir.StructInit) and call.call.type_args == (prog.digests[0].type,)


def test_controller_headers_and_package_slots_are_recorded() -> None:
    types = ('@controller_header("packet_in")\nheader packet_in_h { bit<9> ingress_port; bit<7> pad; }\n'
             '@controller_header("packet_out")\nheader packet_out_h { bit<9> egress_port; bit<7> pad; }')
    prog = load_source(program(types=types), "t.p4")
    pin = prog.controller_header("packet_in")
    assert pin is not None and pin.name == "packet_in_h" and pin.width == 16
    assert prog.controller_header("packet_out") is not None
    assert prog.main.slot("ig") == "MyIngress" and prog.main.slot("dep") == "MyDeparser"
    assert [s for s, _ in prog.main.slots] == list(ir.V1SWITCH_SLOTS)


def test_annotations_are_kept_on_declarations() -> None:
    types = '@brief("a kv header") header kvp_h { @brief("in bytes") bit<16> len; }'
    ingress = '    @id(0x01000001) @name("hits") counter(64, CounterType.packets) hit_counter;'
    prog = load_source(program(types=types, ingress=ingress), "t.p4")
    kvp = prog.type("kvp_h")
    assert isinstance(kvp, ir.HeaderType)
    assert ir.find_annotation(kvp.annotations, "brief").values == ("a kv header",)  # type: ignore[union-attr]
    assert ir.find_annotation(kvp.fields[0].annotations, "brief") is not None
    inst = _ingress(prog).instances[0]
    assert ir.find_annotation(inst.annotations, "id").values == (0x01000001,)  # type: ignore[union-attr]
    assert inst.qualified_name == "MyIngress.hits"
    assert inst.args[1] == ir.EnumMember(prog.type("CounterType"), "packets", inst.args[1].loc)  # type: ignore[arg-type]


def test_top_level_function_is_called_with_directions() -> None:
    top_fn = "bit<8> max8(in bit<8> x, in bit<8> y) { if (x > y) { return x; } return y; }"
    src = program(types=top_fn, apply="        meta.a = max8(meta.a, 3);")
    prog = load_source(src, "t.p4")
    fn = prog.function("max8")
    assert fn is not None and fn.return_type == ir.BitType(8)
    (stmt,) = _ingress(prog).apply.stmts
    assert isinstance(stmt, ir.Assign) and isinstance(stmt.rhs, ir.FunctionCall)
    assert stmt.rhs.directions == (ir.Direction.IN, ir.Direction.IN)
    assert stmt.rhs.args[1] == ir.Constant(3, ir.BitType(8), stmt.rhs.args[1].loc)


def test_every_expression_in_the_ir_has_a_location_in_the_source() -> None:
    prog = load_source(program(apply="        meta.b = meta.b + 1;"), "t.p4")
    (stmt,) = _ingress(prog).apply.stmts
    assert isinstance(stmt, ir.Assign)
    assert (stmt.loc.file, stmt.loc.line) == ("t.p4", 32)
    assert stmt.rhs.loc.line == 32 and stmt.rhs.loc.col == 18


def test_for_loops_with_constant_bounds_are_unrolled_with_the_index_as_a_constant() -> None:
    ingress = "    register<bit<8>>(4) r;"
    apply = ("        for (bit<32> i = 0; i < 3; i = i + 1) { bit<8> v; r.read(v, i); meta.a = meta.a + v; }\n"
             "        for (bit<8> j in 1 .. 2) { meta.a = meta.a ^ j; }")
    stmts = load_source(program(ingress=ingress, apply=apply), "t.p4").control("MyIngress").apply.stmts  # type: ignore[union-attr]
    assert len(stmts) == 5 and all(isinstance(s, ir.Block) for s in stmts)
    reads = [s.stmts[1].call for s in stmts[:3]]  # type: ignore[union-attr]
    assert [r.args[1].value for r in reads] == [0, 1, 2]
    assert len({s.stmts[0].name for s in stmts[:3]}) == 3  # type: ignore[union-attr]  # one fresh local per copy
    xor = stmts[4].stmts[0]  # type: ignore[union-attr]
    assert isinstance(xor, ir.Assign) and xor.rhs.right == ir.Constant(2, ir.BitType(8), xor.rhs.right.loc)  # type: ignore[union-attr]
