"""Bit-vector semantics of bit<W>/int<W> against reference formulas (P4_16 spec section 8.x)."""

from hypothesis import given
from hypothesis import strategies as st

from softswitch.runtime import bits

widths = st.integers(min_value=1, max_value=130)


@st.composite
def unsigned(draw, width=None):
    w = draw(widths) if width is None else width
    return w, draw(st.integers(min_value=0, max_value=(1 << w) - 1))


@st.composite
def two_unsigned(draw):
    w = draw(widths)
    a = draw(st.integers(min_value=0, max_value=(1 << w) - 1))
    b = draw(st.integers(min_value=0, max_value=(1 << w) - 1))
    return w, a, b


@st.composite
def two_signed(draw):
    w = draw(widths)
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    return w, draw(st.integers(lo, hi)), draw(st.integers(lo, hi))


def ref_signed(v: int, w: int) -> int:
    """Two's-complement reading of the low w bits (reference: modular arithmetic, then re-centre)."""
    v %= 1 << w
    return v if v < (1 << (w - 1)) else v - (1 << w)


@given(two_unsigned())
def test_unsigned_add_sub_mul_wrap_modulo_two_to_the_width(t):
    w, a, b = t
    assert bits.add(a, b, w) == (a + b) % (1 << w)
    assert bits.sub(a, b, w) == (a - b) % (1 << w)
    assert bits.mul(a, b, w) == (a * b) % (1 << w)


@given(two_signed())
def test_signed_add_sub_mul_wrap_twos_complement(t):
    w, a, b = t
    assert bits.add(a, b, w, True) == ref_signed(a + b, w)
    assert bits.sub(a, b, w, True) == ref_signed(a - b, w)
    assert bits.mul(a, b, w, True) == ref_signed(a * b, w)


@given(two_unsigned())
def test_unsigned_saturating_ops_clamp_to_zero_and_max(t):
    w, a, b = t
    assert bits.sat_add(a, b, w) == min(a + b, (1 << w) - 1)
    assert bits.sat_sub(a, b, w) == max(a - b, 0)


@given(two_signed())
def test_signed_saturating_ops_clamp_to_type_range(t):
    w, a, b = t
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    assert bits.sat_add(a, b, w, True) == min(max(a + b, lo), hi)
    assert bits.sat_sub(a, b, w, True) == min(max(a - b, lo), hi)


@given(unsigned(), st.integers(min_value=0, max_value=140))
def test_unsigned_shifts_drop_bits_and_fill_zero(t, n):
    w, a = t
    assert bits.shl(a, n, w) == (a * (2 ** n)) % (1 << w)
    assert bits.shr(a, n, w) == a // (2 ** n)


@given(two_signed(), st.integers(min_value=0, max_value=140))
def test_signed_right_shift_is_arithmetic(t, n):
    w, a, _ = t
    assert bits.shr(a, n, w, True) == a // (2 ** n)  # floor division = sign-filling shift


@given(unsigned())
def test_slice_reads_bits_hi_to_lo(t):
    w, a = t
    for lo in range(0, w, 7):
        hi = min(w - 1, lo + 5)
        expected = int(format(a, f"0{w}b")[w - 1 - hi: w - lo], 2)
        assert bits.slice_bits(a, hi, lo) == expected


@given(unsigned(), unsigned())
def test_concat_places_left_operand_in_high_bits(x, y):
    (wa, a), (wb, b) = x, y
    assert bits.concat(a, wa, False, b, wb, False) == int(format(a, f"0{wa}b") + format(b, f"0{wb}b"), 2)


@given(two_signed())
def test_cast_int_to_bit_keeps_the_bit_pattern(t):
    w, a, _ = t
    assert bits.cast(a, w, True, w, False) == a % (1 << w)
    assert bits.cast(bits.cast(a, w, True, w, False), w, False, w, True) == a


@given(unsigned(), widths)
def test_cast_bit_to_narrower_or_wider_bit_truncates_or_zero_extends(t, w2):
    w, a = t
    assert bits.cast(a, w, False, w2, False) == a % (1 << w2)


@given(two_signed(), widths)
def test_cast_int_to_wider_int_sign_extends(t, extra):
    w, a, _ = t
    assert bits.cast(a, w, True, w + extra, True) == a


@given(two_unsigned())
def test_set_slice_changes_only_the_slice(t):
    w, a, b = t
    lo = w // 3
    hi = max(lo, w - 2) if w > 1 else 0
    hi = min(hi, w - 1)
    out = bits.set_slice(a, hi, lo, b, w)
    assert bits.slice_bits(out, hi, lo) == b & ((1 << (hi - lo + 1)) - 1)
    outside = ((1 << w) - 1) ^ (((1 << (hi - lo + 1)) - 1) << lo)
    assert out & outside == a & outside


def test_invert_and_negate_of_unsigned_wrap():
    assert bits.invert(0, 8) == 255
    assert bits.neg(1, 8) == 255
    assert bits.neg(-128, 8, True) == -128
