"""The preprocessor: includes, object-like #defines, guards, and file:line kept for every line."""

from __future__ import annotations

import pytest

from softswitch.frontend import P4Error, ir, load_program
from softswitch.frontend.preprocess import preprocess_file, preprocess_source
from tests.softswitch.frontend.frontend_programs import program


def test_builtin_includes_are_not_read_and_defines_expand() -> None:
    pre = preprocess_source("#include <core.p4>\n#include <v1model.p4>\n#define W 12\nbit<W> x; // W\n", "a.p4")
    lines = pre.text.splitlines()
    assert lines[:3] == ["", "", ""]
    assert lines[3] == "bit<12> x; // 12"
    assert pre.line_map[3] == ("a.p4", 4)
    assert dict(pre.defines) == {"W": "12"}


def test_defines_do_not_touch_string_literals_and_may_use_earlier_defines() -> None:
    pre = preprocess_source('#define A 3\n#define B (A + 1)\n@name("A") B\n', "a.p4")
    assert pre.text.splitlines()[2] == '@name("A") (3 + 1)'


def test_include_guards_and_relative_includes_keep_original_lines(tmp_path) -> None:
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "defs.p4").write_text("#ifndef DEFS\n#define DEFS\nconst bit<8> ONE = 1;\n#endif\n")
    (inc / "more.p4").write_text('#include "defs.p4"\nconst bit<8> TWO = 2;\n')
    main = tmp_path / "main.p4"
    main.write_text('#include "include/defs.p4"\n#include "include/more.p4"\n' + program())
    pre = preprocess_file(str(main))
    assert pre.text.count("const bit<8> ONE") == 1
    two = next(i for i, line in enumerate(pre.text.splitlines()) if "TWO" in line)
    assert pre.line_map[two] == (str(inc / "more.p4"), 2)
    prog = load_program(str(main))
    assert [c.name for c in prog.constants] == ["ONE", "TWO"]
    assert prog.constants[1].loc == ir.SourceLoc(str(inc / "more.p4"), 2, 1)
    assert prog.files == (str(main), str(inc / "defs.p4"), str(inc / "more.p4"))


def test_include_dirs_are_searched_for_angle_includes(tmp_path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "lib.p4").write_text("const bit<8> LIB = 7;\n")
    (tmp_path / "main.p4").write_text("#include <lib.p4>\n" + program())
    prog = load_program(str(tmp_path / "main.p4"), include_dirs=[str(tmp_path / "lib")])
    assert prog.constant("LIB") is not None


def test_ifdef_else_selects_one_branch() -> None:
    pre = preprocess_source("#define FAST\n#ifdef FAST\nA\n#else\nB\n#endif\n#ifndef FAST\nC\n#endif\n", "a.p4")
    assert [line for line in pre.text.splitlines() if line] == ["A"]


@pytest.mark.parametrize(("source", "line", "message"), [
    ("#ifdef X\nA\n", 1, "unterminated conditional"),
    ("A\n#endif\n", 2, "#endif without #if"),
    ("#elif 1\n", 1, "unsupported construct '#elif'"),
    ("#line 5\n", 1, "unsupported construct '#line'"),
])
def test_bad_directives_are_located(source: str, line: int, message: str) -> None:
    with pytest.raises(P4Error) as info:
        preprocess_source(source, "a.p4")
    assert info.value.loc.line == line and message in info.value.message
