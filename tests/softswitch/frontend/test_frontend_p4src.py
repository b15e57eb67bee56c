"""Every P4 file under p4src/ loads without error.

A complete program (a file that instantiates V1Switch) is loaded on its own; any other file is a fragment
`#include`d by a program (some inside a control body), so it must be among the files some program read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from softswitch.frontend import ir

P4SRC = Path(__file__).resolve().parents[3] / "p4src"
FILES = sorted(P4SRC.rglob("*.p4"))


def _is_program(path: Path) -> bool:
    return "V1Switch(" in path.read_text(errors="replace")


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(P4SRC)) for p in FILES])
def test_p4src_file_loads(path: Path, load_cached: Callable[[Path], ir.Program]) -> None:
    if _is_program(path):
        prog = load_cached(path)
        assert prog.main.type_name == "V1Switch"
        assert all(prog.control(b) is not None or prog.parser(b) is not None for _, b in prog.main.slots)
        return
    readers = [p for p in FILES if _is_program(p) and str(path) in {str(Path(f).resolve()) for f in load_cached(p).files}]
    assert readers, f"{path.relative_to(P4SRC)} is not included by any program under p4src/"
