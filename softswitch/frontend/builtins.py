"""What `#include <core.p4>` and `#include <v1model.p4>` declare, written as data for the checker.

Our own description of the v1model architecture (as documented in p4c's v1model.p4 with its default
`V1MODEL_VERSION`, and BMv2's simple_switch.md), not a copy of those files: the types
(`standard_metadata_t`, `CounterType`, `MeterType`, `HashAlgorithm`, `CloneType`), the error codes and
match kinds, the extern object types with their constructor and method signatures, the extern functions,
`NoAction` and the `V1Switch` package's slots.

Signatures use `ir.Type`s, or a type-variable name (a str such as "T") that the checker binds from the
instance's type arguments, explicit call type arguments or the argument types.
"""

from __future__ import annotations

from dataclasses import dataclass

from softswitch.frontend import ir
from softswitch.frontend.ir import BitType, BoolType, Direction, ErrorType, StringType, VoidType

IN, OUT, INOUT, NONE = Direction.IN, Direction.OUT, Direction.INOUT, Direction.NONE

TypeSpec = ir.Type | str
VOID = VoidType()


@dataclass(frozen=True, slots=True)
class ParamSpec:
    name: str
    direction: Direction
    type: TypeSpec


@dataclass(frozen=True, slots=True)
class Signature:
    """A function, method or constructor: `type_params` are the names its own generics bind."""

    name: str
    params: tuple[ParamSpec, ...]
    returns: TypeSpec = VOID
    type_params: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExternSpec:
    """An extern object type: its type parameters, constructor and methods (overloads by arity)."""

    name: str
    type_params: tuple[str, ...]
    constructor: Signature | None
    methods: tuple[Signature, ...]

    def method(self, name: str, arity: int) -> Signature | None:
        candidates = [m for m in self.methods if m.name == name]
        for m in candidates:
            if len(m.params) == arity:
                return m
        return candidates[0] if candidates else None


def _p(name: str, direction: Direction, t: TypeSpec) -> ParamSpec:
    return ParamSpec(name, direction, t)


B32 = BitType(32)

# ---- core.p4 --------------------------------------------------------------------------------------------

CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")
CORE_MATCH_KINDS = ("exact", "ternary", "lpm")
V1MODEL_MATCH_KINDS = ("range", "optional", "selector")

# ---- v1model.p4 types -----------------------------------------------------------------------------------

STANDARD_METADATA = ir.StructType("standard_metadata_t", tuple(
    ir.Field(n, t) for n, t in (
        ("ingress_port", BitType(9)),
        ("egress_spec", BitType(9)),
        ("egress_port", BitType(9)),
        ("instance_type", B32),
        ("packet_length", B32),
        ("enq_timestamp", B32),
        ("enq_qdepth", BitType(19)),
        ("deq_timedelta", B32),
        ("deq_qdepth", BitType(19)),
        ("ingress_global_timestamp", BitType(48)),
        ("egress_global_timestamp", BitType(48)),
        ("mcast_grp", BitType(16)),
        ("egress_rid", BitType(16)),
        ("checksum_error", BitType(1)),
        ("parser_error", ErrorType()),
        ("priority", BitType(3)),
    )))

COUNTER_TYPE = ir.EnumType("CounterType", ("packets", "bytes", "packets_and_bytes"))
METER_TYPE = ir.EnumType("MeterType", ("packets", "bytes"))
HASH_ALGORITHM = ir.EnumType("HashAlgorithm", (
    "crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16"))
CLONE_TYPE = ir.EnumType("CloneType", ("I2E", "E2E"))

BUILTIN_TYPES: tuple[ir.NamedType, ...] = (STANDARD_METADATA, COUNTER_TYPE, METER_TYPE, HASH_ALGORITHM,
                                           CLONE_TYPE)

UNSUPPORTED_HASHES = frozenset({"xxhash64", "xxhash32", "crc64"})
"""Hash algorithms newer p4c versions name but BMv2's v1model here does not offer."""

# ---- extern object types --------------------------------------------------------------------------------

EXTERNS: dict[str, ExternSpec] = {
    "packet_in": ExternSpec("packet_in", (), None, (
        Signature("extract", (_p("hdr", OUT, "T"),), type_params=("T",)),
        Signature("lookahead", (), "T", ("T",)),
        Signature("advance", (_p("sizeInBits", IN, B32),)),
        Signature("length", (), B32),
    )),
    "packet_out": ExternSpec("packet_out", (), None, (
        Signature("emit", (_p("hdr", IN, "T"),), type_params=("T",)),
    )),
    "register": ExternSpec("register", ("T",), Signature("register", (_p("size", NONE, B32),)), (
        Signature("read", (_p("result", OUT, "T"), _p("index", IN, B32))),
        Signature("write", (_p("index", IN, B32), _p("value", IN, "T"))),
    )),
    "counter": ExternSpec("counter", (), Signature("counter", (
        _p("size", NONE, B32), _p("type", NONE, COUNTER_TYPE))), (
        Signature("count", (_p("index", IN, B32),)),
    )),
    "direct_counter": ExternSpec("direct_counter", (), Signature("direct_counter", (
        _p("type", NONE, COUNTER_TYPE),)), (
        Signature("count", ()),
    )),
    "meter": ExternSpec("meter", (), Signature("meter", (
        _p("size", NONE, B32), _p("type", NONE, METER_TYPE))), (
        Signature("execute_meter", (_p("index", IN, B32), _p("result", OUT, "T")), type_params=("T",)),
    )),
    "direct_meter": ExternSpec("direct_meter", ("T",), Signature("direct_meter", (
        _p("type", NONE, METER_TYPE),)), (
        Signature("read", (_p("result", OUT, "T"),)),
    )),
}

