"""kvtesting.require_targets: with --require-target bmv2, a skipped BMv2 case fails the run; other skips stay."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[2]
CASES = textwrap.dedent("""
    import pytest

    @pytest.mark.bmv2
    def test_on_bmv2():
        pytest.skip("p4c not on PATH")

    def test_elsewhere():
        pytest.skip("not here")

    @pytest.mark.bmv2
    def test_runs():
        pass
""")


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_cases.py").write_text(CASES)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "markers=bmv2",
                           "-c", os.devnull, "--rootdir", str(tmp_path), *args, "test_cases.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_skipped_case_of_a_required_target_fails_with_its_reason(tmp_path):
    done = run(tmp_path, "-p", "kvtesting.require_targets", "--require-target", "bmv2")
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 passed, 1 skipped" in done.stdout, done.stdout
    assert "--require-target bmv2: this test skipped (Skipped: p4c not on PATH)" in done.stdout


def test_without_the_option_skips_stay_skips(tmp_path):
    done = run(tmp_path, "-p", "kvtesting.require_targets")
    assert done.returncode == 0 and "1 passed, 2 skipped" in done.stdout, done.stdout
