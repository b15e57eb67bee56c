"""`python -m softswitch`: the embedded target with simple_switch_grpc's command line.

    python -m softswitch [PROGRAM | --no-p4] -i 1@veth0 -i 2@veth2 --device-id 0 --log-console \\
        --pcap DIR -- --grpc-server-addr 127.0.0.1:9559 --cpu-port 255
    python -m softswitch PROGRAM --packet-in ipc:///tmp/sw.ipc -- --grpc-server-addr 127.0.0.1:9559

PROGRAM is a `.p4` file or the device config `python -m softswitch.compile` writes (PROG.json); with
`--no-p4` the switch waits for a controller's SetForwardingPipelineConfig. With `--packet-in ADDR` every port
is on BMv2's nanomsg packet interface at ADDR (`softswitch.nanomsg`) and `-i` is ignored, as on BMv2. Flags BMv2 has and we do not need
(`--thrift-port`, `--nanolog`, ...) are accepted and noted, so BMv2 scripts run by changing the binary name.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from softswitch.ports import PortError, Ports, PortSet, PortSpec

if TYPE_CHECKING:
    from softswitch.p4runtime.server import P4RuntimeServer

log = logging.getLogger("softswitch")

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL, "off": 100}


class UsageError(Exception):
    """Bad command line: printed after the usage line, exit status 2 (0 for `--help`, already printed)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SwitchOptions:
    program: pathlib.Path | None
    """A .p4 file or a bundle; None with `--no-p4`."""
    ports: tuple[PortSpec, ...] = ()
    packet_in: str | None = None
    """nanomsg address (`ipc://PATH`, `tcp://HOST:PORT`) carrying every port's frames; `ports` then unused."""
    device_id: int = 0
    cpu_port: int | None = None
    """Port number whose output becomes packet-in and where packet-outs enter (simple_switch's --cpu-port)."""
    grpc_address: str = "0.0.0.0:9559"
    pcap_dir: pathlib.Path | None = None
    log_level: int = logging.INFO
    log_console: bool = False
    profile: pathlib.Path | None = None
    """Write the packet thread's cProfile statistics here when the switch stops (`--profile`)."""
    ignored: tuple[str, ...] = field(default=())
    """BMv2 flags accepted without effect (reported once at start)."""


def _switch_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m softswitch",
        usage="python -m softswitch [PROGRAM | --no-p4] [-i PORT@IFACE ...] [options] "
              "[-- --grpc-server-addr HOST:PORT --cpu-port N]",
        description="Embedded pure-Python v1model switch, a drop-in for simple_switch_grpc.")
    ap.add_argument("program", nargs="?", type=pathlib.Path, help="P4 program (.p4) or compiled bundle (.json)")
    ap.add_argument("--no-p4", action="store_true", help="start without a program; wait for a controller")
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                    help="attach interface IFACE as port PORT (repeatable)")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--cpu-port", type=int, help="also accepted after --, as for simple_switch_grpc")
    ap.add_argument("--log-console", action="store_true", help="log to stderr")
    ap.add_argument("-L", "--log-level", default="info", choices=sorted(_LEVELS))
    ap.add_argument("--pcap", nargs="?", const=".", metavar="DIR", help="write IFACE_in/out.pcap files to DIR")
    ap.add_argument("--profile", type=pathlib.Path, metavar="FILE",
                    help="profile the thread that processes every frame (cProfile); statistics written to FILE "
                         "when the switch stops (SIGTERM or SIGINT)")
    ap.add_argument("--packet-in", metavar="ADDR",
                    help="receive and send every port's frames on this nanomsg PAIR socket (ipc://PATH or "
                         "tcp://HOST:PORT), BMv2's packet-in interface; -i is then ignored")
    compat = ap.add_argument_group("accepted for simple_switch_grpc compatibility, no effect here")
    compat.add_argument("--thrift-port", type=int, help="(no Thrift server; use P4Runtime)")
    for flag, kind in (("--log-file", str), ("--notifications-addr", str), ("--nanolog", str),
                       ("--use-files", int), ("--max-port-count", int),
                       ("--restore-state", str), ("--dump-packet-data", int), ("--json", str)):
        compat.add_argument(flag, type=kind, help=argparse.SUPPRESS)
    compat.add_argument("--log-flush", action="store_true", help=argparse.SUPPRESS)
    compat.add_argument("--debugger", action="store_true", help=argparse.SUPPRESS)
    return ap


def _target_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m softswitch ... --", add_help=False)
    ap.add_argument("--grpc-server-addr", default="0.0.0.0:9559")
    ap.add_argument("--cpu-port", type=int)
    ap.add_argument("--drop-port", type=int)
    ap.add_argument("--grpc-server-ssl", action="store_true")
    ap.add_argument("--dp-grpc-server-addr")
    ap.add_argument("--priority-queues", type=int)
    ap.add_argument("--load-modules")
    return ap


