"""One kvswitch on veth pairs between network namespaces, without Mininet: the bed the integration test and
the data-plane benchmark share (`tests/integration/`, `bench/dataplane.py`).

::

    netns itg<T><M>-cli          root namespace                               netns itg<T><M>-sto
    kvtesting.kvagent (KVPClient)   python -m softswitch (kvswitch.p4)          python -m kvpool.server
    10.0.0.1 itg<T><M>cli-h ─veth─ itg<T><M>cli-sw = port 1 │ port 2 = itg<T><M>sto-sw ─veth─ itg<T><M>sto-h 10.0.0.2
                                                      │
                                 P4Runtime 127.0.0.1:PORT, CPU port 255, driven from this process by
                                 p4runtime-shell (routes, kv_index entries, counters)

Hosts reach each other only through the switch: each host has a static ARP entry for the other's address
pointing at the switch's MAC (the program drops ARP), and the switch's `ipv4_lpm` entries, written over
P4Runtime with the unmodified p4runtime-shell, rewrite the destination MAC to the real host's. TX checksum
offload is off on the host ends: a raw-socket switch forwards the bytes it reads, and a veth's partial UDP
checksum would otherwise reach the other host unfinished and be dropped.

Every name starts with `itg` plus a short tag (`VethNetOptions.tag`), so a test and a benchmark can run side
by side, then three characters of the process id (`process_mark`), so two runs of the same test on one machine
(two checkouts) never share a name: each removes only its own leftovers before starting, never the other's
live namespaces. `VethNet` is a context
manager: leaving it (also on error) stops the processes it started, by their ids, and deletes its namespaces
and veths.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kvtesting.realtime import make_realtime

ROOT = Path(__file__).resolve().parents[1]
"""The repository: working directory of every process, so `python -m <package>` finds our packages."""
PROGRAM = ROOT / "p4src" / "kvswitch.p4"
CONSTANTS = ROOT / "p4src" / "include" / "constants.p4"


class VethNetError(Exception):
    """The bed could not be set up; the message carries the failing command or the tail of a process's log."""


@dataclass(frozen=True)
class Host:
    """One end host of the bed."""

    role: str
    """`cli` or `sto`: part of the namespace and interface names."""
    ip: str
    mac: str
    port: int
    """The switch port its veth is attached to."""


@dataclass(frozen=True)
class VethNetOptions:
    """What to build; the defaults are the test's."""

    tag: str = "t"
    """Goes after `itg` in every name; at most 3 characters so interface names (with the process mark) fit
    in 15."""
    program: Path = PROGRAM
    """The P4 program the switch runs (compiled once with `python -m softswitch.compile`)."""
    device_id: int = 0
    cpu_port: int = 255
    """Same as `CPU_PORT` in p4src/include/constants.p4."""
    switch_mac: str = "02:00:00:00:00:fe"
    """The next-hop MAC the hosts' static ARP entries name; the switch routes on IPv4 and never checks it."""
    client: Host = Host("cli", "10.0.0.1", "02:00:00:00:00:01", 1)
    storage: Host = Host("sto", "10.0.0.2", "02:00:00:00:00:02", 2)
    client_timeout: float = 2.0
    """Seconds the client waits per try before resending (the pure-Python switch is slow under load)."""
    start_timeout: float = 120.0
    """Seconds each process may take to come up (compiling and importing are slow on a busy machine)."""
    storage_args: tuple[str, ...] = field(default=())
    """Extra `python -m kvpool.server` arguments."""
    realtime_devices: bool = False
    """The switch and the storage node at SCHED_FIFO once they are up (`kvtesting.realtime`): benchmarks' reader
    processes then never preempt them. `VethNet.realtime` tells whether the kernel agreed."""

    def __post_init__(self) -> None:
        if not (1 <= len(self.tag) <= 3 and self.tag.isalnum() and self.tag.islower()):
            raise ValueError(f"tag {self.tag!r}: 1 to 3 lower-case letters or digits")


