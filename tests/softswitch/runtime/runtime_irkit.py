"""Small builders for hand-written IR programs, so the executor can be tested without the front end."""

from __future__ import annotations

from softswitch.frontend import ir
from softswitch.frontend.builtins import CORE_ERRORS, NO_ACTION, STANDARD_METADATA

D = ir.Direction
B = ir.BitType


def header(name: str, *fields: tuple[str, int]) -> ir.HeaderType:
    return ir.HeaderType(name, tuple(ir.Field(n, B(w)) for n, w in fields))


def struct(name: str, *fields: tuple[str, ir.Type]) -> ir.StructType:
    return ir.StructType(name, tuple(ir.Field(n, t) for n, t in fields))


def var(name: str, t: ir.Type, kind: ir.VarKind = ir.VarKind.BLOCK_PARAM) -> ir.VarRef:
    return ir.VarRef(name, kind, t)


def mem(e: ir.Expr, name: str) -> ir.Member:
    t = e.type
    assert isinstance(t, ir.HeaderType | ir.StructType | ir.HeaderUnionType), t
    f = t.field(name)
    assert f is not None, (t, name)
    return ir.Member(e, name, f.type)


def path(root: ir.Expr, dotted: str) -> ir.Expr:
    e = root
    for part in dotted.split("."):
        e = mem(e, part)
    return e


def const(v: int, w: int, signed: bool = False) -> ir.Constant:
    return ir.Constant(v, B(w, signed))


def binop(op: str, a: ir.Expr, b: ir.Expr, t: ir.Type | None = None) -> ir.BinaryOp:
    if t is None:
        t = ir.BoolType() if op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||") else a.type
    return ir.BinaryOp(op, a, b, t)


def assign(lhs: ir.Expr, rhs: ir.Expr) -> ir.Assign:
    return ir.Assign(lhs, rhs)


def call(e: ir.Expr) -> ir.CallStmt:
    return ir.CallStmt(e)


def block(*stmts: ir.Stmt) -> ir.Block:
    return ir.Block(tuple(stmts))


def extract(pkt: ir.VarRef, hdr: ir.Expr) -> ir.CallStmt:
    return call(ir.ExternMethodCall(pkt, "packet_in", "extract", (hdr,), (D.OUT,), ir.VoidType()))


def emit(pkt: ir.VarRef, hdr: ir.Expr) -> ir.CallStmt:
    return call(ir.ExternMethodCall(pkt, "packet_out", "emit", (hdr,), (D.IN,), ir.VoidType()))


def fcall(name: str, *args: ir.Expr, type_args: tuple = ()) -> ir.CallStmt:
    return call(ir.ExternFunctionCall(name, tuple(args), tuple(D.IN for _ in args), ir.VoidType(), type_args))


def enum_member(enum_name: str, member: str, members: tuple[str, ...]) -> ir.EnumMember:
    return ir.EnumMember(ir.EnumType(enum_name, members), member)


HASH_ALGOS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16")


def algo(name: str) -> ir.EnumMember:
    return enum_member("HashAlgorithm", name, HASH_ALGOS)


class V1:
    """A V1Switch skeleton: headers H, metadata M, and the six blocks with conventional parameter names."""

    def __init__(self, headers: ir.StructType, meta: ir.StructType) -> None:
        self.H, self.M, self.SM = headers, meta, STANDARD_METADATA
        self.pkt_in = var("packet", ir.ExternType("packet_in"))
        self.pkt_out = var("packet", ir.ExternType("packet_out"))
        self.hdr = var("hdr", self.H)
        self.meta = var("meta", self.M)
        self.sm = var("standard_metadata", self.SM)

    def params(self, *which: str) -> tuple[ir.Param, ...]:
        table = {
            "pin": ir.Param("packet", ir.ExternType("packet_in"), D.NONE),
            "pout": ir.Param("packet", ir.ExternType("packet_out"), D.NONE),
            "hdr": ir.Param("hdr", self.H, D.INOUT),
            "meta": ir.Param("meta", self.M, D.INOUT),
            "sm": ir.Param("standard_metadata", self.SM, D.INOUT),
        }
        return tuple(table[w] for w in which)

    def program(self, states: tuple[ir.ParserState, ...], ingress: ir.Control, egress: ir.Control | None = None,
                deparse: ir.Block | None = None, compute: ir.Block | None = None, instances=(),
                functions=()) -> ir.Program:
        parser = ir.Parser("P", self.params("pin", "hdr", "meta", "sm"), (), (), states)

        def ctl(name: str, body: ir.Block, *ps: str) -> ir.Control:
            return ir.Control(name, self.params(*ps), (), (), (), (), body)

        egress = egress or ctl("E", block(), "hdr", "meta", "sm")
        controls = (ctl("V", block(), "hdr", "meta"), ingress, egress,
                    ctl("C", compute or block(), "hdr", "meta"),
                    ctl("D", deparse or block(), "pout", "hdr"))
        main = ir.PackageInstance("V1Switch", "main", tuple(zip(ir.V1SWITCH_SLOTS, ("P", "V", ingress.name, egress.name, "C", "D"), strict=True)))
        return ir.Program(types=(self.H, self.M, self.SM), constants=(), errors=(*CORE_ERRORS, "ParserInvalidArgument"),
                          match_kinds=("exact", "ternary", "lpm", "range", "optional"), actions=(NO_ACTION,),
                          functions=tuple(functions), parsers=(parser,), controls=controls,
                          instances=tuple(instances), digests=(), main=main)