def parse_args(argv: list[str]) -> SwitchOptions:
    """Split at `--` like simple_switch_grpc: switch flags first, target flags after."""
    if "--" in argv:
        cut = argv.index("--")
        main_argv, target_argv = argv[:cut], argv[cut + 1:]
    else:
        main_argv, target_argv = argv, []
    sw = _switch_parser()
    try:
        a = sw.parse_args(main_argv)
        t, unknown = _target_parser().parse_known_args(target_argv)
    except SystemExit as e:  # argparse already printed the usage and its message (or the --help text)
        raise UsageError("", status=2 if e.code else 0) from None
    if unknown:
        raise UsageError(f"unknown target option(s) after --: {' '.join(unknown)}")
    if a.no_p4 and a.program is not None:
        raise UsageError("give either a PROGRAM or --no-p4, not both")
    if not a.no_p4 and a.program is None:
        raise UsageError("give a PROGRAM or --no-p4")
    try:
        ports = tuple(PortSpec.parse(s) for s in a.interface)
    except PortError as e:
        raise UsageError(str(e)) from None
    cpu = t.cpu_port if t.cpu_port is not None else a.cpu_port
    if a.packet_in is not None and not a.packet_in.startswith(("ipc://", "tcp://")):
        raise UsageError(f"--packet-in {a.packet_in!r}: expected ipc://PATH or tcp://HOST:PORT")
    ignored = tuple(f"--{name.replace('_', '-')}" for name in
                    ("thrift_port", "log_file", "notifications_addr", "nanolog", "use_files", "restore_state",
                     "debugger") if getattr(a, name))
    ignored += tuple(f"--{name.replace('_', '-')}" for name in
                     ("drop_port", "grpc_server_ssl", "dp_grpc_server_addr", "priority_queues", "load_modules")
                     if getattr(t, name))
    return SwitchOptions(
        program=a.program, ports=ports, packet_in=a.packet_in, device_id=a.device_id, cpu_port=cpu,
        grpc_address=t.grpc_server_addr, pcap_dir=pathlib.Path(a.pcap) if a.pcap else None,
        log_level=_LEVELS[a.log_level], log_console=a.log_console, profile=a.profile, ignored=ignored)


class SwitchError(Exception):
    """The switch cannot start (bad program, bad interface, address in use); printed without a traceback."""


class Switch:
    """Ports + device + P4Runtime server, started and stopped together."""

    def __init__(self, options: SwitchOptions) -> None:
        from softswitch.p4runtime.device import Device

        self.options = options
        self.ports: Ports | None = None
        self.device = Device(options.device_id, options.cpu_port, self._send)
        self.server: P4RuntimeServer | None = None

    def _send(self, port: int, frame: bytes) -> None:
        if self.ports is not None:
            self.ports.send(port, frame)

    def start(self) -> int:
        """Load the program, open ports, start gRPC; returns the gRPC port. Raises SwitchError."""
        from softswitch.p4runtime.device_config import load_bundle
        from softswitch.p4runtime.server import P4RuntimeServer, ServerOptions, ServerStartError

        self.server = server = P4RuntimeServer(self.device, load_bundle, p4info_of=_p4info_of)
        if self.options.program is not None:
            self._load_initial_program()
        self.ports = self._make_ports()
        try:
            self.ports.open()
        except PortError as e:
            raise SwitchError(str(e)) from None
        try:
            port = server.start(ServerOptions(self.options.grpc_address))
        except ServerStartError as e:
            self.ports.close()
            raise SwitchError(str(e)) from None
        self.ports.start()
        return port

    def _make_ports(self) -> Ports:
        if self.options.packet_in is None:
            return PortSet(self.options.ports, self.device.receive, self.options.pcap_dir,
                           on_burst=self.device.receive_burst, profile_to=self.options.profile)
        from softswitch.nanomsg import NanomsgPorts

        if self.options.ports:
            log.warning("--packet-in is given: the -i interfaces are ignored (as on BMv2)")
        return NanomsgPorts(self.options.packet_in, self.device.receive, self.options.pcap_dir)

    def _load_initial_program(self) -> None:
        from softswitch import compile as compiler
        from softswitch.p4runtime.device_config import DeviceConfigError, target_for, unbundle

        path = self.options.program
        assert path is not None
        if not path.is_file():
            raise SwitchError(f"{path}: no such file")
        try:
            if path.suffix == ".p4":
                compiled = compiler.compile_program(path)
                config = compiled.device_config
            else:
                config = path.read_bytes()
                with tempfile.TemporaryDirectory(prefix="softswitch-") as tmp:
                    main = unbundle(config, pathlib.Path(tmp))
                    compiled = compiler.compile_program(main)
            loaded = target_for(compiled.program, self.options.cpu_port)
        except (compiler.CompileError, DeviceConfigError) as e:
            raise SwitchError(str(e)) from None
        assert self.server is not None, "start() creates the server first"
        self.server.commit_loaded(compiled.p4info, config, loaded)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.ports is not None:
            self.ports.close()


def _p4info_of(program):
    from softswitch import compile as compiler

    return compiler.p4info_of(program)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        options = parse_args(argv)
    except UsageError as e:
        if str(e):
            _switch_parser().print_usage(sys.stderr)
            print(f"python -m softswitch: error: {e}", file=sys.stderr)
        return e.status
    logging.basicConfig(level=options.log_level if options.log_console else logging.WARNING,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for flag in options.ignored:
        log.warning("%s is accepted for simple_switch_grpc compatibility and ignored", flag)
    switch = Switch(options)
    try:
        grpc_port = switch.start()
    except SwitchError as e:
        print(f"error: {e}", file=sys.stderr)
        switch.stop()
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    ports = ", ".join(f"{p.number}@{p.interface}" for p in options.ports) or "none"
    if options.packet_in is not None:
        ports = f"all on {options.packet_in}"
    print(f"softswitch: device {options.device_id}, ports {ports}, cpu port {options.cpu_port}, "
          f"P4Runtime on {options.grpc_address.rsplit(':', 1)[0]}:{grpc_port}", file=sys.stderr, flush=True)
    while not stop.wait(0.5):
        pass
    switch.stop()
    return 0
