"""Compile p4src/ for a target into `<out>/<target>/`: the device config and the P4Info the controller pushes.

    soft:  python -m softswitch.compile p4src/kvswitch.p4 -o build/soft --p4runtime-files build/soft/kvswitch.p4info.txtpb
    bmv2:  p4c --target bmv2 --arch v1model -o build/bmv2 --p4runtime-files build/bmv2/kvswitch.p4info.txtpb p4src/kvswitch.p4

Both write `kvswitch.json` (p4c's BMv2 JSON, or softswitch's bundle of the sources under the same name), so
everything downstream only names the folder. Outputs newer than every `p4src/**/*.p4` are reused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from topo.switches import REPO, TestbedError

PROGRAM = REPO / "p4src" / "kvswitch.p4"


@dataclass(frozen=True, slots=True)
class Artifacts:
    """What a compile produced for one target."""

    device_config: Path
    """`kvswitch.json`: the switch's program and the controller's --device-config."""
    p4info: Path
    """`kvswitch.p4info.txtpb`: P4Info in protobuf text format."""


def artifacts(target: str, out: Path) -> Artifacts:
    folder = out / ("bmv2" if target == "bmv2" else "soft")
    return Artifacts(folder / f"{PROGRAM.stem}.json", folder / f"{PROGRAM.stem}.p4info.txtpb")


def command(target: str, out: Path) -> list[str]:
    """The compiler command line for `target` (bridge has nothing to compile)."""
    art = artifacts(target, out)
    folder = art.device_config.parent
    if target == "bmv2":
        return ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(folder),
                "--p4runtime-files", str(art.p4info), str(PROGRAM)]
    return [sys.executable, "-m", "softswitch.compile", str(PROGRAM), "-o", str(folder),
            "--p4runtime-files", str(art.p4info)]


def up_to_date(art: Artifacts) -> bool:
    if not (art.device_config.exists() and art.p4info.exists()):
        return False
    newest_source = max(p.stat().st_mtime for p in PROGRAM.parent.rglob("*.p4"))
    return min(art.device_config.stat().st_mtime, art.p4info.stat().st_mtime) >= newest_source


def compile_program(target: str, out: Path, force: bool = False) -> Artifacts:
    """Compile (unless up to date); raises TestbedError with the compiler's message on failure."""
    if target == "bridge":
        return artifacts("soft", out)  # unused by the bridge
    if not PROGRAM.exists():
        raise TestbedError(f"{PROGRAM} does not exist")
    if target == "bmv2" and shutil.which("p4c") is None:
        raise TestbedError("TARGET=bmv2 needs p4c on PATH (github.com/p4lang/p4c); it is not installed here. "
                           "Use TARGET=soft for the embedded target.")
    art = artifacts(target, out)
    if not force and up_to_date(art):
        return art
    art.device_config.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(command(target, out), cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise TestbedError(f"compiling {PROGRAM.relative_to(REPO)} for {target} failed:\n"
                           f"{(done.stderr or done.stdout).strip()}")
    if not (art.device_config.exists() and art.p4info.exists()):
        raise TestbedError(f"the {target} compiler ran but did not write {art.device_config} and {art.p4info}")
    return art
