"""A small C-style preprocessor for P4 sources, keeping the original file:line of every output line.

Supported: `#include <core.p4>` / `<v1model.p4>` (built in, see `builtins.py`, nothing is read),
`#include "x.p4"` (relative to the including file, then the include dirs) and `#include <x.p4>` (include
dirs), object-like `#define NAME value`, `#undef`, `#ifdef/#ifndef/#else/#endif` (include guards),
`#if 0|1`, `#if defined(X)`, `#pragma once`. Function-like macros and anything else are refused with a
located error. Expanding a `#define` inside a line may shift the columns after it on that line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from softswitch.frontend.errors import P4Error, unsupported
from softswitch.frontend.ir import SourceLoc

BUILTIN_INCLUDES = frozenset({"core.p4", "v1model.p4"})
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*?)\s*$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')


@dataclass(frozen=True, slots=True)
class Preprocessed:
    """The expanded text and, for output line i (0-based), the (file, line) it came from."""

    text: str
    line_map: tuple[tuple[str, int], ...]
    files: tuple[str, ...]
    """Every file read, the main one first."""
    defines: tuple[tuple[str, str], ...]
    """Object-like macros defined at the end (name, expansion)."""

    def loc(self, line: int, col: int) -> SourceLoc:
        """Map a 1-based (line, col) of `text` back to the original file."""
        if 1 <= line <= len(self.line_map):
            file, orig = self.line_map[line - 1]
            return SourceLoc(file, orig, col)
        file, orig = self.line_map[-1] if self.line_map else ("<empty>", 0)
        return SourceLoc(file, orig, col)


class _State:
    """Mutable state of one preprocessing run (defines, guards, output), passed explicitly."""

    def __init__(self, include_dirs: tuple[str, ...]) -> None:
        self.include_dirs = include_dirs
        self.defines: dict[str, str] = {}
        self.out: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.files: list[str] = []
        self.once: set[str] = set()
        self.stack: list[str] = []


def preprocess_file(path: str, include_dirs: tuple[str, ...] | list[str] = ()) -> Preprocessed:
    return preprocess_source(_read(path, SourceLoc(path, 0, 0), "file"), path, include_dirs)


def _read(path: str, loc: SourceLoc, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise P4Error(loc, f"{what} '{path}' is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise P4Error(loc, f"cannot read {what}: {e.strerror}") from None


def preprocess_source(text: str, filename: str, include_dirs: tuple[str, ...] | list[str] = ()) -> Preprocessed:
    st = _State(tuple(include_dirs))
    _process(st, text, filename)
    return Preprocessed("\n".join(st.out) + "\n", tuple(st.line_map), tuple(st.files), tuple(st.defines.items()))


def _expand(st: _State, line: str, loc: SourceLoc, depth: int = 0) -> str:
    """Replace defined names outside string literals (repeatedly, for macros that use macros)."""
    if not st.defines:
        return line
    if depth > 20:
        raise P4Error(loc, "recursive #define")
    parts: list[str] = []
    pos = 0
    changed = False
    for m in _STRING.finditer(line):
        seg = line[pos:m.start()]
        new = _IDENT.sub(lambda mm: st.defines.get(mm.group(0), mm.group(0)), seg)
        changed |= new != seg
        parts.append(new)
        parts.append(m.group(0))
        pos = m.end()
    seg = line[pos:]
    new = _IDENT.sub(lambda mm: st.defines.get(mm.group(0), mm.group(0)), seg)
    changed |= new != seg
    parts.append(new)
    result = "".join(parts)
    return _expand(st, result, loc, depth + 1) if changed else result


def _strip_comment(s: str) -> str:
    s = re.sub(r"/\*.*?\*/", " ", s)
    s = s.split("//", 1)[0]
    return s.strip()


def _find_include(st: _State, name: str, quoted: bool, includer: str, loc: SourceLoc) -> str:
    candidates = [os.path.join(os.path.dirname(includer), name)] if quoted else []
    candidates += [os.path.join(d, name) for d in st.include_dirs]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c)
    raise P4Error(loc, f"cannot find include file '{name}'")


def _process(st: _State, text: str, filename: str) -> None:
    if filename in st.stack:
        raise P4Error(SourceLoc(filename, 1, 1), "recursive #include")
    st.stack.append(filename)
    if filename not in st.files:
        st.files.append(filename)
    lines = text.split("\n")
    # Conditional stack: (taking_this_branch, parent_active, else_seen, loc)
    cond: list[tuple[bool, bool, bool, SourceLoc]] = []
    in_comment = False
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i]
        # joined continuation lines (only meaningful for directives)
        active = all(c[0] for c in cond)
        m = None if in_comment else _DIRECTIVE.match(line)
        if m:
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            m = _DIRECTIVE.match(line)
            assert m is not None
            directive, rest = m.group(1), _strip_comment(m.group(2))
            col = line.index("#") + 1
            loc = SourceLoc(filename, lineno, col)
            _directive(st, directive, rest, loc, cond, active, filename)
            for k in range(lineno, i + 2):  # keep one output line per input line
                st.out.append("")
                st.line_map.append((filename, k))
            i += 1
            continue
        in_comment = _ends_in_comment(line, in_comment)
        st.out.append(_expand(st, line, SourceLoc(filename, lineno, 1)) if active else "")
        st.line_map.append((filename, lineno))
        i += 1
    if cond:
        raise P4Error(cond[-1][3], "unterminated conditional directive (missing #endif)")
    st.stack.pop()


def _ends_in_comment(line: str, in_comment: bool) -> bool:
    """Whether a /* block comment is still open at the end of `line` (strings ignored: rare in P4)."""
    pos = 0
    while True:
        if in_comment:
            end = line.find("*/", pos)
            if end < 0:
                return True
            in_comment, pos = False, end + 2
        else:
            start = line.find("/*", pos)
            lc = line.find("//", pos)
            if start < 0 or (0 <= lc < start):
                return False
            in_comment, pos = True, start + 2


