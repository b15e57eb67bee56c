"""Fixed-width bit-vector arithmetic of P4_16 (`bit<W>` and `int<W>`), as plain functions on Python ints.

Representation, used throughout the executor:
- a `bit<W>` value is an int in [0, 2**W);
- an `int<W>` value is an int in [-2**(W-1), 2**(W-1)) (two's complement read as a signed number), so that
  comparisons and `>>` behave as P4 wants without conversions; it is turned into its W-bit pattern only where
  bits leave the program (deparser, table keys, digests, register reads by the control plane).

The lowering pass (`lower.py`) inlines the common cases as Python expressions; these functions are the reference
it is tested against, and they fold constants at load time.
"""

from __future__ import annotations


def mask(width: int) -> int:
    """All-ones pattern of `width` bits."""
    return (1 << width) - 1


def wrap_bits(value: int, width: int) -> int:
    """`bit<W>` wrap-around: keep the low W bits."""
    return value & ((1 << width) - 1)


def wrap_int(value: int, width: int) -> int:
    """`int<W>` wrap-around: keep the low W bits and read them as two's complement."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def to_pattern(value: int, width: int, signed: bool) -> int:
    """The unsigned W-bit pattern of a value (identity for `bit<W>`)."""
    return value & ((1 << width) - 1) if signed else value


def from_pattern(pattern: int, width: int, signed: bool) -> int:
    """The value a W-bit pattern denotes in `bit<W>` or `int<W>`."""
    return wrap_int(pattern, width) if signed else pattern


def wrap(value: int, width: int, signed: bool) -> int:
    return wrap_int(value, width) if signed else value & ((1 << width) - 1)


def add(a: int, b: int, width: int, signed: bool = False) -> int:
    return wrap(a + b, width, signed)


def sub(a: int, b: int, width: int, signed: bool = False) -> int:
    return wrap(a - b, width, signed)


def mul(a: int, b: int, width: int, signed: bool = False) -> int:
    return wrap(a * b, width, signed)


def neg(a: int, width: int, signed: bool = False) -> int:
    return wrap(-a, width, signed)


def invert(a: int, width: int, signed: bool = False) -> int:
    """Bitwise complement `~a`."""
    return ~a if signed else a ^ ((1 << width) - 1)


def bounds(width: int, signed: bool) -> tuple[int, int]:
    """Smallest and largest value of the type."""
    if signed:
        return -(1 << (width - 1)), (1 << (width - 1)) - 1
    return 0, (1 << width) - 1


def sat_add(a: int, b: int, width: int, signed: bool = False) -> int:
    """`a |+| b`: clamp to the type's range instead of wrapping."""
    lo, hi = bounds(width, signed)
    return min(max(a + b, lo), hi)


def sat_sub(a: int, b: int, width: int, signed: bool = False) -> int:
    """`a |-| b`: clamp to the type's range instead of wrapping."""
    lo, hi = bounds(width, signed)
    return min(max(a - b, lo), hi)


def shl(a: int, amount: int, width: int, signed: bool = False) -> int:
    """`a << amount`; shifting by W or more gives 0."""
    if amount >= width:
        return 0
    return wrap(a << amount, width, signed)


def shr(a: int, amount: int, width: int, signed: bool = False) -> int:
    """`a >> amount`: logical for `bit<W>`, arithmetic (sign-filling) for `int<W>`."""
    if amount >= width:
        return -1 if (signed and a < 0) else 0
    return a >> amount


def slice_bits(a: int, hi: int, lo: int) -> int:
    """`a[hi:lo]`, always a `bit<hi-lo+1>` (works on the two's-complement pattern of signed values)."""
    return (a >> lo) & ((1 << (hi - lo + 1)) - 1)


def set_slice(a: int, hi: int, lo: int, value: int, width: int, signed: bool = False) -> int:
    """`a[hi:lo] = value`: the new whole value of `a`."""
    m = ((1 << (hi - lo + 1)) - 1) << lo
    pattern = (to_pattern(a, width, signed) & ~m) | ((value << lo) & m)
    return from_pattern(pattern, width, signed)


def concat(a: int, a_width: int, a_signed: bool, b: int, b_width: int, b_signed: bool) -> int:
    """`a ++ b`: a `bit<Wa+Wb>` (p4c types it with the signedness of `a`; we return the pattern)."""
    return (to_pattern(a, a_width, a_signed) << b_width) | to_pattern(b, b_width, b_signed)


def cast(value: int, from_width: int, from_signed: bool, to_width: int, to_signed: bool) -> int:
    """Explicit cast between `bit<W>`/`int<W>` types (P4_16 spec 8.10: truncate or extend, sign-extend int).

    Sign changes keep the width's bit pattern; width changes of an `int` sign-extend; of a `bit` zero-extend.
    """
    if from_signed and not to_signed:
        # int<W> -> bit<W'>: sign-extend (Python ints already are), then truncate
        return value & ((1 << to_width) - 1)
    if not from_signed and to_signed:
        return wrap_int(value, to_width)
    return wrap(value, to_width, to_signed)


def bool_to_bit(value: bool) -> int:
    return 1 if value else 0
