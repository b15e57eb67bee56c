"""P4_16 arithmetic on compile-time constants (constant folding), with P4's wrap-around and saturation.

Values follow the IR convention: bit<W> in [0, 2**W), int<W> in [-2**(W-1), 2**(W-1)), `int` unbounded.
"""

from __future__ import annotations

from softswitch.frontend import ir
from softswitch.frontend.ir import BitType, BoolConst, Constant, IntType


def wrap(value: int, t: BitType) -> int:
    """Reduce `value` modulo 2**W into the range of `t` (two's complement for int<W>)."""
    value &= (1 << t.width) - 1
    if t.signed and value >= 1 << (t.width - 1):
        value -= 1 << t.width
    return value


def saturate(value: int, t: BitType) -> int:
    return max(t.min, min(t.max, value))


def fold_unary(op: str, c: Constant | BoolConst, loc: ir.SourceLoc) -> Constant | BoolConst:
    if op == "!":
        assert isinstance(c, BoolConst)
        return BoolConst(not c.value, loc=loc)
    assert isinstance(c, Constant)
    t = c.type
    if op == "-":
        v = -c.value
    elif op == "~":
        v = ~c.value
    else:
        raise AssertionError(op)
    return Constant(wrap(v, t) if isinstance(t, BitType) else v, t, loc)


def fold_binary(op: str, a: ir.Expr, b: ir.Expr, result: ir.Type, loc: ir.SourceLoc) -> ir.Expr:
    """Fold `a op b` where both are constants of already-checked types; `result` is the result type."""
    if isinstance(a, BoolConst) and isinstance(b, BoolConst):
        va, vb = a.value, b.value
        table = {"&&": va and vb, "||": va or vb, "==": va == vb, "!=": va != vb}
        return BoolConst(table[op], loc=loc)
    assert isinstance(a, Constant) and isinstance(b, Constant)
    x, y = a.value, b.value
    if op in ("==", "!=", "<", "<=", ">", ">="):
        r = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
        return BoolConst(r, loc=loc)
    if op == "++":
        assert isinstance(a.type, BitType) and isinstance(b.type, BitType)
        raw = ((x & ((1 << a.type.width) - 1)) << b.type.width) | (y & ((1 << b.type.width) - 1))
        assert isinstance(result, BitType)
        return Constant(wrap(raw, result), result, loc)
    if op == "+":
        v = x + y
    elif op == "-":
        v = x - y
    elif op == "*":
        v = x * y
    elif op == "/":
        v = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
    elif op == "%":
        v = x - (abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)) * y
    elif op == "&":
        v = x & y
    elif op == "|":
        v = x | y
    elif op == "^":
        v = x ^ y
    elif op == "<<":
        v = x << y
    elif op == ">>":
        v = x >> y
    elif op in ("|+|", "|-|"):
        assert isinstance(result, BitType)
        return Constant(saturate(x + y if op == "|+|" else x - y, result), result, loc)
    else:
        raise AssertionError(op)
    if isinstance(result, BitType):
        if op == ">>" and not result.signed:
            v = (x & ((1 << result.width) - 1)) >> y
        return Constant(wrap(v, result), result, loc)
    assert isinstance(result, IntType)
    return Constant(v, result, loc)


def fold_cast(c: ir.Expr, t: ir.Type, loc: ir.SourceLoc) -> ir.Expr | None:
    """The constant `(t) c`, or None when the cast is not foldable (the caller keeps a Cast node)."""
    if isinstance(c, Constant) and isinstance(t, BitType):
        return Constant(wrap(c.value, t), t, loc)
    if isinstance(c, Constant) and isinstance(t, ir.BoolType) and isinstance(c.type, BitType) and c.type.width == 1:
        return BoolConst(c.value == 1, loc=loc)
    if isinstance(c, BoolConst) and isinstance(t, BitType) and t.width == 1:
        return Constant(int(c.value), t, loc)
    if isinstance(c, ir.EnumMember) and c.type.underlying is not None and isinstance(t, BitType):
        return Constant(wrap(c.type.value_of(c.member), t), t, loc)
    if isinstance(c, Constant) and isinstance(t, IntType):
        return Constant(c.value, t, loc)
    return None
