"""Every complete program under p4src/ (a file that instantiates V1Switch) loads without error.

The other files there are fragments `#include`d into those programs (some inside a control body), so they
are loaded through the programs that include them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softswitch.frontend import ir, load_program

P4SRC = Path(__file__).resolve().parents[3] / "p4src"
PROGRAMS = sorted(p for p in P4SRC.rglob("*.p4") if "V1Switch(" in p.read_text(errors="replace"))


@pytest.mark.skipif(not PROGRAMS, reason="no complete P4 program under p4src/ yet")
@pytest.mark.parametrize("path", PROGRAMS, ids=[str(p.relative_to(P4SRC)) for p in PROGRAMS])
def test_program_under_p4src_loads(path: Path) -> None:
    prog = load_program(str(path))
    assert isinstance(prog, ir.Program)
    assert prog.main.type_name == "V1Switch"
    assert all(prog.control(b) is not None or prog.parser(b) is not None for _, b in prog.main.slots)
