"""`python -m softswitch.frontend`: a summary for a good program, `file:line:col: message` for a bad one."""

from __future__ import annotations

from softswitch.frontend.__main__ import main
from tests.softswitch.frontend.frontend_programs import program


def test_good_program_prints_a_summary(tmp_path, capsys) -> None:
    path = tmp_path / "good.p4"
    path.write_text(program(ingress="    table t { actions = { NoAction; } }", apply="        t.apply();"))
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "control MyIngress: 1 tables, 0 actions, 0 externs" in out and out.rstrip().endswith("s")


def test_bad_program_prints_the_located_error_and_fails(tmp_path, capsys) -> None:
    path = tmp_path / "bad.p4"
    path.write_text(program(apply="        nope = 1;"))
    assert main([str(path)]) == 1
    assert capsys.readouterr().err.strip() == f"{path}:32:9: undeclared name 'nope'"
