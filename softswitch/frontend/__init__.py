"""P4_16 front end of softswitch: preprocess → parse (lark) → resolve and type-check → typed IR.

    program = load_program("p4src/kvswitch.p4")      # ir.Program, or raises P4Error("file:line:col: ...")

`ir.py` documents the IR's conventions for the executor and the P4Info generator. The passes, one module
each: `preprocess` (includes, #define, guards; file:line kept) → `parser` with the grammar `p4.lark` (AST in
`ast`) → `checker` + `expressions` (+ `scopes`, `constfold`, `bmv2_rules`, the v1model declarations in
`builtins`) → `ir.Program`. Every mistake in a program is one `errors.P4Error` ("file:line:col: message").
"""

from __future__ import annotations

import os

from softswitch.frontend.checker import Checker
from softswitch.frontend.errors import P4Error
from softswitch.frontend.ir import Program, SourceLoc
from softswitch.frontend.parser import parse
from softswitch.frontend.preprocess import Preprocessed, preprocess_file, preprocess_source

__all__ = ["P4Error", "Program", "load_program", "load_source"]


def _check(pre: Preprocessed) -> Program:
    try:
        return Checker(pre.files).check(parse(pre))
    except RecursionError:
        raise P4Error(SourceLoc(pre.files[0], 1, 1), "program nested too deeply to load") from None


def load_program(path: str | os.PathLike[str], include_dirs: tuple[str, ...] | list[str] = ()) -> Program:
    """Load a P4_16 v1model program from `path` (its `#include "..."`s resolved relative to it)."""
    return _check(preprocess_file(str(path), include_dirs))


def load_source(text: str, filename: str = "<input>.p4", include_dirs: tuple[str, ...] | list[str] = ()) -> Program:
    """Load a program given as text; `filename` names it in error messages and resolves its includes."""
    return _check(preprocess_source(text, filename, include_dirs))
