"""Static storage layout of a packet's state: every header field, metadata field and variable gets one slot.

The executor keeps all per-packet state of one pipeline pass in a flat Python list (the "frame", `F` in the
generated code). P4 has no recursion, so every variable (headers, structs, locals of parsers, controls,
actions and functions) can have a fixed slot index computed at load time; the generated code then reads
`F[17]` instead of walking names. Composite values are contiguous, so copying a header or struct is one slice
assignment and deparsing a header reads consecutive slots.

Header layout: [valid, field0, field1, ...]. Struct/union: members in order. Stack: [nextIndex, elem0, elem1, ...]
with a fixed stride per element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from softswitch.frontend import ir


@dataclass
class Slot:
    """One scalar slot."""

    index: int
    type: ir.Type

    @property
    def base(self) -> int:
        return self.index

    @property
    def size(self) -> int:
        return 1


@dataclass
class HeaderSlots:
    base: int
    """index of the validity bit; field i lives at base + 1 + i"""
    type: ir.HeaderType
    offsets: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return 1 + len(self.type.fields)


@dataclass
class StructSlots:
    base: int
    size: int
    type: ir.StructType | ir.HeaderUnionType
    members: dict[str, Layout] = field(default_factory=dict)


@dataclass
class StackSlots:
    base: int
    """index of nextIndex; element k's header starts at base + 1 + k * stride"""
    type: ir.HeaderStackType
    stride: int
    elements: list[HeaderSlots] = field(default_factory=list)

    @property
    def size(self) -> int:
        return 1 + self.stride * self.type.size


Layout = Slot | HeaderSlots | StructSlots | StackSlots


def zero_of(t: ir.Type) -> object:
    """The value an uninitialised scalar slot holds (BMv2 reads uninitialised values as 0)."""
    return False if isinstance(t, ir.BoolType) else 0


class Allocator:
    """Hands out slots and records each slot's initial value (the frame template)."""

    def __init__(self) -> None:
        self.template: list[object] = []
        self.names: list[str] = []

    def scalar(self, t: ir.Type, name: str) -> int:
        self.template.append(zero_of(t))
        self.names.append(name)
        return len(self.template) - 1

    def allocate(self, t: ir.Type, name: str) -> Layout:
        if isinstance(t, ir.HeaderType):
            base = self.scalar(ir.BoolType(), f"{name}.$valid")
            h = HeaderSlots(base, t)
            for i, f in enumerate(t.fields):
                if not isinstance(f.type, ir.BitType | ir.BoolType | ir.EnumType):
                    raise TypeError(f"header {t.name}: field {f.name} of type {f.type} is not supported")
                self.scalar(f.type, f"{name}.{f.name}")
                h.offsets[f.name] = 1 + i
            return h
        if isinstance(t, ir.StructType | ir.HeaderUnionType):
            base = len(self.template)
            s = StructSlots(base, 0, t)
            for f in t.fields:
                s.members[f.name] = self.allocate(f.type, f"{name}.{f.name}")
            s.size = len(self.template) - base
            return s
        if isinstance(t, ir.HeaderStackType):
            base = self.scalar(ir.BitType(32), f"{name}.$nextIndex")
            st = StackSlots(base, t, 1 + len(t.element.fields))
            for k in range(t.size):
                elem = self.allocate(t.element, f"{name}[{k}]")
                assert isinstance(elem, HeaderSlots)
                st.elements.append(elem)
            return st
        return Slot(self.scalar(t, name), t)

    def __len__(self) -> int:
        return len(self.template)
