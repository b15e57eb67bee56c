"""The running testbed: Mininet network, P4 switches, storage node and controllers, started and stopped together.

Start order, each step waited for (with a clear error and the process's log tail when it fails):

1. compile p4src/ for the target (`topo.build`), unless up to date;
2. Mininet builds the topology (`topo.topologies`) and starts one switch process per switch;
3. hosts are configured: static ARP for every endpoint, no IPv6, checksum offload off (the switch moves
   frames through packet sockets, so checksums must be complete on the wire);
4. the storage nodes (`python -m kvpool.server`) start on st1..stM; each is checked from the root namespace over
   its management link (mgmt-eth(i-1) ↔ stI-eth1, see `topo.topologies`), which is also the controller's path to
   it (TIER_MOVE, STAT, the pool's health probes). With `store="mooncake"` a Mooncake master
   (`python -m kvpool.mooncake_master`) starts first in the root namespace and the nodes run `--backend mooncake`
   against it (over their management links; blocks move between nodes' segments through the data plane);
   with M > 1 storage nodes the controllers steer the pool address `POOL_IP` over them (controller/steering.py);
5. one controller per switch (`python -m controller serve ...`), with `<state>/<switch>/hosts.json`
   (`topo.plan`), its SQLite state and log in the same folder; the testbed waits for its API port;
6. a ping from h1 to st1 through the data plane proves the routes are in.

`<state>/testbed.json` records every process this testbed started, the shells of its Mininet nodes (whose
network namespaces die with them) and its root-namespace interfaces, so `python -m topo stop` can end exactly
those (pids checked against their command lines, interfaces by name) after a crash, and nothing else: other
Mininet networks on the machine are left alone. Tests of crashes use `kill("controller s1")` and
`restart("controller s1")` (likewise "switch s1", "storage st1"): the same command line again, the log appended to.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mininet.log import setLogLevel
from mininet.net import Mininet

from kvpool.client import ClientOptions, KVPClient, KVPError
from kvpool.constants import KVP_UDP_PORT
from topo.build import Artifacts, compile_program
from topo.plan import Plan, plan_of
from topo.switches import REPO, SWITCHES, Bmv2P4Switch, BridgeSwitch, P4Switch, TestbedError
from topo.topologies import (
    MGMT,
    POOL_IP,
    POOL_MAC,
    STORAGE,
    STORAGE_IP,
    KvTopo,
    TopologyError,
    load_topology,
    mgmt_ips,
)

STATE_FILE = "testbed.json"
LINK_MTU = 9000
"""MTU of every testbed link: protocol v2 carries up to 8 KiB of value per packet (docs/protocol.md), which with
the 44-byte KVP header, UDP and IPv4 needs 8,264 bytes; 1 KiB chunks, the client's default, fit 1,500 too."""
STORES = ("memory", "mooncake")
"""The storage nodes' backends (`kvpool.server --backend`)."""
POOL_REPLICAS = 2
MOONCAKE_CLIENT_TTL = 3
"""Seconds the Mooncake master waits for a node's heartbeat (one a second) before it unmounts the node's segment
(Mooncake's default: 10). Until then the reads of a dead node's replicas fail, and so do the reads and writes of
the blocks whose records have one there (MISS / ERR_FULL): this is the pool's window of unavailability after a
node's death, beside the controllers' two missed probes."""
"""`--mooncake-replicas` of a mooncake pool's nodes (several storage nodes): a node's death loses nothing."""


