"""The Scapy layers and the P4 program describe the same wire: kvp_h / kvp_value_h read through softswitch's
front end must have the same fields, widths and order as KVP / KVPValue, and the P4 enums the same codes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kvpool.constants import Opcode, Status, Tier
from kvpool.protocol import KVP, KVPValue
from kvpool.wire import Reason

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "kvswitch.p4"

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("softswitch.frontend") is None,
                       reason="softswitch.frontend (helper A's load_program) is not there yet"),
    pytest.mark.skipif(not PROGRAM.exists(), reason="p4src/kvswitch.p4 (helper D) is not there yet"),
]


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


@pytest.mark.parametrize(("p4_name", "layer"), [("kvp_h", KVP), ("kvp_value_h", KVPValue)])
def test_p4_header_and_scapy_layer_have_the_same_fields_widths_and_order(program, p4_name, layer):
    header = program.type(p4_name)
    assert header is not None, f"{p4_name} not declared in {PROGRAM}"
    p4_layout = [(f.name, bit_width(f.type)) for f in header.fields]
    assert p4_layout == scapy_layout(layer)
    assert sum(w for _, w in p4_layout) == len(layer()) * 8


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
