"""The controller as installed: only the packaged modules, no source tree, no p4src, no softswitch, cwd elsewhere.

`pip install .` into a fresh venv needs setuptools ≥ 77 from the network, so this test lays out what the wheel
holds (the packages the controller needs) in a temporary site directory and runs the controller from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
P4INFO = Path(__file__).parent / "data" / "kvswitch_min.p4info.txtpb"
PACKAGES = ("controller", "p4rt", "kvpool", "policies")
"""What the controller needs; softswitch/ and p4src/ are deliberately absent."""


@pytest.fixture
def site(tmp_path) -> Path:
    site = tmp_path / "site"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    return site


def run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_serve_help_runs_from_an_installed_layout(site, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run(site, elsewhere, "-m", "controller", "serve", "--help")
    assert done.returncode == 0, done.stderr
    assert "--p4info" in done.stdout and "--tenant-quota" in done.stdout


def test_the_controller_starts_without_p4src_or_softswitch(site, tmp_path):
    """Loads P4Info from outside the tree and builds the whole controller, codes from P4Info or the packaged copy."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p4info = elsewhere / "program.p4info.txtpb"
    shutil.copy(P4INFO, p4info)
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import controller
        assert Path(controller.__file__).is_relative_to({str(site)!r}), controller.__file__
        from controller.service import Controller, ServeOptions
        options = ServeOptions(switch="127.0.0.1:1", p4info=Path({str(p4info)!r}), device_config=Path({str(p4info)!r}),
                               state=Path("state.sqlite"), api="127.0.0.1:0")
        ctl = Controller(options)
        assert ctl.dataplane.punt_reasons["CLIENT_OP"] == 1 and ctl.dataplane.events["FILL"] == 3
        assert "softswitch" not in sys.modules
        ctl.state.close()
        print("ok")
    """)
    done = run(site, elsewhere, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert not (site / "p4src").exists()
