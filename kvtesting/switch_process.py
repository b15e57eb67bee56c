"""Start a switch as a separate process, the way BMv2 is run: compile, veth pairs, the binary, P4Runtime.

Two kinds share one harness, so a test that passes on one can be run unchanged on the other:

* `softswitch`: `python -m softswitch.compile` then `python -m softswitch PROG.json -i ... -- --grpc-server-addr`
* `bmv2`: `p4c --target bmv2 --arch v1model` then `simple_switch_grpc --no-p4 -i ...` and the pipeline pushed
  over P4Runtime (SetForwardingPipelineConfig), as a controller does.

`SwitchProcess` owns the process, its veth pairs and the `RemoteTarget` that drives it; `close()` undoes all.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from kvtesting.p4rt import P4InfoNames, P4RuntimeSession
from kvtesting.remote_target import Quiescence, RemoteTarget
from kvtesting.veth import HostPorts, VethPairs

REPO = pathlib.Path(__file__).resolve().parents[1]
DEVICE_ID = 1
"""simple_switch_grpc's --device-id in the brief's command line; any id works as long as both sides agree."""


class SwitchStartError(Exception):
    """The compiler or the switch failed; the message carries the tail of its output."""


@dataclass(frozen=True)
class Compiled:
    p4info: pathlib.Path
    device_config: pathlib.Path
    """softswitch: the JSON source bundle; bmv2: p4c's BMv2 JSON."""


@dataclass(frozen=True)
class SwitchKind:
    name: str
    tools: tuple[str, ...]
    """Executables that must be on PATH (`shutil.which`) for this kind to run."""
    push_pipeline: bool
    """True: the switch starts empty (`--no-p4`) and the harness sends SetForwardingPipelineConfig."""

    def missing_tools(self) -> list[str]:
        return [t for t in self.tools if shutil.which(t) is None]

    def available(self) -> bool:
        return not self.missing_tools()

    def compile_command(self, program: pathlib.Path, out_dir: pathlib.Path) -> list[str]:
        p4info = str(out_dir / f"{program.stem}.p4info.txtpb")
        if self.name == "bmv2":
            return ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out_dir),
                    "--p4runtime-files", p4info, str(program)]
        return [sys.executable, "-m", "softswitch.compile", str(program), "-o", str(out_dir),
                "--p4runtime-files", p4info]

    def switch_command(self, compiled: Compiled, veths: VethPairs, grpc_address: str, cpu_port: int) -> list[str]:
        if self.name == "bmv2":
            return ["simple_switch_grpc", "--no-p4", *veths.switch_args(), "--device-id", str(DEVICE_ID),
                    "--", "--grpc-server-addr", grpc_address, "--cpu-port", str(cpu_port)]
        program = ["--no-p4"] if self.push_pipeline else [str(compiled.device_config)]
        return [sys.executable, "-m", "softswitch", *program, *veths.switch_args(),
                "--device-id", str(DEVICE_ID), "--cpu-port", str(cpu_port),
                "--", "--grpc-server-addr", grpc_address]


SOFTSWITCH = SwitchKind("softswitch", tools=(), push_pipeline=False)
BMV2 = SwitchKind("bmv2", tools=("p4c", "simple_switch_grpc"), push_pipeline=True)
SOFTSWITCH_NO_P4 = SwitchKind("softswitch", tools=(), push_pipeline=True)
"""The softswitch started the way BMv2 is (`--no-p4`, pipeline pushed): exercises BMv2's start-up path here."""
KINDS = {k.name: k for k in (SOFTSWITCH, BMV2)}


def compile_program(kind: SwitchKind, program: pathlib.Path, out_dir: pathlib.Path) -> Compiled:
    out_dir.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(kind.compile_command(program, out_dir), cwd=REPO, capture_output=True, text=True)
    if res.returncode != 0:
        raise SwitchStartError(f"{kind.name} compiler failed on {program}:\n{res.stderr[-3000:]}")
    return Compiled(out_dir / f"{program.stem}.p4info.txtpb", out_dir / f"{program.stem}.json")


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ProcessOptions:
    ports: tuple[int, ...] = (1, 2, 3, 4)
    """Switch ports that get a veth pair (the CPU port never does: it is P4Runtime's)."""
    cpu_port: int = 255
    start_timeout_s: float = 120.0
    """Until the P4Runtime server answers (the softswitch parses the program first)."""
    quiescence: Quiescence = field(default_factory=Quiescence)
    veth_tag: str | None = None
    """Distinguishes this process's interfaces from another one's in the same test run."""


