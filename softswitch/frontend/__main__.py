"""Check a P4 program with the softswitch front end: `python -m softswitch.frontend FILE [-I DIR]...`.

Prints a one-line summary per block, or the first error as `file:line:col: message` (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
import time

from softswitch.frontend import P4Error, load_program


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m softswitch.frontend",
                                 description="Parse and type-check a P4_16 v1model program.")
    ap.add_argument("program", help="the .p4 file")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                    help="directory searched for #include files (repeatable)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    try:
        prog = load_program(args.program, args.include_dirs)
    except P4Error as e:
        print(e, file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - start
    for w in prog.warnings:
        print(w, file=sys.stderr)
    for p in prog.parsers:
        print(f"parser  {p.name}: {len(p.states)} states")
    for c in prog.controls:
        print(f"control {c.name}: {len(c.tables)} tables, {len(c.actions)} actions, {len(c.instances)} externs")
    print(f"ok: {len(prog.files)} file(s), {len(prog.digests)} digest type(s), loaded in {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
