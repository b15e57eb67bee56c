"""The testbed's topologies as data: a `topology.json` names hosts, storage nodes, switches and links, and
`KvTopo.build()` only turns that data into Mininet nodes and links.

topology.json::

    {
      "description": "one line for humans",
      "hosts":    [{"name": "h1", "ip": "10.0.0.1/24", "mac": "00:00:0a:00:00:01"}, ...],
      "storage":  [{"name": "st1", "ip": "10.0.0.100/24", "mac": "00:00:0a:00:00:64"}],
      "switches": [{"name": "s1", "device_id": 1}, ...],
      "links":    [{"node1": "h1", "node2": "s1", "port2": 1}, {"node1": "l1", "port1": 101, "node2": "sp1", "port2": 1}]
    }

Every switch end of a link names its port (`port1` for node1, `port2` for node2): that number is the P4 switch's
port, in hosts.json and in the controller's port roles. Host ends are their eth0. The storage node also gets a
management link to the root namespace (`mgmt`, the controller's path to it), which the file does not list.

The shipped files are `topo/layouts/star.json` and `topo/layouts/leaf-spine.json`, written by the generators
`star()` and `leaf_spine()` below at their default sizes (`python -m topo topology star --hosts 8` prints
another size, a start for your own file). `load_topology("star")` reads the shipped file; with a host count
it asks the generator; any other argument is a path to a topology.json.

Names: inference hosts `h1..hN`, storage nodes `st1..stM` (10.0.0.100..), switches `s1` (star) or leaves `l1..` and
spines `sp1..`. With several storage nodes (`storage=M`, `make run STORAGE=M`) clients address the pool address
`POOL_IP`, which the switches steer to the node holding each block (p4src/steer.p4, controller/steering.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.topo import Topo

STORAGE = "st1"
MGMT = "mgmt"
STORAGE_IP = "10.0.0.100"
"""The (first) storage node's address: with one node every client request goes here (the switch intercepts
what it serves)."""
POOL_IP = "10.0.0.200"
"""With several storage nodes: the pool address clients send to (no host owns it; the switch steers)."""
POOL_MAC = "00:00:0a:00:00:c8"
"""The MAC hosts' static ARP gives the pool address (the switch routes on IPv4 only and never checks it)."""
MAX_STORAGE = 8
"""Storage nodes st1..st8 are 10.0.0.100..107."""
SUBNET_PREFIX = 24
MGMT_ROOT_IP = "172.31.74.1"
MGMT_STORAGE_IP = "172.31.74.2"
MGMT_PREFIX = 30
"""The management link is a /30 from 172.16/12's top, unlikely to meet anything else on the machine."""
MAX_HOSTS = 99
"""Hosts are 10.0.0.1..99 (10.0.0.100 is the storage node)."""
LAYOUTS = Path(__file__).resolve().parent / "layouts"
"""The shipped topology files, `<name>.json`."""
LEAF_UPLINK_BASE = 100
"""In leaf-spine, a leaf's port to spine j is LEAF_UPLINK_BASE + j, clear of the host ports."""


def storage_name(i: int) -> str:
    return STORAGE if i == 1 else f"st{i}"


def storage_ip(i: int) -> str:
    """Storage node i (1-based) is 10.0.0.(99 + i)."""
    return f"10.0.0.{99 + i}"


def mgmt_ips(i: int) -> tuple[str, str]:
    """(root end, node end) of storage node i's management /30: 172.31.74.(4(i-1)+1, +2)."""
    base = 4 * (i - 1)
    return f"172.31.74.{base + 1}", f"172.31.74.{base + 2}"


class TopologyError(ValueError):
    """A topology file or generator argument the testbed cannot build; the message names the file and the item."""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    ip: str = ""
    """IPv4 with prefix length (hosts and storage nodes)."""
    mac: str = ""
    device_id: int = 0
    """P4Runtime device id (switches)."""


