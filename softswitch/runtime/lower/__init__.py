"""Lower the typed IR (`softswitch.frontend.ir`) to executable Python: one compiled function per parser state,
action, table application, function and control, all reading and writing the flat frame of `layout.py`.

Why generate source instead of nesting closures: a per-packet walk over nested Python closures costs one
call per IR node; generating the same logic as straight-line Python and compiling it once at load time lets
CPython run each action or parser state as a single function with constant slot indices (`F[17]`), which is
what makes tens of thousands of packets per second possible in pure Python. The generated source is kept
on `Lowered.source` (and shown by `SoftSwitch.dump_source()`) so it can be read and debugged.

What the generated functions assume (the contract with `switch.py`):
- `F` is the frame: a list copied from `Lowered.template` per packet; special slots are in `Lowered.special`.
- the parser raises `ParserError(code)` on a parser error; the switch records it in `parser_error`.
- controls catch `exit` themselves; `AssertionFailed` escapes to the switch, which drops the packet.

Shortcuts the generated code takes (each with the plain form's behaviour, `tests/softswitch/runtime/
test_runtime_lowering_fastpaths.py`): consecutive register reads/writes of one size at one pure index (slots,
locals, constants, operators) share one bounds check, and the locals they read first are zeroed only where the
check fails; a constant index in range is not checked; a counter counts inline; a keyless table reads its default
outcome and an exact-only one probes its dict, without a lookup call; a `bit<W>` shift by a variable amount is
inline; `hash()` with constant base and max whose sum fits the result skips the folding it cannot need; a hashed
field list is packed per combination of its (up to 3) headers' validity, constants placed at compile time; crc32
is `binascii.crc32` itself; a P4 function that only returns an expression of its parameters is that expression
at a call inside an expression (its arguments pure). They cut the CPU of the kvswitch program's coalescing and
stream paths (`bench.kvswitch_paths`).

One module per concern: `common` (errors, references, the shared state), `expressions`, `statements`,
`externs` (extern calls and objects), `parser`, `table_objects` (tables are objects, not code) and `compiler`
(the whole program).
"""

from softswitch.runtime.lower.common import AssertionFailed, Lowered, LoweringError, ParserError, ValueSet
from softswitch.runtime.lower.compiler import lower

__all__ = ["AssertionFailed", "Lowered", "LoweringError", "ParserError", "ValueSet", "lower"]