@dataclass(frozen=True)
class TestbedOptions:
    """What to start."""

    __test__ = False  # not a pytest test class, despite the name

    target: str = "soft"
    """soft (embedded target), bmv2 (simple_switch_grpc) or bridge (Linux bridge: no pool, no controller)."""
    hosts: int | None = None
    """Inference hosts h1..hN of a shipped topology (None: as many as its file lists, 4)."""
    storage_nodes: int | None = None
    """Storage nodes st1..stM of a shipped topology (None: its file's, 1). More than one: one pool behind POOL_IP,
    steered by the switches."""
    store: str = "memory"
    """The storage nodes' backend: memory (each node its own DRAM + disk) or mooncake (one shared Mooncake Store,
    its master started by the testbed; a down node's blocks are served by another node)."""
    topology: str = "star"
    """`star`, `leaf-spine` (shipped in topo/layouts/) or the path of a topology.json (`topo.topologies`)."""
    build_dir: Path = REPO / "build"
    """Where compiled programs go (`<build>/<target>/kvswitch.json`)."""
    state_dir: Path = REPO / "out" / "testbed"
    """Logs, hosts.json, controller state, storage disk tier, testbed.json."""
    grpc_base: int = 9559
    """P4Runtime port of device 1 (BMv2's default); device i listens on grpc_base + i - 1."""
    api_base: int = 9090
    """Controller API port of device 1; device i on api_base + i - 1."""
    storage_capacity: int = 64 << 20
    """Storage node DRAM in bytes."""
    controller: bool = True
    """Start the controllers (without them a P4 switch has no routes: only for debugging)."""
    ready_timeout: float = 90.0
    """Seconds each start step may take (the pure-Python target compiles the program at start)."""
    verbose: bool = False
    """Mininet's info log."""
    pcap: bool = True
    """Each P4 switch writes a pcap per port and direction into `<state>/<switch>/pcap/`."""
    switch_log_level: str = "info"
    """The switches' -L: trace and debug log every packet's way through the pipeline (BMv2), info and up
    only events."""
    metrics_base: int | None = 9464
    """Prometheus endpoint of device 1's controller, http://127.0.0.1:<port>/metrics; device i on
    metrics_base + i - 1; None: no endpoint."""
    admission: str | None = None
    """The controllers' --admission policy (None: the controller's default)."""
    eviction: str | None = None
    """The controllers' --eviction policy."""
    recycling: str | None = None
    """The controllers' --recycling policy."""
    params: tuple[str, ...] = ()
    """The controllers' --param KIND.NAME=VALUE, each passed as given."""
    resume: bool = False
    """Keep the controllers' SQLite state, the storage node's disk tier, logs and pcaps of the last run in
    state_dir. Off: start clean (the earlier run's files of these nodes are removed first)."""


@dataclass
class Started:
    """A process the testbed started (recorded in testbed.json)."""

    what: str
    pid: int
    argv: list[str]
    log: str
    process: subprocess.Popen | None = field(default=None, repr=False)


