"""Send X on port p, expect Y on port q: packet tests of a v1model P4 program on three targets alike.

    from kvtesting.packets import open_switch
    from softswitch.target import Exact, TableEntry

    with open_switch("inproc", "fwd.p4") as sw:          # or "softswitch", "bmv2"
        sw.target.table_insert(TableEntry("MyIngress.fwd", {"std.ingress_port": Exact(1)},
                                          "MyIngress.to_port", {"port": 2}))
        sw.send(1, frame, frames=1)                       # bytes or a scapy packet; 1 output to wait for
        sw.expect(2, frame)                               # the next output: on port 2, these bytes
        sw.expect_nothing()                               # and nothing else came out

The three kinds run the same program and answer the same calls (`softswitch.target.Target`):

    inproc      `softswitch.runtime.SoftSwitch` in this process: no root, milliseconds per packet
    softswitch  `python -m softswitch` behind P4Runtime, ports on veth pairs (root)
    bmv2        BMv2's `simple_switch_grpc`, the program compiled by p4c, same harness (root, p4c on PATH)

`available_kinds()` says which of them this machine can run, so a test parametrised over it never skips by
catching a failure. docs/packet-tests.md is the how-to (a test outside this repository, run with pytest).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvtesting import expect
from softswitch.target import Target

KINDS = ("inproc", "softswitch", "bmv2")
"""Target kinds `open_switch` accepts."""
CPU_PORT = 255
"""The port P4Runtime packet-in/out use (simple_switch_grpc's --cpu-port); outputs to it are packet-ins."""

Expected = bytes | Any | Callable[[bytes], bool]
"""What `expect` compares with: exact bytes, a scapy packet (its bytes), or a predicate on the bytes."""


class PacketMismatch(AssertionError):
    """An output differs from what the test expected; the message shows both, dissected."""


@dataclass
class PacketSwitch:
    """A switch under test: `send` packets in, `expect` what comes out, in order, port by port.

    Outputs of every `send` queue up; each `expect` takes the oldest one. `target` is the full Target interface
    (tables, counters, registers, digests, multicast) for the setup a test needs.
    """

    target: Target
    kind: str
    pending: deque[tuple[int, bytes]] = field(default_factory=deque)
    """Outputs not yet expected: (egress port, bytes)."""

    def send(self, port: int, packet: bytes | Any, frames: int | None = None) -> list[tuple[int, bytes]]:
        """Inject `packet` on switch port `port`; returns (and queues) every output it caused. `frames`: how many
        a correct switch sends, waited for on a switch process (which has no "done" signal; without it, its
        outputs are collected until it is quiet for a moment, which a busy machine can cut short)."""
        outputs = expect.process(self.target, port, _bytes(packet), frames)
        self.pending.extend(outputs)
        return outputs

    def expect(self, port: int, packet: Expected) -> bytes:
        """The oldest pending output must leave on `port` and match `packet`; returns its bytes."""
        if not self.pending:
            raise PacketMismatch(f"expected a packet on port {port}, nothing came out\n"
                                 f"  expected: {_show(packet)}")
        out_port, data = self.pending.popleft()
        if out_port != port:
            raise PacketMismatch(f"expected a packet on port {port}, got one on port {out_port}\n"
                                 f"  got:      {_show(data)}")
        if callable(packet) and not isinstance(packet, bytes | bytearray) and not hasattr(packet, "build"):
            if not packet(data):
                raise PacketMismatch(f"the packet on port {port} fails {getattr(packet, '__name__', packet)}\n"
                                     f"  got:      {_show(data)}")
            return data
        want = _bytes(packet)
        if data != want:
            at = next((i for i, (a, b) in enumerate(zip(data, want, strict=False)) if a != b),
                      min(len(data), len(want)))
            raise PacketMismatch(f"the packet on port {port} differs from byte {at} on "
                                 f"({len(data)} bytes, expected {len(want)})\n"
                                 f"  got:      {_show(data)}\n  expected: {_show(want)}\n"
                                 f"  got[{at}:]:      {data[at:at + 24].hex()}\n"
                                 f"  expected[{at}:]: {want[at:at + 24].hex()}")
        return data

    def expect_nothing(self) -> None:
        """No output is left that the test did not expect."""
        if self.pending:
            raise PacketMismatch(f"{len(self.pending)} unexpected output(s): "
                                 + "; ".join(f"port {p}: {_show(d)}" for p, d in self.pending))

    def expect_drop(self, port: int, packet: bytes | Any) -> None:
        """Sending `packet` on `port` produces no output at all."""
        self.expect_nothing()
        self.send(port, packet)
        self.expect_nothing()


def _bytes(packet: Any) -> bytes:
    return bytes(packet)


def _show(packet: Any) -> str:
    """A one-line dissection: scapy's summary of the Ethernet frame, or the hex when it is not one."""
    if callable(packet) and not isinstance(packet, bytes | bytearray) and not hasattr(packet, "build"):
        return f"a packet satisfying {getattr(packet, '__name__', packet)}"
    data = bytes(packet)
    try:
        from scapy.layers.l2 import Ether

        return f"{Ether(data).summary()} ({len(data)} bytes)"
    except Exception:  # not dissectable: show the bytes
        return data.hex()


def available_kinds() -> list[str]:
    """The kinds this machine runs: always inproc; softswitch as root; bmv2 as root with p4c and BMv2."""
    from kvtesting.switch_process import BMV2

    kinds = ["inproc"]
    if os.geteuid() == 0:
        kinds.append("softswitch")
        if BMV2.available():
            kinds.append("bmv2")
    return kinds


@contextlib.contextmanager
def open_switch(kind: str, program: str | os.PathLike[str], *, ports: Sequence[int] = (1, 2, 3, 4),
                cpu_port: int = CPU_PORT, work_dir: str | os.PathLike[str] | None = None) -> Iterator[PacketSwitch]:
    """`program` (a v1model .p4) running on `kind`, with data ports `ports`; stopped on leaving the block.

    The process kinds compile into `work_dir` (a temporary folder if None) and keep the switch's log there
    (`<kind>-*.log`); each gets veth pairs named after this process, removed on exit, so tests in parallel
    processes do not meet.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}; choose one of {', '.join(KINDS)}")
    program = pathlib.Path(program).resolve()
    if kind == "inproc":
        from softswitch.runtime import SoftSwitch

        yield PacketSwitch(SoftSwitch.load(str(program), cpu_port=cpu_port), kind)
        return
    from kvtesting.switch_process import KINDS as PROCESS_KINDS
    from kvtesting.switch_process import ProcessOptions, SwitchProcess, compile_program

    with contextlib.ExitStack() as stack:
        folder = pathlib.Path(work_dir) if work_dir is not None else pathlib.Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="kvtesting-")))
        switch_kind = PROCESS_KINDS[kind]
        if missing := switch_kind.missing_tools():
            raise RuntimeError(f"{kind} needs {', '.join(missing)} on PATH")
        compiled = compile_program(switch_kind, program, folder / f"build-{kind}")
        process = SwitchProcess(switch_kind, compiled, folder, ProcessOptions(
            ports=tuple(ports), cpu_port=cpu_port, veth_tag=f"{os.getpid() % 100000:05d}{kind[0]}"))
        stack.callback(process.close)
        target: Target = process.start()  # type: ignore[assignment]  # RemoteTarget.cpu_port is never None
        yield PacketSwitch(target, kind)
