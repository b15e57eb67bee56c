"""A switch process whose ports are BMv2's nanomsg packet interface (`--packet-in ipc://...`), not veth.

The same `RemoteTarget` (kvtesting/remote_target.py) drives it: `NanomsgHostPorts` gives it the shape of the
veth harness's `HostPorts` (a pollable per port, `send`, `receive_ready`) over one `PacketInjector`, so a
scenario written for veth runs here unchanged. No veth pairs, so no root; both kinds:

* `softswitch`: `python -m softswitch PROG.json --packet-in ADDR -- --grpc-server-addr ...`
* `bmv2`: `simple_switch_grpc --no-p4 --packet-in ADDR -- --grpc-server-addr ...`, pipeline pushed.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
import time
from collections import defaultdict

from kvtesting.p4rt import P4InfoNames, P4RuntimeSession
from kvtesting.remote_target import Quiescence, RemoteTarget
from kvtesting.switch_process import (
    DEVICE_ID,
    REPO,
    Compiled,
    SwitchKind,
    SwitchStartError,
    free_tcp_port,
    terminate,
)
from softswitch.nanomsg import MsgType, PacketInjector
from softswitch.ports import PortError


class NanomsgHostPorts:
    """`HostPorts` over one nanomsg socket: every port's pollable is the socket's, frames sorted by port."""

    def __init__(self, injector: PacketInjector, ports: tuple[int, ...]) -> None:
        self.injector = injector
        self.socks = {p: injector for p in ports}
        self._waiting: dict[int, list[bytes]] = defaultdict(list)
        for p in ports:
            injector.add_port(p)

    def send(self, port: int, frame: bytes) -> None:
        self.injector.send(port, frame)

    def receive_ready(self, port: int) -> list[bytes]:
        for msg in self.injector.receive_ready():
            if msg.type == MsgType.PACKET_OUT:
                self._waiting[msg.port].append(msg.payload[:msg.more])
        return self._waiting.pop(port, [])

    def close(self) -> None:
        self.injector.close()


def switch_command(kind: SwitchKind, compiled: Compiled, packet_in: str, grpc_address: str,
                   cpu_port: int) -> list[str]:
    if kind.name == "bmv2":
        return ["simple_switch_grpc", "--no-p4", "--packet-in", packet_in, "--device-id", str(DEVICE_ID),
                "--", "--grpc-server-addr", grpc_address, "--cpu-port", str(cpu_port)]
    return [sys.executable, "-m", "softswitch", str(compiled.device_config), "--packet-in", packet_in,
            "--device-id", str(DEVICE_ID), "--cpu-port", str(cpu_port), "--", "--grpc-server-addr", grpc_address]


class NanomsgSwitchProcess:
    """One running switch on a nanomsg socket in `work_dir`; `start()` returns the `RemoteTarget`."""

    def __init__(self, kind: SwitchKind, compiled: Compiled, work_dir: pathlib.Path, *,
                 ports: tuple[int, ...] = (1, 2, 3, 4), cpu_port: int = 255,
                 quiescence: Quiescence | None = None, start_timeout_s: float = 120.0) -> None:
        self.kind = kind
        self.compiled = compiled
        self.work_dir = work_dir
        self.ports = ports
        self.cpu_port = cpu_port
        self.quiescence = quiescence or Quiescence()
        self.start_timeout_s = start_timeout_s
        self.address = f"ipc://{work_dir}/{kind.name}-packets.ipc"
        self.log_path = work_dir / f"{kind.name}-nanomsg.log"
        self.proc: subprocess.Popen | None = None
        self.session: P4RuntimeSession | None = None
        self.host_ports: NanomsgHostPorts | None = None

    def start(self) -> RemoteTarget:
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> RemoteTarget:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        grpc_address = f"127.0.0.1:{free_tcp_port()}"
        cmd = switch_command(self.kind, self.compiled, self.address, grpc_address, self.cpu_port)
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while self.session is None:
            if self.proc.poll() is not None:
                raise SwitchStartError(f"{self.kind.name} exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                self.session = P4RuntimeSession(grpc_address, DEVICE_ID, timeout=1.0)
            except Exception as e:  # not listening yet
                if time.monotonic() > deadline:
                    raise SwitchStartError(f"{self.kind.name} did not answer P4Runtime on {grpc_address}: "
                                           f"{e!r}: {self.log_tail()}") from None
        try:  # the switch binds its packet socket before it serves P4Runtime
            injector = PacketInjector(self.address)
        except PortError as e:
            raise SwitchStartError(f"{e}: {self.log_tail()}") from None
        self.host_ports = NanomsgHostPorts(injector, self.ports)
        names = P4InfoNames.from_text(self.compiled.p4info.read_text())
        if self.kind.push_pipeline:
            self.session.set_pipeline(names.info, self.compiled.device_config.read_bytes())
        target = RemoteTarget(self.session, names, self.host_ports, self.cpu_port,  # type: ignore[arg-type]
                              self.quiescence)
        target.configure_digests()
        target.record_initial_defaults()
        return target

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.close()
            self.session = None
        if self.host_ports is not None:
            self.host_ports.close()
            self.host_ports = None
        if self.proc is not None:
            terminate(self.proc)
            self.proc = None