class Testbed:
    """Start with `start()` (or `with Testbed(options) as bed:`), stop with `stop()`; `net` is the Mininet."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, options: TestbedOptions) -> None:
        if options.target not in SWITCHES:
            raise TestbedError(f"unknown target {options.target!r}; choose one of {', '.join(SWITCHES)}")
        if options.store not in STORES:
            raise TestbedError(f"unknown store {options.store!r}; choose one of {', '.join(STORES)}")
        try:
            self.spec = load_topology(options.topology, options.hosts, options.storage_nodes)
        except TopologyError as exc:
            raise TestbedError(str(exc)) from None
        if options.target == "bridge" and len(self.spec.switches) > 1:
            raise TestbedError("the bridge target has no routing: several bridges (a leaf-spine) make an L2 loop; "
                               "use star")
        self.options = options
        self.topo = KvTopo(self.spec)
        self.plan: Plan = plan_of(self.topo)
        self.net: Mininet | None = None
        self.artifacts: Artifacts | None = None
        self.started: list[Started] = []
        self.mooncake_ports: tuple[int, int] = (0, 0)
        """(RPC, HTTP metadata) ports of the Mooncake master, once started (store="mooncake")."""

    # ---- addresses --------------------------------------------------------------------------------------

    def grpc_address(self, device_id: int) -> str:
        return f"127.0.0.1:{self.options.grpc_base + device_id - 1}"

    def api_address(self, device_id: int) -> str:
        return f"127.0.0.1:{self.options.api_base + device_id - 1}"

    def metrics_url(self, device_id: int) -> str | None:
        if self.options.metrics_base is None:
            return None
        return f"http://127.0.0.1:{self.options.metrics_base + device_id - 1}/metrics"

    def switch_dir(self, switch: str) -> Path:
        return self.options.state_dir / switch

    @property
    def pooled(self) -> bool:
        """Several storage nodes behind one pool address."""
        return len(self.spec.storage) > 1

    @property
    def storage_address(self) -> tuple[str, int]:
        """Where clients send: the pool address with several storage nodes, else st1."""
        return (POOL_IP if self.pooled else STORAGE_IP, KVP_UDP_PORT)

    def storage_node_ip(self, name: str) -> str:
        return self.plan.endpoint(name).ip

    # ---- start / stop ---------------------------------------------------------------------------------

    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, progress=print) -> None:
        """Bring everything up; on any failure, tear down what was started and raise TestbedError."""
        if os.geteuid() != 0:
            raise TestbedError("the Mininet testbed needs root (network namespaces, veth pairs)")
        if self.options.target == "bmv2":
            Bmv2P4Switch.setup()
        self._refuse_if_running()
        self.options.state_dir.mkdir(parents=True, exist_ok=True)
        if self.options.resume:
            progress(f"resuming: controller state, storage disk tier and logs of the last run in "
                     f"{self.options.state_dir} are kept (drop RESUME=1 / --resume to start clean)")
        elif removed := self._remove_last_run():
            progress(f"fresh state: removed the last run's {', '.join(removed)} in {self.options.state_dir} "
                     "(RESUME=1 / --resume keeps them)")
        setLogLevel("info" if self.options.verbose else "warning")
        try:
            progress(f"compiling p4src/ for {self.options.target}")
            self.artifacts = compile_program(self.options.target, self.options.build_dir)
            progress(f"building the {self.options.topology} topology with {len(self.spec.hosts)} hosts")
            self.net = Mininet(topo=self.topo, switch=self._make_switch, controller=None, build=False,
                               autoSetMacs=False, autoStaticArp=False, waitConnected=False)
            self.net.build()
            self.net.start()
            self._record_switches()
            self._configure_hosts()
            self._wait_switches()
            if self.options.store == "mooncake":
                progress("starting the Mooncake master (root namespace)")
                self._start_mooncake_master()
            names = ", ".join(e.name for e in self.plan.storage_nodes)
            progress(f"starting the storage node{'s' if self.pooled else ''} on {names} ({self.options.store})")
            self._start_storage()
            if self.options.controller and self.options.target != "bridge":
                progress("starting the controller" + ("s" if len(self.plan.switches) > 1 else ""))
                self._start_controllers()
                for sw in self.plan.switches:
                    if (url := self.metrics_url(sw.device_id)) is not None:
                        progress(f"Prometheus metrics of {sw.name}'s controller: {url}")
            if self.options.controller or self.options.target == "bridge":
                progress("checking the data path (h1 → st1)")
                self._wait_data_path()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop controllers and the storage node (by pid), then the Mininet network; safe to call twice."""
        for started in reversed(self.started):
            if started.what.startswith("switch "):
                continue  # the switch objects stop themselves in net.stop()
            _terminate(started.pid, started.process)
        if self.net is not None:
            nodes = [*self.net.hosts, *self.net.switches]
            if all(n.shell is not None and n.shell.poll() is None for n in nodes):
                with contextlib.suppress(Exception):
                    self.net.stop()
            else:  # some node's shell is gone (`topo stop` ran): Mininet's stop would wait on it forever
                for n in nodes:
                    if n.shell is not None and n.shell.poll() is None:
                        _terminate(n.shell.pid, n.shell, timeout=2.0)
            self.net = None
        _delete_interfaces(self._root_interfaces())  # what a half-built network may leave behind
        self.started = []
        (self.options.state_dir / STATE_FILE).unlink(missing_ok=True)

    # ---- crashes and restarts (for tests of the pool's life cycle) ---------------------------------------

    def launch(self, what: str, argv: list[str], log: Path, host: str) -> Started:
        """Start `argv` in Mininet node `host`, recorded as `what` in testbed.json (so `make stop` ends it too)."""
        assert self.net is not None
        self._popen(what, argv, log, self.net[host])
        return self.started[-1]

    def process(self, what: str) -> Started:
        """The process recorded as `what`: "switch s1", "controller s1", "storage st1", "mooncake master"."""
        for started in self.started:
            if started.what == what:
                return started
        raise TestbedError(f"this testbed started no {what!r}; it has: {', '.join(s.what for s in self.started)}")

    def kill(self, what: str, sig: int = signal.SIGKILL, timeout: float = 10.0) -> int:
        """Send `sig` to one process the testbed started (SIGKILL: a crash, nothing cleaned up) and wait for its
        end; returns its exit status (negative: the signal)."""
        started = self.process(what)
        assert started.process is not None, "only processes of this Testbed object can be killed and restarted"
        with contextlib.suppress(ProcessLookupError):
            os.kill(started.pid, sig)
        return started.process.wait(timeout=timeout)

    def restart(self, what: str) -> Started:
        """Start an ended process again with its recorded command line (its log appended to) and wait until it is
        ready as at start: a switch's P4Runtime port, a controller's API (it reconciles before opening it), the
        storage node's STAT. Raises TestbedError if it is still running or does not come up."""
        self.process(what)  # raises with the list of what exists
        index = next(i for i, s in enumerate(self.started) if s.what == what)
        old = self.started[index]
        if old.process is not None and old.process.poll() is None:
            raise TestbedError(f"{what} is still running (pid {old.pid}); kill it first")
        assert self.net is not None, "the testbed is not running"
        kind, _, name = what.partition(" ")
        log = Path(old.log)
        if kind == "switch":
            switch = self.net[name]
            process = switch.relaunch()
            new = Started(what, process.pid, switch.command(), old.log, process)
            ready = lambda: _tcp_open("127.0.0.1", switch.grpc_port)  # noqa: E731
        elif kind in ("controller", "storage"):
            process = self._spawn(old.argv, log, None if kind == "controller" else self.net[name], "ab")
            new = Started(what, process.pid, old.argv, old.log, process)
            if kind == "controller":
                device_id = next(sw.device_id for sw in self.plan.switches if sw.name == name)
                host, port = self.api_address(device_id).rsplit(":", 1)
                ready = lambda: _tcp_open(host, int(port))  # noqa: E731
            else:
                ip = self.storage_node_ip(name)
                ready = lambda: self._storage_answers(ip)  # noqa: E731
        else:
            raise TestbedError(f"cannot restart {what!r}")
        self.started[index] = new
        self._save_state()
        self._wait(ready, f"{what} (restarted)", process, log)
        return new

    # ---- steps ----------------------------------------------------------------------------------------

    def _refuse_if_running(self) -> None:
        state = self.options.state_dir / STATE_FILE
        if state.exists():
            alive = [p for p in json.loads(state.read_text()).get("processes", []) if _alive(p["pid"], p["argv"])]
            if alive:
                raise TestbedError(f"a testbed is already running ({len(alive)} processes in {state}); "
                                   "run `make stop` (python -m topo stop) first")
            state.unlink()
        leftovers = [name for name in self._root_interfaces() if Path(f"/sys/class/net/{name}").exists()]
        if leftovers:
            raise TestbedError(f"interfaces {', '.join(leftovers[:4])} exist from an earlier run or another "
                               "testbed with the same names; run `make stop` (python -m topo stop) first")

    def _remove_last_run(self) -> list[str]:
        """Fresh state: remove what an earlier run left in this testbed's node folders (controller SQLite, storage
        disk tier, logs, pcaps, hosts.json). Only `<state>/<node>/` of this topology's nodes: nothing else in
        state_dir, which may be a folder the user named."""
        removed = []
        for name in (*(s.name for s in self.spec.switches), *(s.name for s in self.spec.storage), "mooncake"):
            folder = self.options.state_dir / name
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder)
                removed.append(f"{name}/")
        return removed

    def _root_interfaces(self) -> list[str]:
        """Names of this testbed's interfaces in the root namespace: switch ports and the management end."""
        return [name for sw in self.plan.switches for _, name in sw.ports] + \
            [f"{MGMT}-eth{i}" for i in range(len(self.spec.storage))]

    def _make_switch(self, name: str, **params):
        cls = SWITCHES[self.options.target]
        if cls is BridgeSwitch:
            return BridgeSwitch(name, **params)
        assert self.artifacts is not None
        device_id = params.pop("device_id")
        return cls(name, device_id=device_id, grpc_port=self.options.grpc_base + device_id - 1,
                   device_config=self.artifacts.device_config, log_dir=self.options.state_dir,
                   pcap=self.options.pcap, log_level=self.options.switch_log_level, **params)

    def _save_state(self) -> None:
        bridges = [s.name for s in self.net.switches if isinstance(s, BridgeSwitch)] if self.net else []
        nodes = [{"name": n.name, "pid": n.pid} for n in (*self.net.hosts, *self.net.switches)
                 if getattr(n, "pid", None)] if self.net else []
        data = {"target": self.options.target, "bridges": bridges, "interfaces": self._root_interfaces(),
                "nodes": nodes,
                "processes": [{"what": s.what, "pid": s.pid, "argv": s.argv, "log": s.log} for s in self.started]}
        (self.options.state_dir / STATE_FILE).write_text(json.dumps(data, indent=2) + "\n")

    def _record_switches(self) -> None:
        assert self.net is not None
        for switch in self.net.switches:
            if isinstance(switch, P4Switch) and switch.process is not None:
                self.started.append(Started(f"switch {switch.name}", switch.process.pid, switch.command(),
                                            str(switch.log_path), switch.process))
        self._save_state()

    def _configure_hosts(self) -> None:
        assert self.net is not None
        endpoints = self.plan.endpoints
        for ep in endpoints:
            host = self.net[ep.name]
            host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
            for intf in host.intfList():
                host.cmd(f"ethtool -K {intf.name} rx off tx off sg off >/dev/null 2>&1")
                host.cmd(f"ip link set dev {intf.name} mtu {LINK_MTU}")
            data_intf = host.defaultIntf().name
            for other in endpoints:
                if other.name != ep.name:
                    host.cmd(f"ip neigh replace {other.ip} lladdr {other.mac} dev {data_intf} nud permanent")
            if self.pooled:
                host.cmd(f"ip neigh replace {POOL_IP} lladdr {POOL_MAC} dev {data_intf} nud permanent")
        for switch in self.net.switches:
            for intf in switch.intfList():
                if intf.name != "lo":
                    switch.cmd(f"ethtool -K {intf.name} rx off tx off sg off >/dev/null 2>&1")
                    switch.cmd(f"ip link set dev {intf.name} mtu {LINK_MTU}")
        # management links: root namespace → stI for its data address only (the controller's TIER_MOVE / STAT /
        # health-probe path; the storage nodes' path to a Mooncake master in the root namespace)
        mgmt = self.net[MGMT]
        for i, ep in enumerate(self.plan.storage_nodes, start=1):
            storage = self.net[ep.name]
            mgmt_intf, storage_mgmt_intf = mgmt.intf(f"{MGMT}-eth{i - 1}"), storage.intf(f"{ep.name}-eth1")
            root_ip, _ = mgmt_ips(i)
            mgmt.cmd(f"ip route replace {ep.ip}/32 dev {mgmt_intf.name}")
            mgmt.cmd(f"ip neigh replace {ep.ip} lladdr {storage_mgmt_intf.MAC()} dev {mgmt_intf.name} nud permanent")
            storage.cmd(f"ip neigh replace {root_ip} lladdr {mgmt_intf.MAC()} dev {storage_mgmt_intf.name} "
                        "nud permanent")

    def _wait_switches(self) -> None:
        assert self.net is not None
        for switch in self.net.switches:
            if not isinstance(switch, P4Switch):
                continue
            self._wait(lambda s=switch: _tcp_open("127.0.0.1", s.grpc_port), f"switch {switch.name}",
                       switch.process, switch.log_path)

    def _start_mooncake_master(self) -> None:
        """`python -m kvpool.mooncake_master` in the root namespace, listening on every address (the nodes reach
        it at the root end of their management links); its ports are chosen here so the nodes can be told."""
        from kvpool.mooncake_master import free_port

        self.mooncake_ports = (free_port("0.0.0.0"), free_port("0.0.0.0"))
        log = self.options.state_dir / "mooncake" / "master.log"
        argv = [sys.executable, "-m", "kvpool.mooncake_master", "--host", "0.0.0.0",
                "--rpc-port", str(self.mooncake_ports[0]), "--metadata-port", str(self.mooncake_ports[1]),
                "--log", str(log.with_name("mooncake_master.log")), "--", f"--client_ttl={MOONCAKE_CLIENT_TTL}"]
        self._popen("mooncake master", argv, log)
        self._wait(lambda: all(_tcp_open("127.0.0.1", p) for p in self.mooncake_ports), "the Mooncake master",
                   self.started[-1].process, log)

    def _storage_argv(self, index: int, name: str, ip: str) -> list[str]:
        argv = [sys.executable, "-m", "kvpool.server", "--port", str(KVP_UDP_PORT),
                "--capacity", str(self.options.storage_capacity)]
        if self.options.store == "memory":
            return [*argv, "--disk", str(self.options.state_dir / name / "disk")]
        root_ip, _ = mgmt_ips(index)
        rpc, metadata = self.mooncake_ports
        # a pool: every node reads and writes one store, and each block and record has a second replica on another
        # node's segment, so a node that dies takes no committed block with it
        pool = ["--mooncake-shared", "--mooncake-replicas", str(POOL_REPLICAS)] if self.pooled else []
        return [*argv, "--backend", "mooncake", "--mooncake-master", f"{root_ip}:{rpc}",
                "--mooncake-metadata", f"http://{root_ip}:{metadata}/metadata", "--mooncake-hostname", ip, *pool]

    def _start_storage(self) -> None:
        assert self.net is not None
        for i, ep in enumerate(self.plan.storage_nodes, start=1):
            log = self.options.state_dir / ep.name / "storage.log"
            self._popen(f"storage {ep.name}", self._storage_argv(i, ep.name, ep.ip), log, self.net[ep.name])
            self._wait(lambda ip=ep.ip: self._storage_answers(ip),
                       f"storage node {ep.name} (over its management link)", self.started[-1].process, log)

    def _storage_answers(self, ip: str = STORAGE_IP) -> bool:
        with KVPClient(ClientOptions(server=(ip, KVP_UDP_PORT), timeout=0.3, retries=0)) as client:
            try:
                client.stat(0)
                return True
            except KVPError:
                return False

    def _start_controllers(self) -> None:
        if importlib.util.find_spec("controller.__main__") is None:
            raise TestbedError("the controller (python -m controller) is not installed; without it the switch "
                               "has no routes. Start with --no-controller to debug the switch alone.")
        assert self.artifacts is not None
        for sw in self.plan.switches:
            folder = self.switch_dir(sw.name)
            hosts_file = sw.write_hosts_file(folder / "hosts.json")
            api = self.api_address(sw.device_id)
            # --api goes before `serve`: the controller's parser takes it as a global option there (it is also
            # what its client commands read), and that order works whether or not `serve` repeats it.
            argv = [sys.executable, "-m", "controller", "--api", api, "serve",
                    "--switch", self.grpc_address(sw.device_id), "--device-id", str(sw.device_id),
                    "--p4info", str(self.artifacts.p4info), "--device-config", str(self.artifacts.device_config),
                    "--storage", f"{STORAGE_IP}:{KVP_UDP_PORT}", "--state", str(folder / "controller.sqlite"),
                    "--hosts-file", str(hosts_file), *self._controller_policy_args(), *self._pool_args()]
            if self.options.metrics_base is not None:
                argv += ["--metrics-port", str(self.options.metrics_base + sw.device_id - 1)]
            log = folder / "controller.log"
            self._popen(f"controller {sw.name}", argv, log)
            host, port = api.rsplit(":", 1)
            self._wait(lambda h=host, p=int(port): _tcp_open(h, p), f"controller of {sw.name} (API {api})",
                       self.started[-1].process, log)

    def _pool_args(self) -> list[str]:
        """The controllers' steering flags: the pool address, every node (ids 1..M in order), a shared store."""
        if not self.pooled:
            return []
        args = ["--pool-address", POOL_IP]
        for ep in self.plan.storage_nodes:
            args += ["--pool-node", f"{ep.ip}:{KVP_UDP_PORT}"]
        return args + (["--pool-shared-store"] if self.options.store == "mooncake" else [])

    def _controller_policy_args(self) -> list[str]:
        o = self.options
        args = [arg for flag, value in (("--admission", o.admission), ("--eviction", o.eviction),
                                        ("--recycling", o.recycling)) if value for arg in (flag, value)]
        return args + [arg for param in o.params for arg in ("--param", param)]

    def _wait_data_path(self) -> None:
        assert self.net is not None
        first = self.net[self.plan.inference_hosts[0].name]
        self._wait(lambda: "1 received" in first.cmd(f"ping -c1 -W1 {STORAGE_IP}"),
                   f"ping {first.name} → {STORAGE} through the switch", None, None)

    # ---- helpers ----------------------------------------------------------------------------------------

    def _popen(self, what: str, argv: list[str], log: Path, node=None) -> None:
        process = self._spawn(argv, log, node, "wb")
        self.started.append(Started(what, process.pid, argv, str(log), process))
        self._save_state()

    def _spawn(self, argv: list[str], log: Path, node, log_mode: str) -> subprocess.Popen:
        """Run `argv` in the root namespace (node None) or in a Mininet node's, output to `log`."""
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        with log.open(log_mode) as out:
            if node is None:
                return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        cwd=REPO, env=env, start_new_session=True)
            return node.popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                              cwd=str(REPO), env=env)

    def _wait(self, ready, what: str, process: subprocess.Popen | None, log: Path | None) -> None:
        deadline = time.monotonic() + self.options.ready_timeout
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise TestbedError(f"{what} exited with status {process.returncode}; last lines of {log}:\n"
                                   f"{_tail(log)}")
            if ready():
                return
            time.sleep(0.3)
        raise TestbedError(f"{what} not ready after {self.options.ready_timeout:.0f} s"
                           + (f"; last lines of {log}:\n{_tail(log)}" if log else ""))

    def describe(self) -> str:
        """What runs where, for the CLI banner."""
        lines = [f"target {self.options.target}, {self.options.topology} topology, state in {self.options.state_dir}"
                 + (" (resumed)" if self.options.resume else " (fresh)")]
        for sw in self.plan.switches:
            lines.append(f"  {sw.name}: device {sw.device_id}, P4Runtime {self.grpc_address(sw.device_id)}, "
                         f"controller API {self.api_address(sw.device_id)}, ports "
                         + ", ".join(f"{p}={i}({role})" for (p, i), (_, role) in zip(sw.ports, sw.port_roles, strict=True)))
            node = self.net[sw.name] if self.net is not None else None
            if isinstance(node, P4Switch):
                lines.append(f"      logs and pcaps: {', '.join(node.visibility())}")
        for ep in self.plan.endpoints:
            lines.append(f"  {ep.name}: {ep.ip} {ep.mac} ({ep.role})")
        if self.pooled:
            lines.append(f"  pool: {POOL_IP} → {', '.join(e.name for e in self.plan.storage_nodes)} "
                         f"({self.options.store}; clients address {POOL_IP})")
        return "\n".join(lines)