def _directive(st: _State, directive: str, rest: str, loc: SourceLoc, cond: list, active: bool,
               filename: str) -> None:
    if directive in ("ifdef", "ifndef"):
        name = rest.split()[0] if rest else ""
        if not name:
            raise P4Error(loc, f"#{directive} needs a name")
        taken = (name in st.defines) == (directive == "ifdef")
        cond.append((taken, active, False, loc))
        return
    if directive == "if":
        cond.append((_eval_if(st, rest, loc), active, False, loc))
        return
    if directive == "else":
        if not cond:
            raise P4Error(loc, "#else without #if")
        taken, parent, else_seen, cloc = cond.pop()
        if else_seen:
            raise P4Error(loc, "#else after #else")
        cond.append((not taken, parent, True, cloc))
        return
    if directive == "endif":
        if not cond:
            raise P4Error(loc, "#endif without #if")
        cond.pop()
        return
    if directive == "elif":
        raise unsupported(loc, "#elif")
    if not active:
        return
    if directive == "define":
        m = re.match(r"([A-Za-z_]\w*)(\()?\s*(.*)$", rest)
        if not m:
            raise P4Error(loc, "#define needs a name")
        if m.group(2):
            raise unsupported(loc, "function-like macro")
        st.defines[m.group(1)] = _expand(st, m.group(3).strip(), loc)
    elif directive == "undef":
        st.defines.pop(rest.split()[0] if rest else "", None)
    elif directive == "include":
        m = re.match(r'(<([^>]+)>|"([^"]+)")$', rest)
        if not m:
            raise P4Error(loc, "#include expects \"file\" or <file>")
        name = m.group(2) or m.group(3)
        if os.path.basename(name) in BUILTIN_INCLUDES:
            return
        path = _find_include(st, name, m.group(3) is not None, filename, loc)
        if path in st.once:
            return
        _process(st, _read(path, loc, "include file"), path)
    elif directive == "pragma":
        if rest.strip() == "once":
            st.once.add(filename)
    elif directive in ("error", "warning"):
        if directive == "error":
            raise P4Error(loc, f"#error {rest}")
    else:
        raise unsupported(loc, f"#{directive}")


def _eval_if(st: _State, rest: str, loc: SourceLoc) -> bool:
    m = re.fullmatch(r"!?\s*defined\s*\(?\s*([A-Za-z_]\w*)\s*\)?", rest)
    if m:
        return (m.group(1) in st.defines) != rest.startswith("!")
    value = _expand(st, rest, loc).strip()
    if re.fullmatch(r"\d+", value):
        return int(value) != 0
    raise unsupported(loc, f"#if {rest}")