DEVICES = ("switch", "storage node")
"""The bed's processes that stand for machines of their own (`VethNetOptions.realtime_devices`)."""


def process_mark(pid: int | None = None) -> str:
    """Three base-36 characters of a process id (mod 36**3): part of every name a bed of this process makes."""
    n = (os.getpid() if pid is None else pid) % 36**3
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "".join(digits[(n // 36**i) % 36] for i in (2, 1, 0))


def _run(*args: str) -> None:
    """Run one set-up command; its stderr becomes the error."""
    try:
        done = subprocess.run(args, capture_output=True, text=True)
    except FileNotFoundError:
        raise VethNetError(f"{args[0]}: not found (the bed needs iproute2 and ethtool)") from None
    if done.returncode != 0:
        raise VethNetError(f"{' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")


def _free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process in its own session, output in a log file; stopped by its id only."""

    def __init__(self, name: str, args: Sequence[str], log: Path, stdin: int | None = None,
                 stdout: int | None = None) -> None:
        self.name = name
        self.log = log
        self._log_file = log.open("w")
        self.popen = subprocess.Popen(list(args), cwd=ROOT, stdin=stdin,
                                      stdout=self._log_file if stdout is None else stdout,
                                      stderr=self._log_file, text=True, start_new_session=True)

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        """Block until the log has a line starting with `prefix`; VethNetError if the process ends first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    return line
            if self.popen.poll() is not None:
                raise VethNetError(f"{self.name} exited with {self.popen.returncode}:\n{self.tail()}")
            time.sleep(0.1)
        raise VethNetError(f"{self.name} not ready after {timeout:.0f} s:\n{self.tail()}")

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL to its own process group if it does not end within `grace` seconds."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=grace)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log_file.close()


class ClientAgent:
    """`kvtesting.kvagent` in the client namespace: send one JSON request, read one JSON answer."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.popen.stdin is not None and process.popen.stdout is not None
        self._in: IO[str] = process.popen.stdin
        self._out: IO[str] = process.popen.stdout

    def _answer(self) -> dict:
        line = self._out.readline()
        if not line:
            raise VethNetError(f"client agent exited:\n{self.process.tail()}")
        return json.loads(line)

    def wait_ready(self) -> None:
        if not self._answer().get("ready"):
            raise VethNetError(f"client agent did not start:\n{self.process.tail()}")

    def request(self, op: str, **fields: object) -> dict:
        """One request; VethNetError with the agent's message when it answers `ok: false`."""
        self._in.write(json.dumps({"op": op, **fields}) + "\n")
        self._in.flush()
        answer = self._answer()
        if not answer.pop("ok"):
            raise VethNetError(f"{op} failed in the client namespace: {answer['error']}")
        return answer


class ShellSwitch:
    """The switch as the unmodified p4runtime-shell sees it, with the few writes the bed needs.

    p4runtime-shell keeps its connection in module globals, so only one ShellSwitch may be open per process.
    """

    def __init__(self, address: str, device_id: int, election_id: tuple[int, int] = (0, 1)) -> None:
        import p4runtime_sh.shell as sh

        from p4rt.p4info import enum_from_source

        self.sh = sh
        self.address = address
        sh.setup(device_id=device_id, grpc_addr=address, election_id=election_id, verbose=False)
        self.events = enum_from_source(CONSTANTS.read_text(), "kvp_event_t")
        """`kvp_event_t` member → index of `MyIngress.kvp_events`, read from the program, not repeated here."""
        self.port_roles = enum_from_source(CONSTANTS.read_text(), "port_role_t")
        """`port_role_t` member → value of `set_port_role`'s `role`."""
        self.last_generation = 0
        """The generation of the newest admission (the controller's persisted counter plays this part)."""

    def close(self) -> None:
        self.sh.teardown()

    def route(self, host: Host) -> None:
        te = self.sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
        te.match["hdr.ipv4.dst_addr"] = f"{host.ip}/32"
        te.action["dst_mac"] = host.mac
        te.action["port"] = str(host.port)
        te.insert()

    def _index_entry(self, tenant: int, prefix_hash: int, chunk_idx: int):
        te = self.sh.TableEntry("MyIngress.kv_index")(action="MyIngress.set_slot")
        te.match["hdr.kvp.tenant"] = str(tenant)
        te.match["hdr.kvp.prefix_hash"] = str(prefix_hash)
        te.match["hdr.kvp.chunk_idx"] = str(chunk_idx)
        return te

    def port_role(self, port: int, role: str) -> None:
        """Say who is behind `port` (`port_role_t` member: HOST, STORAGE or FABRIC); only STORAGE and FABRIC
        ports may fill the pool."""
        te = self.sh.TableEntry("MyIngress.port_role")(action="MyIngress.set_port_role")
        te.match["ingress_port"] = str(port)
        te.action["role"] = str(self.port_roles[role])
        te.insert()

    def index(self, tenant: int, prefix_hash: int, chunk_idx: int, slot: int, min_version: int = 0) -> None:
        """Admit a chunk to the pool, as the controller does: a fresh admission generation, and its GETs and
        fills now use `slot`."""
        self.last_generation += 1
        te = self._index_entry(tenant, prefix_hash, chunk_idx)
        te.action["slot"] = str(slot)
        te.action["min_version"] = str(min_version)
        te.action["generation"] = str(self.last_generation)
        te.insert()

    def unindex(self, tenant: int, prefix_hash: int, chunk_idx: int) -> None:
        """Evict a chunk: delete its index entry."""
        self._index_entry(tenant, prefix_hash, chunk_idx).delete()

    def index_size(self) -> int:
        return sum(1 for _ in self.sh.TableEntry("MyIngress.kv_index").read())

    def event(self, name: str) -> int:
        """Packets counted in `MyIngress.kvp_events` for the `kvp_event_t` member `name`."""
        ce = self.sh.CounterEntry("MyIngress.kvp_events")
        ce.index = self.events[name]
        return sum(e.data.packet_count for e in ce.read())


class VethNet:
    """The bed: namespaces and veths, switch process, P4Runtime session with routes, storage node, client agent."""

    def __init__(self, options: VethNetOptions | None = None, workdir: Path | None = None) -> None:
        self.options = options or VethNetOptions()
        self.prefix = f"itg{self.options.tag}{process_mark()}"
        """What every namespace and interface name of this bed starts with."""
        self.workdir = Path(tempfile.mkdtemp(prefix=f"itg{self.options.tag}-")) if workdir is None else workdir
        self.processes: list[Process] = []
        self.switch: ShellSwitch | None = None
        self.agent: ClientAgent | None = None
        self.grpc_address = ""
        self.realtime = False
        """Whether the switch and the storage node run at SCHED_FIFO (asked for, and the kernel agreed)."""

    # ---- names -----------------------------------------------------------------------------------------

    def netns(self, host: Host) -> str:
        return f"{self.prefix}-{host.role}"

    def host_if(self, host: Host) -> str:
        return f"{self.prefix}{host.role}-h"

    def switch_if(self, host: Host) -> str:
        return f"{self.prefix}{host.role}-sw"

    @property
    def hosts(self) -> tuple[Host, Host]:
        return self.options.client, self.options.storage

    # ---- life cycle --------------------------------------------------------------------------------------

    def __enter__(self) -> VethNet:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._remove_links()
        self._build_links()
        self._start_switch()
        self.switch = ShellSwitch(self.grpc_address, self.options.device_id)
        for host in self.hosts:
            self.switch.route(host)
        self.switch.port_role(self.options.storage.port, "STORAGE")
        self._start_storage()
        if self.options.realtime_devices:
            self.realtime = all([make_realtime(process.popen.pid) for process in self.processes
                                 if process.name in DEVICES])
        self._start_agent()

    def close(self) -> None:
        """Undo everything that was done, in reverse; safe to call twice and after a partial start."""
        if self.switch is not None:
            with contextlib.suppress(Exception):
                self.switch.close()
            self.switch = None
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        self.agent = None
        self._remove_links()

    # ---- links ---------------------------------------------------------------------------------------------

    def _remove_links(self) -> None:
        """Delete our namespaces (which deletes the veths inside) and any root-side end left behind."""
        existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        for host in self.hosts:
            if self.netns(host) in existing:
                subprocess.run(["ip", "netns", "delete", self.netns(host)], capture_output=True)
            if Path(f"/sys/class/net/{self.switch_if(host)}").exists():
                subprocess.run(["ip", "link", "delete", self.switch_if(host)], capture_output=True)

    def _build_links(self) -> None:
        for host in self.hosts:
            ns, h_if, sw_if = self.netns(host), self.host_if(host), self.switch_if(host)
            peer = self.options.storage if host is self.options.client else self.options.client
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", sw_if, "type", "veth", "peer", "name", h_if, "netns", ns)
            _run("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            _run("sysctl", "-qw", f"net.ipv6.conf.{sw_if}.disable_ipv6=1")
            _run("ip", "-n", ns, "link", "set", h_if, "address", host.mac)
            _run("ip", "-n", ns, "addr", "add", f"{host.ip}/24", "dev", h_if)
            _run("ip", "-n", ns, "link", "set", h_if, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "neigh", "add", peer.ip, "lladdr", self.options.switch_mac, "dev", h_if,
                 "nud", "permanent")
            _run("ip", "netns", "exec", ns, "ethtool", "-K", h_if, "tx", "off")
            _run("ip", "link", "set", sw_if, "up")

    # ---- processes ----------------------------------------------------------------------------------------

    def _python_in(self, host: Host, module: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.netns(host), sys.executable, "-m", module, *args]

    def _compile(self) -> Path:
        out = self.workdir / "build"
        stem = self.options.program.stem
        done = subprocess.run([sys.executable, "-m", "softswitch.compile", str(self.options.program), "-o",
                               str(out), "--p4runtime-files", str(out / f"{stem}.p4info.txtpb")],
                              cwd=ROOT, capture_output=True, text=True, timeout=self.options.start_timeout)
        if done.returncode != 0:
            raise VethNetError(f"compiling {self.options.program}: {done.stderr.strip()}")
        return out / f"{stem}.json"

    def _start_switch(self) -> None:
        device_config = self._compile()
        self.grpc_address = f"127.0.0.1:{_free_tcp_port()}"
        args = [sys.executable, "-m", "softswitch", str(device_config), "--device-id", str(self.options.device_id)]
        for host in self.hosts:
            args += ["-i", f"{host.port}@{self.switch_if(host)}"]
        args += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.options.cpu_port)]
        process = Process("switch", args, self.workdir / "switch.log")
        self.processes.append(process)
        process.wait_for_line("softswitch: device", self.options.start_timeout)

    def _start_storage(self) -> None:
        storage = self.options.storage
        process = Process("storage node", self._python_in(storage, "kvpool.server", "--host", storage.ip,
                                                          *self.options.storage_args),
                          self.workdir / "storage.log")
        self.processes.append(process)
        process.wait_for_line("kvpool.server: serving", self.options.start_timeout)

    def _start_agent(self) -> None:
        process = Process("client agent",
                          self._python_in(self.options.client, "kvtesting.kvagent", "--server", self.options.storage.ip,
                                          "--timeout", str(self.options.client_timeout)),
                          self.workdir / "client.log", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.processes.append(process)
        self.agent = ClientAgent(process)
        self.agent.wait_ready()
        self.agent.request("ping", wait=self.options.start_timeout)

    # ---- use ------------------------------------------------------------------------------------------------

    def request(self, op: str, **fields: object) -> dict:
        """A request to the client agent (see `kvtesting.kvagent` for the ops)."""
        if self.agent is None:
            raise VethNetError("the bed is not started")
        return self.agent.request(op, **fields)

    def logs(self) -> str:
        """The tail of every process's log, for a failure message."""
        return "\n".join(f"--- {p.name} ({p.log})\n{p.tail()}" for p in self.processes)