@dataclass(frozen=True, slots=True)
class Link:
    node1: str
    node2: str
    port1: int | None = None
    """Port of node1 when node1 is a switch."""
    port2: int | None = None
    """Port of node2 when node2 is a switch."""


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """The contents of one topology.json."""

    hosts: tuple[Node, ...]
    storage: tuple[Node, ...]
    switches: tuple[Node, ...]
    links: tuple[Link, ...]
    description: str = ""
    source: str = field(default="", compare=False)
    """Where it came from (a file path, or the generator call), for error messages."""

    def to_json(self) -> dict[str, Any]:
        def node(n: Node, *keys: str) -> dict[str, Any]:
            return {"name": n.name, **{k: getattr(n, k) for k in keys}}

        def link(link: Link) -> dict[str, Any]:
            out: dict[str, Any] = {"node1": link.node1}
            if link.port1 is not None:
                out["port1"] = link.port1
            out["node2"] = link.node2
            if link.port2 is not None:
                out["port2"] = link.port2
            return out

        return {"description": self.description,
                "hosts": [node(h, "ip", "mac") for h in self.hosts],
                "storage": [node(s, "ip", "mac") for s in self.storage],
                "switches": [node(s, "device_id") for s in self.switches],
                "links": [link(li) for li in self.links]}

    def dumps(self) -> str:
        """topology.json text: one node or link per line, so a diff shows what changed."""
        data = self.to_json()
        parts = [f'  "description": {json.dumps(data["description"])}']
        for key in ("hosts", "storage", "switches", "links"):
            rows = ",\n".join(f"    {json.dumps(row)}" for row in data[key])
            parts.append(f'  "{key}": [\n{rows}\n  ]')
        return "{\n" + ",\n".join(parts) + "\n}\n"

    @classmethod
    def from_json(cls, data: Any, source: str) -> TopologySpec:
        def fail(message: str) -> TopologyError:
            return TopologyError(f"{source}: {message}")

        if not isinstance(data, dict):
            raise fail("expected a JSON object with hosts, storage, switches and links")
        unknown = set(data) - {"description", "hosts", "storage", "switches", "links"}
        if unknown:
            raise fail(f"unknown keys {sorted(unknown)}")
        try:
            hosts = tuple(Node(h["name"], ip=h["ip"], mac=h["mac"]) for h in data.get("hosts", []))
            storage = tuple(Node(s["name"], ip=s["ip"], mac=s["mac"]) for s in data.get("storage", []))
            switches = tuple(Node(s["name"], device_id=int(s["device_id"])) for s in data.get("switches", []))
            links = tuple(Link(li["node1"], li["node2"], li.get("port1"), li.get("port2"))
                          for li in data.get("links", []))
        except (KeyError, TypeError, ValueError) as exc:
            raise fail(f"a node or link lacks a field or has a wrong one ({exc!r})") from None
        spec = cls(hosts, storage, switches, links, str(data.get("description", "")), source)
        spec.validate()
        return spec

    def validate(self) -> None:
        """Refuse what the testbed cannot build, naming the item (see the module docstring for the rules)."""
        def fail(message: str) -> TopologyError:
            return TopologyError(f"{self.source}: {message}")

        names = [n.name for n in (*self.hosts, *self.storage, *self.switches)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise fail(f"names used twice: {duplicates}")
        if MGMT in names:
            raise fail(f"{MGMT!r} is reserved for the storage node's management link")
        if not 1 <= len(self.hosts) <= MAX_HOSTS:
            raise fail(f"hosts must be 1..{MAX_HOSTS}, got {len(self.hosts)}")
        wanted = [(storage_name(i), storage_ip(i)) for i in range(1, len(self.storage) + 1)]
        if not 1 <= len(self.storage) <= MAX_STORAGE or [(s.name, s.ip.split("/")[0]) for s in self.storage] != wanted:
            raise fail(f"1..{MAX_STORAGE} storage nodes, named st1, st2, ... at {STORAGE_IP}, 10.0.0.101, ... "
                       f"in order (clients and the controller address them so), got "
                       f"{[(s.name, s.ip) for s in self.storage]}")
        if not self.switches:
            raise fail("no switches")
        device_ids = [s.device_id for s in self.switches]
        if sorted(set(device_ids)) != sorted(device_ids) or min(device_ids) < 1:
            raise fail(f"switch device ids must be distinct and ≥ 1, got {device_ids}")
        switch_names = {s.name for s in self.switches}
        used: set[tuple[str, int]] = set()
        for i, link in enumerate(self.links):
            for end, port in ((link.node1, link.port1), (link.node2, link.port2)):
                if end not in names:
                    raise fail(f"links[{i}] names {end!r}, which is no host, storage node or switch")
                if end in switch_names:
                    if not isinstance(port, int) or not 1 <= port < 255:
                        raise fail(f"links[{i}]: the port of switch {end} must be a number 1..254 (255 is the CPU port)")
                    if (end, port) in used:
                        raise fail(f"links[{i}]: port {port} of {end} is used twice")
                    used.add((end, port))
            if link.node1 not in switch_names and link.node2 not in switch_names:
                raise fail(f"links[{i}] joins two hosts; every link has a switch end")


class KvTopo(Topo):
    """A Mininet Topo built from a TopologySpec: nodes and links with the options the testbed reads (hosts their
    `ip`, `mac` and `role`, switches their `device_id`, links their switch-side port numbers)."""

    def build(self, spec: TopologySpec) -> None:  # type: ignore[override]
        for h in spec.hosts:
            self.addHost(h.name, ip=h.ip, mac=h.mac, role="inference")
        for s in spec.storage:
            self.addHost(s.name, ip=s.ip, mac=s.mac, role="storage")
        mgmt = self.addHost(MGMT, inNamespace=False, ip=f"{MGMT_ROOT_IP}/{MGMT_PREFIX}", role="mgmt")
        # The management link is each storage node's second interface (stI-eth1), outside the data plane; it is
        # added before the data links so that the data link, named in the file, is stI-eth0 by port number.
        # Storage node i's link is mgmt-eth(i-1), a /30 of its own (mgmt_ips).
        for i, node in enumerate(spec.storage, start=1):
            root_ip, node_ip = mgmt_ips(i)
            self.addLink(node.name, mgmt, port1=1, port2=i - 1,
                         params1={"ip": f"{node_ip}/{MGMT_PREFIX}"}, params2={"ip": f"{root_ip}/{MGMT_PREFIX}"})
        for sw in spec.switches:
            self.addSwitch(sw.name, device_id=sw.device_id)
        switch_names = {s.name for s in spec.switches}
        for link in spec.links:
            self.addLink(link.node1, link.node2,
                         port1=link.port1 if link.node1 in switch_names else 0,
                         port2=link.port2 if link.node2 in switch_names else 0)


def host_ip(i: int) -> str:
    return f"10.0.0.{i}"


def host_mac(i: int) -> str:
    """MACs follow the IP's last byte, so a capture reads without a table (st1 is ..:00:64)."""
    return f"00:00:0a:00:00:{i:02x}"


def _endpoints(hosts: int, storage: int = 1) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
    if not 1 <= hosts <= MAX_HOSTS:
        raise TopologyError(f"hosts must be 1..{MAX_HOSTS}, got {hosts}")
    if not 1 <= storage <= MAX_STORAGE:
        raise TopologyError(f"storage nodes must be 1..{MAX_STORAGE}, got {storage}")
    return (tuple(Node(f"h{i}", ip=f"{host_ip(i)}/{SUBNET_PREFIX}", mac=host_mac(i)) for i in range(1, hosts + 1)),
            tuple(Node(storage_name(i), ip=f"{storage_ip(i)}/{SUBNET_PREFIX}", mac=host_mac(99 + i))
                  for i in range(1, storage + 1)))


def star(hosts: int = 4, storage: int = 1) -> TopologySpec:
    """One switch; N inference hosts and the storage node, each on its own port (the default testbed).

        h1 ──(1)┐
        h2 ──(2)┤
         ...    s1 ──(N+1)── st1 ══ mgmt (root namespace: the controller's path to st1)
        hN ──(N)┘

    (k) is the switch port number. h_i is 10.0.0.i, st1 10.0.0.100, all in 10.0.0.0/24. With `storage` = M > 1,
    st1..stM sit on ports N+1..N+M (10.0.0.100..) and clients use the pool address POOL_IP.
    """
    host_nodes, storage_nodes = _endpoints(hosts, storage)
    links = [Link(h.name, "s1", port2=port) for port, h in enumerate(host_nodes, start=1)]
    links += [Link(st.name, "s1", port2=hosts + i) for i, st in enumerate(storage_nodes, start=1)]
    what = "the storage node" if storage == 1 else f"{storage} storage nodes"
    source = f"star(hosts={hosts})" if storage == 1 else f"star(hosts={hosts}, storage={storage})"
    return TopologySpec(host_nodes, storage_nodes, (Node("s1", device_id=1),), tuple(links),
                        f"star: {hosts} inference hosts and {what} on one switch", source)


def leaf_spine(hosts: int = 4, leaves: int = 2, spines: int = 2, storage: int = 1) -> TopologySpec:
    """Leaves l1..lL with the hosts spread over them, every leaf linked to every spine sp1..spS.

        sp1 ─────────── sp2              leaf ports: hosts 1.., then spine j on port 100+j
         │  ╲         ╱  │             spine ports: leaf i on port i
         │    ╲     ╱    │
        l1      ╳       l2 ── st1 ══ mgmt
        │ │   ╱   ╲     │
        h1 h2        h3 h4

    The storage node hangs off the last leaf. Routes between leaves go through sp1 (one path, no ECMP:
    the switch program routes by /32); the other spines are there for experiments that add paths.
    Replies retrace their request's path (tests/topo/test_plan.py), so every switch that counted a GET miss
    also sees the reply that may fill its slot. Each switch runs its own controller, sketch and slots, so
    several switches on a path can hold one block. With `storage` = M > 1, storage node j hangs off leaf
    L - ((j - 1) mod L) (st1 on the last leaf, st2 on the one before, ...), so the pool spans the fabric.
    """
    if leaves < 1 or spines < 1:
        raise TopologyError("need at least one leaf and one spine")
    host_nodes, storage_nodes = _endpoints(hosts, storage)
    leaf_nodes = tuple(Node(f"l{i}", device_id=i) for i in range(1, leaves + 1))
    spine_nodes = tuple(Node(f"sp{j}", device_id=leaves + j) for j in range(1, spines + 1))
    next_port = {leaf.name: 1 for leaf in leaf_nodes}
    links = []
    for k, h in enumerate(host_nodes):
        leaf = leaf_nodes[k * leaves // len(host_nodes)].name
        links.append(Link(h.name, leaf, port2=next_port[leaf]))
        next_port[leaf] += 1
    for j, st in enumerate(storage_nodes):
        leaf = leaf_nodes[len(leaf_nodes) - 1 - j % len(leaf_nodes)].name
        links.append(Link(st.name, leaf, port2=next_port[leaf]))
        next_port[leaf] += 1
    for i, leaf_node in enumerate(leaf_nodes, start=1):
        for j, spine in enumerate(spine_nodes, start=1):
            links.append(Link(leaf_node.name, spine.name, port1=LEAF_UPLINK_BASE + j, port2=i))
    where = "the storage node on the last leaf" if storage == 1 else f"{storage} storage nodes over the leaves"
    source = f"leaf_spine(hosts={hosts}, leaves={leaves}, spines={spines}" + \
        (")" if storage == 1 else f", storage={storage})")
    return TopologySpec(host_nodes, storage_nodes, leaf_nodes + spine_nodes, tuple(links),
                        f"leaf-spine: {hosts} inference hosts over {leaves} leaves, {spines} spines; {where}", source)


GENERATORS: dict[str, Callable[..., TopologySpec]] = {"star": star, "leaf-spine": leaf_spine}
"""The shipped topologies by name; each also ships as `topo/layouts/<name>.json` at its default size."""


def load_topology(name_or_path: str | Path, hosts: int | None = None, storage: int | None = None) -> TopologySpec:
    """`star` / `leaf-spine`: the shipped file, or the generator when `hosts` or `storage` (storage nodes) is given;
    anything else: a path to a topology.json (then both must be None: the file names its hosts)."""
    name = str(name_or_path)
    if name in GENERATORS:
        if hosts is not None or storage is not None:
            return GENERATORS[name](hosts=4 if hosts is None else hosts, storage=1 if storage is None else storage)
        path = LAYOUTS / f"{name}.json"
    else:
        path = Path(name)
        if hosts is not None or storage is not None:
            raise TopologyError(f"{path}: a host count applies to the shipped {' and '.join(GENERATORS)} only; "
                                "a topology file lists its hosts")
    if not path.is_file():
        raise TopologyError(f"{path}: no such topology file (shipped: {', '.join(GENERATORS)})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    return TopologySpec.from_json(data, str(path))