class SwitchProcess:
    """One running switch: `start()` returns the `RemoteTarget`; `close()` stops everything it started."""

    def __init__(self, kind: SwitchKind, compiled: Compiled, work_dir: pathlib.Path,
                 options: ProcessOptions = ProcessOptions()) -> None:
        self.kind = kind
        self.compiled = compiled
        self.work_dir = work_dir
        self.options = options
        self.veths = VethPairs(options.ports, options.veth_tag)
        self.proc: subprocess.Popen | None = None
        self.session: P4RuntimeSession | None = None
        self.host_ports: HostPorts | None = None
        self.target: RemoteTarget | None = None
        self.log_path = work_dir / f"{kind.name}-{self.veths.pairs[0].switch_end}.log"

    def start(self) -> RemoteTarget:
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> RemoteTarget:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.veths.create()
        self.host_ports = HostPorts(self.veths)
        address = f"127.0.0.1:{free_tcp_port()}"
        cmd = self.kind.switch_command(self.compiled, self.veths, address, self.options.cpu_port)
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + self.options.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise SwitchStartError(f"{self.kind.name} exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                self.session = P4RuntimeSession(address, DEVICE_ID, timeout=1.0)
                break
            except Exception as e:  # not listening yet (grpc's FutureTimeoutError) or not ready to arbitrate
                if time.monotonic() > deadline:
                    raise SwitchStartError(f"{self.kind.name} did not answer P4Runtime on {address} "
                                           f"within {self.options.start_timeout_s} s ({e!r}): {self.log_tail()}") \
                        from None
        names = P4InfoNames.from_text(self.compiled.p4info.read_text())
        if self.kind.push_pipeline:
            self.session.set_pipeline(names.info, self.compiled.device_config.read_bytes())
        self.target = RemoteTarget(self.session, names, self.host_ports, self.options.cpu_port,
                                   self.options.quiescence)
        self.target.configure_digests()
        self.target.record_initial_defaults()
        return self.target

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        if self.session is not None:
            # the process may already be gone; closing must still free the rest
            with contextlib.suppress(Exception):
                self.session.close()
            self.session = None
        if self.proc is not None:
            terminate(self.proc)
            self.proc = None
        if self.host_ports is not None:
            self.host_ports.close()
            self.host_ports = None
        self.veths.close()


def terminate(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Stop a switch process as BMv2 wants it (SIGTERM; SIGINT is not enough), killing it after `grace` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)



STOP_WAIT_S = 30.0
"""Longest wait for a SIGSTOPped process to be stopped (a bound, not a timing goal: it takes microseconds on a
quiet machine, but a thread running on another core stops only when the kernel next gets to it)."""


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """The process `pid` stopped for the body: SIGSTOP, then wait until every one of its threads is in state
    "T" (stopped), so nothing the body sends can be read by a thread still running; SIGCONT on leaving.

    `os.kill` returns once the signal is queued: a thread busy on the other core keeps running until the kernel
    interrupts it, and a frame sent in that moment would be read alone (CI saw exactly that)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + STOP_WAIT_S
        while not _all_threads_stopped(pid):
            if time.monotonic() > deadline:
                raise TimeoutError(f"process {pid} did not stop within {STOP_WAIT_S} s of SIGSTOP")
            time.sleep(0.001)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _all_threads_stopped(pid: int) -> bool:
    tasks = pathlib.Path(f"/proc/{pid}/task")
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        state = stat[stat.rindex(")") + 2]  # the field after the command name, which may hold spaces and ")"
        if state not in "tT":
            return False
    return True
