"""The Scapy layers and the P4 program describe the same wire: kvp_h / kvp_value_h read through softswitch's
front end must have the same fields, widths and order as KVP / KVPValue, and the P4 enums the same codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvpool.constants import KVP_VALUE_LEN, Opcode, Status, Tier
from kvpool.protocol import KVP, KVPValue
from kvpool.wire import Reason

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "kvswitch.p4"

@pytest.fixture(scope="module")
def program():
    from softswitch.frontend import load_program

    return load_program(PROGRAM)


def bit_width(field_type) -> int:
    """Width of a header field: bit<W>, or a serializable enum's underlying bit<W>."""
    underlying = getattr(field_type, "underlying", None)
    return (underlying or field_type).width


def scapy_layout(layer) -> list[tuple[str, int]]:
    return [(f.name, int(f.sz * 8)) for f in layer.fields_desc]  # sz: bytes (FlagsField: float)


def test_p4_header_and_scapy_layer_have_the_same_fields_widths_and_order(program):
    header = program.type("kvp_h")
    assert header is not None, f"kvp_h not declared in {PROGRAM}"
    p4_layout = [(f.name, bit_width(f.type)) for f in header.fields]
    assert p4_layout == scapy_layout(KVP)
    assert sum(w for _, w in p4_layout) == len(KVP()) * 8


def test_p4_value_header_is_as_wide_as_the_scapy_value_layer(program):
    """P4 keeps the value as one wide field (one register per slot); Scapy splits it into words for display."""
    header = program.type("kvp_value_h")
    assert header is not None, f"kvp_value_h not declared in {PROGRAM}"
    assert sum(bit_width(f.type) for f in header.fields) == len(KVPValue()) * 8 == KVP_VALUE_LEN * 8


@pytest.mark.parametrize(("p4_enum", "py_enum"), [("kvp_opcode_t", Opcode), ("kvp_status_t", Status),
                                                  ("kvp_tier_t", Tier)])
def test_p4_enums_carry_the_wire_codes_of_kvpool_constants(program, p4_enum, py_enum):
    enum = program.type(p4_enum)
    assert enum is not None, f"{p4_enum} not declared"
    assert {m: enum.value_of(m) for m in enum.members} == {m.name: int(m) for m in py_enum}


def test_every_validity_reason_has_a_drop_reason_counter(program):
    enum = program.type("drop_reason_t")
    assert enum is not None
    assert {r.drop_reason for r in Reason} <= set(enum.members)