# ---- a reference L3 program: ethernet/ipv4, LPM forwarding, TTL decrement, checksum update --------------

ETH = header("ethernet_t", ("dst", 48), ("src", 48), ("ether_type", 16))
IPV4 = header("ipv4_t", ("version", 4), ("ihl", 4), ("diffserv", 8), ("total_len", 16), ("identification", 16),
              ("flags", 3), ("frag_offset", 13), ("ttl", 8), ("protocol", 8), ("hdr_checksum", 16),
              ("src_addr", 32), ("dst_addr", 32))


def l3_program() -> ir.Program:
    H = struct("headers_t", ("ethernet", ETH), ("ipv4", IPV4))
    M = struct("metadata_t", ("unused", B(8)))
    v = V1(H, M)
    eth, ip4 = mem(v.hdr, "ethernet"), mem(v.hdr, "ipv4")
    states = (
        ir.ParserState("start", block(extract(v.pkt_in, eth)),
                       ir.Select((mem(eth, "ether_type"),), (
                           ir.SelectCase((ir.KeysetExact(const(0x0800, 16)),), "parse_ipv4"),
                           ir.SelectCase((ir.KeysetDefault(),), "accept")))),
        ir.ParserState("parse_ipv4", block(extract(v.pkt_in, ip4)), ir.Goto("accept")),
    )
    port = var("port", B(9), ir.VarKind.ACTION_PARAM)
    dmac = var("dmac", B(48), ir.VarKind.ACTION_PARAM)
    drop = ir.Action("drop", "I.drop", (), block(fcall("mark_to_drop", v.sm)))
    fwd = ir.Action("fwd", "I.fwd", (ir.Param("port", B(9), D.NONE), ir.Param("dmac", B(48), D.NONE)), block(
        assign(mem(v.sm, "egress_spec"), port),
        assign(mem(eth, "src"), mem(eth, "dst")),
        assign(mem(eth, "dst"), dmac),
        assign(mem(ip4, "ttl"), binop("-", mem(ip4, "ttl"), const(1, 8))),
    ))
    table = ir.Table("routes", "I.routes", (ir.TableKey(mem(ip4, "dst_addr"), "lpm", "hdr.ipv4.dst_addr"),),
                     (ir.ActionRef("I.fwd"), ir.ActionRef("I.drop")), ir.ActionRef("I.drop"), size=4096)
    apply = block(ir.If(ir.HeaderMethodCall(ip4, "isValid", ir.BoolType()),
                        block(call(ir.TableApply("I.routes", ir.TableApplyResultType("I.routes")))),
                        block(call(ir.ActionCall("I.drop", (), ())))))
    ingress = ir.Control("I", v.params("hdr", "meta", "sm"), (), (), (drop, fwd), (table,), apply)
    fields = ir.ListExpr(tuple(mem(ip4, f.name) for f in IPV4.fields if f.name != "hdr_checksum"),
                         ir.TupleType(()))
    compute = block(fcall("update_checksum", ir.HeaderMethodCall(ip4, "isValid", ir.BoolType()), fields,
                          mem(ip4, "hdr_checksum"), algo("csum16")))
    deparse = block(emit(v.pkt_out, eth), emit(v.pkt_out, ip4))
    return v.program(states, ingress, deparse=deparse, compute=compute)