UNSUPPORTED_EXTERNS = frozenset({"action_profile", "action_selector", "Checksum16"})

# ---- extern functions -----------------------------------------------------------------------------------

_CHECKSUM = (_p("condition", IN, BoolType()), _p("data", IN, "T"), _p("checksum", IN, "O"),
             _p("algo", NONE, HASH_ALGORITHM))
_CHECKSUM_UPDATE = (_p("condition", IN, BoolType()), _p("data", IN, "T"), _p("checksum", INOUT, "O"),
                    _p("algo", NONE, HASH_ALGORITHM))

FUNCTIONS: dict[str, tuple[Signature, ...]] = {
    "verify": (Signature("verify", (_p("check", IN, BoolType()), _p("toSignal", IN, ErrorType()))),),
    "mark_to_drop": (Signature("mark_to_drop", (_p("standard_metadata", INOUT, STANDARD_METADATA),)),),
    "digest": (Signature("digest", (_p("receiver", IN, B32), _p("data", IN, "T")), type_params=("T",)),),
    "hash": (Signature("hash", (_p("result", OUT, "O"), _p("algo", IN, HASH_ALGORITHM), _p("base", IN, "T"),
                                _p("data", IN, "D"), _p("max", IN, "M")),
                       type_params=("O", "T", "D", "M")),),
    "random": (Signature("random", (_p("result", OUT, "T"), _p("lo", IN, "T"), _p("hi", IN, "T")),
                         type_params=("T",)),),
    "verify_checksum": (Signature("verify_checksum", _CHECKSUM, type_params=("T", "O")),),
    "update_checksum": (Signature("update_checksum", _CHECKSUM_UPDATE, type_params=("T", "O")),),
    "verify_checksum_with_payload": (Signature("verify_checksum_with_payload", _CHECKSUM,
                                               type_params=("T", "O")),),
    "update_checksum_with_payload": (Signature("update_checksum_with_payload", _CHECKSUM_UPDATE,
                                               type_params=("T", "O")),),
    "clone": (Signature("clone", (_p("type", IN, CLONE_TYPE), _p("session", IN, B32))),),
    "clone_preserving_field_list": (Signature("clone_preserving_field_list", (
        _p("type", IN, CLONE_TYPE), _p("session", IN, B32), _p("index", NONE, BitType(8)))),),
    "resubmit_preserving_field_list": (Signature("resubmit_preserving_field_list", (
        _p("index", NONE, BitType(8)),)),),
    "recirculate_preserving_field_list": (Signature("recirculate_preserving_field_list", (
        _p("index", NONE, BitType(8)),)),),
    "truncate": (Signature("truncate", (_p("length", IN, B32),)),),
    "assert": (Signature("assert", (_p("check", IN, BoolType()),)),),
    "assume": (Signature("assume", (_p("check", IN, BoolType()),)),),
    "log_msg": (Signature("log_msg", (_p("msg", NONE, StringType()),)),
                Signature("log_msg", (_p("msg", NONE, StringType()), _p("data", IN, "T")), type_params=("T",))),
}

PARSER_ONLY_FUNCTIONS = frozenset({"verify"})
CONTROL_ONLY_FUNCTIONS = frozenset({
    "mark_to_drop", "digest", "clone", "clone_preserving_field_list", "resubmit_preserving_field_list",
    "recirculate_preserving_field_list", "truncate", "verify_checksum", "update_checksum",
    "verify_checksum_with_payload", "update_checksum_with_payload",
})
"""v1model functions that act on the packet's fate or checksums: meaningless in a parser state."""
EGRESS_ONLY_FUNCTIONS = frozenset({"recirculate_preserving_field_list"})

NO_ACTION = ir.Action("NoAction", "NoAction", (), ir.Block(()),
                      (ir.Annotation("noWarn", ("unused",), '"unused"'),), ir.NO_LOC)  # as core.p4 declares it

# ---- the V1Switch package -------------------------------------------------------------------------------

V1SWITCH_BLOCKS = (
    # (slot, "parser" | "control", number of parameters)
    ("p", "parser", 4),
    ("vr", "control", 2),
    ("ig", "control", 3),
    ("eg", "control", 3),
    ("ck", "control", 2),
    ("dep", "control", 2),
)
