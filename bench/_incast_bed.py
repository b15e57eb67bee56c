"""The bed of `bench incast` and `bench path_rate`: the softswitch process between a client and a storage node
(`kvtesting.vethnet.VethNet`), optionally N reader hosts each in its own namespace on its own switch port, the
switch functions on or off (through the real controller, or over P4Runtime), agents in namespaces, and the
switch's counters and the hosts' byte counters read back.

Agents (`Bed.agent`) run `python -m bench.incast --agent ...` in a namespace: the bench's own command line.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench._running_controller import ControllerSetup, RunningController
from kvtesting.realtime import DEVICE_PRIORITY

if TYPE_CHECKING:
    from kvtesting.vethnet import Host, VethNet, VethNetOptions

TENANT = 0
CHUNK = 8192
"""Bytes per chunk (protocol v2's largest): fewest packets through a pure-Python switch, needs MTU 9000."""
MTU = 9000
GROUP = 0x4B56
"""The coalescing multicast group (CoalescingOptions' default)."""
COALESCE_TIMEOUT_US = 250_000
"""Pending-entry lifetime, below the readers' retry timeout (READER_TIMEOUT) as the design wants, so a reader's
retry never finds the entry it waits in still open. (An earlier bed installed no port roles: the storage node's
port was a HOST port, its replies were marked F_BYPASS and never replicated, so every entry ran to its end; that
was taken for a timestamp problem of the process target and papered over with 30 s.)"""


def block_data(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def stream_join_available() -> bool:
    """Whether this checkout's data plane has stream join (its P4 file and the controller's installer)."""
    root = Path(__file__).parents[1]
    return (root / "p4src" / "stream.p4").is_file() and (root / "controller" / "streaming.py").is_file()


def _sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def reader_hosts(count: int) -> tuple[Host, ...]:
    """Reader hosts of a `ReaderNet`: reader i is 10.0.0.(11 + i) on switch port 3 + i."""
    from kvtesting.vethnet import Host

    return tuple(Host(f"r{i}", f"10.0.0.{11 + i}", f"02:00:00:00:01:{i + 1:02x}", 3 + i) for i in range(count))


def reader_net(options: VethNetOptions, workdir: Path, readers: tuple[Host, ...]) -> VethNet:
    """`kvtesting.vethnet.VethNet` with `readers` more host namespaces, each on its own switch port, reaching
    the storage node (and the client host) through the switch as the client host does: N inference nodes, each
    its own host, not N processes behind one address."""
    from kvtesting.vethnet import VethNet, _run

    class ReaderNet(VethNet):
        @property
        def hosts(self) -> tuple[Host, ...]:  # type: ignore[override]  # the base bed has exactly two
            return (self.options.client, self.options.storage, *readers)

        def _build_links(self) -> None:
            super()._build_links()  # a reader's static ARP entry names the client host; the storage node's too:
            storage, mac = self.options.storage, self.options.switch_mac
            for host in readers:
                _run("ip", "-n", self.netns(host), "neigh", "add", storage.ip, "lladdr", mac, "dev",
                     self.host_if(host), "nud", "permanent")
                _run("ip", "-n", self.netns(storage), "neigh", "add", host.ip, "lladdr", mac, "dev",
                     self.host_if(storage), "nud", "permanent")

    return ReaderNet(options, workdir)


@dataclass(frozen=True)
class SwitchFunctions:
    """What the switch does for readers of one block, as the controller configures it."""

    coalescing: bool
    streams: bool = False
    """Stream join (docs/dataplane.md, "Stream join"), where the data plane has it."""

    def label(self) -> str:
        if not self.coalescing and not self.streams:
            return "no switch function"
        return "kvswitch (" + " + ".join(n for n, on in (("coalescing", self.coalescing),
                                                         ("stream join", self.streams)) if on) + ")"


class Bed:
    """VethNet plus what incast needs: jumbo MTU, the switch functions on/off, agents in namespaces, and (by
    default) the real controller as the switch's primary, its CPU seconds sampled per row.

    `readers` > 0 adds that many reader hosts, each in its own namespace on its own switch port (`reader_net`).
    With `controller` False the bench programs coalescing itself over P4Runtime (no controller CPU to report).
    With `realtime_devices` the switch and the storage node run at SCHED_FIFO (`kvtesting.realtime`)."""

    def __init__(self, workdir: Path, tag: str = "inc", readers: int = 0, controller: bool = True,
                 realtime_devices: bool = False) -> None:
        from kvtesting.vethnet import VethNet, VethNetOptions

        options = VethNetOptions(tag=tag, storage_args=("--capacity", str(4 << 30)),
                                 realtime_devices=realtime_devices)
        self.workdir = workdir
        self.readers = reader_hosts(readers)
        self.net = reader_net(options, workdir, self.readers) if readers else VethNet(options, workdir)
        self.epoch = 0
        self.use_controller = controller
        self.controller: RunningController | None = None
        self.functions: SwitchFunctions | None = None

    def __enter__(self) -> Bed:
        self.net.__enter__()
        try:
            self.set_mtu(MTU)
            from controller.coalescing import group_layouts

            sh = self.net.switch.sh  # type: ignore[union-attr]
            for group_id, layout in group_layouts(self.options(), [h.port for h in self.net.hosts]).items():
                group = sh.MulticastGroupEntry(group_id)
                for port, rid in layout:
                    group.add(port, rid)
                group.insert()
        except BaseException:
            self.net.__exit__(None, None, None)
            raise
        return self

    def scheduling(self) -> str:
        """How the switch and the node were scheduled, for a result and its table's heading."""
        if self.net.realtime:
            return (f"The switch and the storage node ran at SCHED_FIFO {DEVICE_PRIORITY} (machines of their own: "
                    "no reader process preempts them); readers and controller under the fair scheduler.")
        return "Every process shared the CPUs under the fair scheduler."

    def set_mtu(self, mtu: int) -> None:
        """Every veth of the bed (both ends) at `mtu` bytes."""
        for host in self.net.hosts:
            _sh("ip", "link", "set", self.net.switch_if(host), "mtu", str(mtu))
            _sh("ip", "-n", self.net.netns(host), "link", "set", self.net.host_if(host), "mtu", str(mtu))

    def options(self):
        """The controller's coalescing options for this bed (its groups and `set_coalesce_config`'s params)."""
        from controller.coalescing import CoalescingOptions

        return CoalescingOptions(timeout_us=COALESCE_TIMEOUT_US, epoch=self.epoch or 1, mcast_group=GROUP)

    def __exit__(self, *exc: object) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        self.net.__exit__(*exc)

    def configure(self, functions: SwitchFunctions) -> None:
        """Put the switch functions in place. With the controller: (re)start it configured so (a restart keeps
        the pipeline and only reconciles); it turns the stream join on with coalescing where the data plane has
        it (`controller.service`), so that is the only pairing it can give. Without: write both over P4Runtime."""
        if self.use_controller:
            if functions.streams != (functions.coalescing and stream_join_available()):
                raise ValueError(f"{functions.label()}: the controller runs the stream join exactly when it "
                                 "coalesces (where the data plane has it); run this without the controller")
            if self.functions == functions and self.controller is not None:
                return
            if self.controller is not None:
                self.controller.stop()
            self.controller = self.start_controller(functions)
        else:
            self.coalescing_by_shell(functions.coalescing)
            self.streams_by_shell(functions.streams)
        self.functions = functions

    def start_controller(self, functions: SwitchFunctions) -> RunningController:
        build = self.net.workdir / "build"
        stem = self.net.options.program.stem
        setup = ControllerSetup(self.net.grpc_address, build / f"{stem}.p4info.txtpb", build / f"{stem}.json",
                                tuple(self.net.hosts), (self.net.options.storage.port,),
                                coalesce_timeout_ms=None if functions.coalescing else 0)
        return RunningController(setup, self.workdir / "controller")

    def streams_by_shell(self, on: bool) -> None:
        """Stream join on (a fresh epoch) or off over the bed's own session (no controller), where this data plane
        has it (off: nothing to do without)."""
        if not stream_join_available():
            if on:
                raise RuntimeError("this checkout's data plane has no stream join")
            return
        from controller.streaming import StreamingOptions, set_streaming_sh

        self.epoch += 1
        set_streaming_sh(self.net.switch.sh, on, [h.port for h in self.net.hosts],  # type: ignore[union-attr]
                         [self.net.options.storage.port], StreamingOptions(epoch=self.epoch))

    def coalescing(self, on: bool) -> None:
        """Coalescing on or off; with the controller, the stream join goes with it where the data plane has it."""
        self.configure(SwitchFunctions(coalescing=on, streams=on and self.use_controller and stream_join_available()))

    def coalescing_by_shell(self, on: bool) -> None:
        sh = self.net.switch.sh  # type: ignore[union-attr]
        if on:
            self.epoch += 1
            te = sh.TableEntry("MyIngress.coalesce_config")(action="MyIngress.set_coalesce_config", is_default=True)
            for name, value in self.options().config_params().items():
                te.action[name] = str(value)
        else:
            te = sh.TableEntry("MyIngress.coalesce_config")(action="MyIngress.coalesce_off", is_default=True)
        te.modify()

    def controller_cpu_s(self) -> float | None:
        """CPU seconds of the running controller so far (None: none runs)."""
        return self.controller.cpu_s() if self.controller is not None else None

    def controller_idle_share(self, seconds: float = 5.0) -> float | None:
        """The running controller's CPU share of one core over `seconds` with no reader: its own periodic work
        (ticks, pipeline checks, polls), the floor under every row's share (None: none runs)."""
        before = self.controller_cpu_s()
        began = time.monotonic()
        time.sleep(seconds)
        after = self.controller_cpu_s()
        return None if before is None or after is None else (after - before) / (time.monotonic() - began)

    def events(self) -> dict[str, int]:
        """`MyIngress.coalesce_events` now, by `coalesce_event_t` member (read from the program)."""
        return self.counter_by_enum("MyIngress.coalesce_events", "coalesce_event_t")

    def stream_events(self) -> dict[str, int]:
        """The stream join's event counter by member, where the program has one ({} otherwise)."""
        from kvtesting.vethnet import CONSTANTS

        text = CONSTANTS.read_text()
        if "stream_event_t" not in text:
            return {}
        for counter in STREAM_COUNTERS:
            try:
                return self.counter_by_enum(counter, "stream_event_t")
            except Exception:  # not this name in this program: try the next
                continue
        return {}

    def counter_by_enum(self, counter: str, enum: str) -> dict[str, int]:
        from kvtesting.vethnet import CONSTANTS
        from p4rt.p4info import enum_from_source

        sh = self.net.switch.sh  # type: ignore[union-attr]
        names = enum_from_source(CONSTANTS.read_text(), enum)
        counts: dict[str, int] = {}
        for name, index in names.items():
            ce = sh.CounterEntry(counter)
            ce.index = index
            counts[name] = sum(e.data.packet_count for e in ce.read())
        return counts

    def tx_bytes(self, host: Host) -> int:
        """Bytes `host` has sent on its veth (its namespace's counter, as `bench mooncake_fanout` reads)."""
        done = subprocess.run(["ip", "netns", "exec", self.net.netns(host), "cat",
                               f"/sys/class/net/{self.net.host_if(host)}/statistics/tx_bytes"],
                              capture_output=True, text=True, check=True)
        return int(done.stdout)

    def spawn(self, host: Host, *args: str) -> subprocess.Popen[str]:
        """A long-lived `python -m ARGS` in `host`'s namespace, spoken to in JSON lines."""
        log = (self.workdir / f"agent-{host.role}.log").open("a")
        return subprocess.Popen(["ip", "netns", "exec", self.net.netns(host), sys.executable, "-m", *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                cwd=Path(__file__).parents[1], start_new_session=True)

    def agent(self, where: str, *args: str, timeout: float = 600) -> dict:
        host = self.net.options.client if where == "client" else self.net.options.storage
        done = subprocess.run(["ip", "netns", "exec", self.net.netns(host), sys.executable, "-m", "bench.incast",
                               "--server", self.net.options.storage.ip, *args],
                              capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).parents[1])
        if done.returncode != 0:
            raise RuntimeError(f"agent {args[:2]} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


STREAM_COUNTERS = ("MyEgress.stream_events", "MyIngress.stream_events")
"""Where the stream join may count its events (`stream_event_t` members)."""


def percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values), q)) if values else float("nan")