def _tcp_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


def _tail(log: Path | None, lines: int = 20) -> str:
    if log is None:
        return ""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _alive(pid: int, argv: list[str]) -> bool:
    """Whether `pid` still runs the command we started (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(part.decode(errors="replace") == argv[-1] for part in cmdline) if argv else False


def _ended(pid: int) -> bool:
    """Whether `pid` has exited: gone, or a zombie its parent has not reaped yet (when that parent is us, as in
    a test of `topo stop`, the entry stays until the Popen object waits)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _terminate(pid: int, process: subprocess.Popen | None = None, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; for one process we started."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None:
            if process.poll() is not None:
                return
        elif _ended(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if process is not None:
        process.wait()


def _delete_interfaces(names: list[str]) -> list[str]:
    """Delete the named root-namespace interfaces that exist (a veth's peer goes with it); returns those deleted."""
    deleted = []
    for name in names:
        if Path(f"/sys/class/net/{name}").exists():
            subprocess.run(["ip", "link", "del", name], capture_output=True)
            deleted.append(name)
    return deleted


def stop_recorded(state_dir: Path) -> list[str]:
    """`topo stop`: end what a (crashed) testbed recorded in `state_dir`: its processes and node shells by pid
    (each checked against its command line, so a recycled pid is never hit), then its interfaces and bridges
    by name. Returns what was stopped. Touches nothing the record does not name."""
    state = state_dir / STATE_FILE
    if not state.exists():
        return []
    data = json.loads(state.read_text())
    stopped = []
    for p in reversed(data.get("processes", [])):
        if _alive(p["pid"], p["argv"]):
            _terminate(p["pid"])
            stopped.append(f"{p['what']} (pid {p['pid']})")
    for node in data.get("nodes", []):  # Mininet's shell of each node: `bash ... mininet:<name>`
        if _alive(node["pid"], [f"mininet:{node['name']}"]):
            _terminate(node["pid"], timeout=2.0)
            stopped.append(f"node {node['name']} (pid {node['pid']})")
    stopped += [f"interface {name}" for name in _delete_interfaces(data.get("interfaces", []))]
    for name in data.get("bridges", []):
        kind = subprocess.run(["ip", "-d", "link", "show", name], capture_output=True, text=True).stdout
        if "bridge" in kind:  # only a bridge we made, never an interface that merely shares the name
            subprocess.run(["ip", "link", "del", name], capture_output=True)
    state.unlink()
    return stopped
