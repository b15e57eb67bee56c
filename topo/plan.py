"""The forwarding plan of a topology: where each address lives, seen from each switch, and the hosts.json
files the controller installs L3 forwarding from.

hosts.json (one per switch, in that switch's state folder, passed as `--hosts-file`)::

    {
      "switch": "s1",                 # Mininet name of the switch this plan is for
      "device_id": 1,                 # its P4Runtime device id
      "hosts": [                      # one /32 route per endpoint (inference hosts and storage nodes)
        {"name": "h1",  "ip": "10.0.0.1",   "mac": "00:00:0a:00:00:01", "port": 1, "role": "inference"},
        {"name": "st1", "ip": "10.0.0.100", "mac": "00:00:0a:00:00:64", "port": 5, "role": "storage"}
      ],
      "ports": [                      # every data port of this switch and what is behind it
        {"port": 1, "role": "host"},  # an inference host: untrusted (its replies never fill a slot)
        {"port": 5, "role": "storage"},  # a storage node: its GET_REPLYs may fill slots
        {"port": 101, "role": "fabric"}  # another switch (leaf-spine): trusted like a storage node
      ]
    }

`port` is the egress port *of this switch* towards the endpoint (its own port for a directly attached host,
an uplink otherwise) and `mac` the endpoint's own MAC, which the switch writes as destination MAC
(`ipv4_forward(dst_mac, port)`). A route's `role` is informational; the `ports` list is what the controller
installs into the `port_role` table (the data plane's trust boundary: only storage and fabric ports fill
slots). Everything is derived from the Topo object:
endpoints are Mininet hosts with an `ip` option (not the root-namespace `mgmt` end), switches are Mininet
switches with a `device_id`, and ports are the link's `port1`/`port2`.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from mininet.topo import Topo


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A host with an address in the data plane."""

    name: str
    ip: str
    """IPv4 without prefix length."""
    mac: str
    role: str
    """"inference" or "storage"."""


@dataclass(frozen=True, slots=True)
class Route:
    """One line of hosts.json: how a switch reaches an endpoint."""

    name: str
    ip: str
    mac: str
    port: int
    role: str


PORT_ROLES = ("host", "storage", "fabric")
"""Names of p4src's `port_role_t` values (HOST = 0, STORAGE = 1, FABRIC = 2) as hosts.json spells them."""


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    name: str
    device_id: int
    ports: tuple[tuple[int, str], ...]
    """(port number, interface name) of every data port, by port number."""
    routes: tuple[Route, ...]
    port_roles: tuple[tuple[int, str], ...] = ()
    """(port number, one of PORT_ROLES) of every data port, by port number."""

    def hosts_json(self) -> dict:
        return {"switch": self.name, "device_id": self.device_id,
                "hosts": [{"name": r.name, "ip": r.ip, "mac": r.mac, "port": r.port, "role": r.role}
                          for r in self.routes],
                "ports": [{"port": port, "role": role} for port, role in self.port_roles]}

    def write_hosts_file(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.hosts_json(), indent=2) + "\n")
        return path


@dataclass(frozen=True, slots=True)
class Plan:
    endpoints: tuple[Endpoint, ...]
    switches: tuple[SwitchPlan, ...]

    def endpoint(self, name: str) -> Endpoint:
        return next(e for e in self.endpoints if e.name == name)

    @property
    def inference_hosts(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.role == "inference")

    @property
    def storage(self) -> Endpoint:
        """The first storage node (st1)."""
        return next(e for e in self.endpoints if e.role == "storage")

    @property
    def storage_nodes(self) -> tuple[Endpoint, ...]:
        """Every storage node, st1 first (node id i + 1 in the pool)."""
        return tuple(e for e in self.endpoints if e.role == "storage")


def plan_of(topo: Topo) -> Plan:
    """The plan of a built Topo (see the module docstring for what it reads)."""
    switches = sorted(topo.switches(), key=lambda s: topo.nodeInfo(s)["device_id"])
    endpoints = tuple(
        Endpoint(h, topo.nodeInfo(h)["ip"].split("/")[0], topo.nodeInfo(h)["mac"], topo.nodeInfo(h).get("role", ""))
        for h in sorted(topo.hosts(), key=_natural) if "mac" in topo.nodeInfo(h))
    # neighbours of each switch as (own port, peer), port order = tie-break order for paths
    links: dict[str, list[tuple[int, str]]] = {s: [] for s in switches}
    for a, b in topo.links():
        pa, pb = topo.port(a, b)
        if a in links:
            links[a].append((pa, b))
        if b in links:
            links[b].append((pb, a))
    for neighbours in links.values():
        neighbours.sort()
    plans = []
    for sw in switches:
        routes = []
        for ep in endpoints:
            port = _first_hop(sw, ep.name, links)
            if port is None:
                raise ValueError(f"{ep.name} is not reachable from {sw}")
            routes.append(Route(ep.name, ep.ip, ep.mac, port, ep.role))
        ports = tuple((p, f"{sw}-eth{p}") for p, _ in links[sw])
        roles = tuple((p, _port_role(peer, links, endpoints)) for p, peer in links[sw])
        plans.append(SwitchPlan(sw, topo.nodeInfo(sw)["device_id"], ports, tuple(routes), roles))
    return Plan(endpoints, tuple(plans))


def _port_role(peer: str, links: dict[str, list[tuple[int, str]]], endpoints: tuple[Endpoint, ...]) -> str:
    """What a switch port leads to: another switch (fabric), the storage node (storage), else a host."""
    if peer in links:
        return "fabric"
    return "storage" if any(e.name == peer and e.role == "storage" for e in endpoints) else "host"


def _first_hop(source: str, target: str, links: dict[str, list[tuple[int, str]]]) -> int | None:
    """Port of `source` on a shortest switch path to the endpoint `target` (BFS, lowest port first)."""
    seen = {source}
    queue: deque[tuple[str, int | None]] = deque([(source, None)])
    while queue:
        node, first = queue.popleft()
        for port, peer in links[node]:
            hop = port if first is None else first
            if peer == target:
                return hop
            if peer in links and peer not in seen:
                seen.add(peer)
                queue.append((peer, hop))
    return None


def _natural(name: str) -> tuple[str, int]:
    """h2 before h10."""
    head = name.rstrip("0123456789")
    return head, int(name[len(head):] or 0)
