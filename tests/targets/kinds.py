"""The targets a kvswitch test can run on, as pytest parameters, and the long-lived switch processes behind them.

    inproc               the in-process `softswitch.runtime.SoftSwitch` (default, fast)
    softswitch-process   `python -m softswitch` behind P4Runtime and veth pairs (slow, root; runs in CI)
    bmv2-process         `simple_switch_grpc` from p4c's output, the same harness (slow, root, bmv2)

Select with `-m "not slow"` (in-process only) or `-k softswitch-process` / `-k bmv2-process`. Whether BMv2
runs is decided by a check (`shutil.which`), never by catching a failure. A busy machine can lengthen the
process targets' waits with `KVSWITCH_REMOTE_WAIT_S=FIRST,QUIET` (seconds; default 0.25,0.04, see
`remote.Quiescence`).
"""

from __future__ import annotations

import os
import pathlib
import warnings
from collections.abc import Mapping

import pytest

from kvtesting.kvnet import CPU_PORT, P4_MAIN
from kvtesting.remote_target import Quiescence
from kvtesting.switch_process import (
    BMV2,
    KINDS,
    Compiled,
    ProcessOptions,
    SwitchProcess,
    compile_program,
)
from tests.targets.kvswitch_reset import SlotTracker, reset_kvswitch

INPROC = "inproc"
PROCESS_SUFFIX = "-process"
EPOCH_STRIDE = 1000
"""Epoch numbers a test may use (tests use small ones); each test on a shared switch gets a fresh block."""

_not_root = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and raw sockets need root")


def target_params() -> list:
    """`inproc`, `softswitch-process`, `bmv2-process` with their marks, for `@pytest.fixture(params=...)`."""
    return [
        INPROC,
        pytest.param("softswitch-process", marks=[pytest.mark.slow, pytest.mark.root, _not_root]),
        pytest.param("bmv2-process", marks=[
            pytest.mark.slow, pytest.mark.root, pytest.mark.bmv2, _not_root,
            pytest.mark.skipif(not BMV2.available(), reason="p4c/simple_switch_grpc not on PATH")]),
    ]


def quiescence_from_env(env: Mapping[str, str]) -> Quiescence:
    """`KVSWITCH_REMOTE_WAIT_S=first,quiet` (seconds) lengthens the waits on a slow or busy machine."""
    text = env.get("KVSWITCH_REMOTE_WAIT_S")
    if not text:
        return Quiescence()
    try:
        first, quiet = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"KVSWITCH_REMOTE_WAIT_S={text!r}: expected FIRST,QUIET in seconds, e.g. 0.5,0.1") \
            from None
    return Quiescence(first_frame_s=first, quiet_s=quiet)


def kind_of(param: str) -> str:
    """`softswitch-process` → `softswitch` (a `switch_process.KINDS` key)."""
    assert param.endswith(PROCESS_SUFFIX), param
    return param[: -len(PROCESS_SUFFIX)]


class SharedSwitches:
    """One kvswitch process per kind, started on first use and reset between tests (`for_test`)."""

    def __init__(self, work_dir: pathlib.Path, tag: str, program: pathlib.Path = P4_MAIN) -> None:
        self.work_dir = work_dir
        self.tag = tag
        """Two letters, distinct per instance: interface names are `rtg{pid}{tag}{kind}…` (global on the host)."""
        self.program = program
        self._compiled: dict[str, Compiled] = {}
        self._running: dict[str, tuple[SwitchProcess, SlotTracker]] = {}
        self._tests = 0

    def compiled(self, kind: str) -> Compiled:
        if kind not in self._compiled:
            self._compiled[kind] = compile_program(KINDS[kind], self.program, self.work_dir / f"build-{kind}")
        return self._compiled[kind]

    def start(self, kind: str, tag: str) -> SwitchProcess:
        """A new process of `kind` (the caller closes it); `tag` (one letter) keeps its interfaces apart."""
        proc = SwitchProcess(KINDS[kind], self.compiled(kind), self.work_dir,
                             ProcessOptions(cpu_port=CPU_PORT, quiescence=quiescence_from_env(os.environ),
                                            veth_tag=f"{os.getpid() % 10000:04d}{self.tag}{tag}"))
        proc.start()
        return proc

    def for_test(self, kind: str) -> SlotTracker:
        """The shared process of `kind`, in a fresh switch's state, with a new block of epoch numbers."""
        running = self._running.get(kind)
        if running is not None and not running[0].alive():
            running[0].close()  # it died during the previous test: that test failed; start again
            running = None
        if running is None:
            proc = self.start(kind, kind[0])
            running = (proc, SlotTracker(proc.target))
            self._running[kind] = running
        else:
            reset_kvswitch(running[1])
        self._tests += 1
        running[1].epoch_offset = self._tests * EPOCH_STRIDE
        return running[1]

    def after_test(self, kind: str) -> None:
        running = self._running.get(kind)
        if running is not None and running[1].late_frames:
            warnings.warn(f"{kind}: {len(running[1].late_frames)} frame(s) arrived after the switch looked quiet; "
                          "raise Quiescence.first_frame_s/quiet_s", stacklevel=1)

    def close(self) -> None:
        for proc, _ in self._running.values():
            proc.close()
        self._running.clear()
