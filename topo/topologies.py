"""The testbed's topologies as data: `build()` only names nodes and links, with addresses and port numbers.

Every node carries what the rest of the testbed needs as Mininet node options: hosts their `ip` and `mac`,
switches their P4Runtime `device_id`, and every link its switch-side port number (`port1`/`port2`), so the
forwarding plan (`topo.plan`) is derived from the Topo object alone. Names: inference hosts `h1..hN`, the
storage node `st1`, switches `s1` (star) or leaves `l1..` and spines `sp1..`, and `mgmt`, the root-namespace
end of the storage node's management link (the controller's path to the storage node, see `topo.plan`).
"""

from __future__ import annotations

from mininet.topo import Topo

STORAGE = "st1"
MGMT = "mgmt"
STORAGE_IP = "10.0.0.100"
"""The storage node's address: every client request goes here (the switch intercepts what it serves)."""
SUBNET_PREFIX = 24
MGMT_ROOT_IP = "172.31.74.1"
MGMT_STORAGE_IP = "172.31.74.2"
MGMT_PREFIX = 30
"""The management link is a /30 from 172.16/12's top, unlikely to meet anything else on the machine."""
MAX_HOSTS = 99
"""Hosts are 10.0.0.1..99 (10.0.0.100 is the storage node)."""


def host_ip(i: int) -> str:
    return f"10.0.0.{i}"


def host_mac(i: int) -> str:
    """MACs follow the IP's last byte, so a capture reads without a table (st1 is ..:00:64)."""
    return f"00:00:0a:00:00:{i:02x}"


def _add_endpoints(topo: Topo, hosts: int) -> tuple[list[str], str]:
    if not 1 <= hosts <= MAX_HOSTS:
        raise ValueError(f"hosts must be 1..{MAX_HOSTS}, got {hosts}")
    names = [topo.addHost(f"h{i}", ip=f"{host_ip(i)}/{SUBNET_PREFIX}", mac=host_mac(i), role="inference")
             for i in range(1, hosts + 1)]
    storage = topo.addHost(STORAGE, ip=f"{STORAGE_IP}/{SUBNET_PREFIX}", mac=host_mac(100), role="storage")
    mgmt = topo.addHost(MGMT, inNamespace=False, ip=f"{MGMT_ROOT_IP}/{MGMT_PREFIX}", role="mgmt")
    # The management link is the storage node's second interface (st1-eth1), outside the data plane.
    topo.addLink(storage, mgmt, port1=1, port2=0, params1={"ip": f"{MGMT_STORAGE_IP}/{MGMT_PREFIX}"})
    return names, storage


class StarTopo(Topo):
    """One switch; N inference hosts and the storage node, each on its own port (the default testbed).

        h1 ──(1)┐
        h2 ──(2)┤
         ...    s1 ──(N+1)── st1 ══ mgmt (root namespace: the controller's path to st1)
        hN ──(N)┘

    (k) is the switch port number. h_i is 10.0.0.i, st1 10.0.0.100, all in 10.0.0.0/24.
    """

    def build(self, hosts: int = 4) -> None:  # type: ignore[override]
        names, storage = _add_endpoints(self, hosts)
        switch = self.addSwitch("s1", device_id=1)
        for port, name in enumerate(names, start=1):
            self.addLink(name, switch, port1=0, port2=port)
        self.addLink(storage, switch, port1=0, port2=len(names) + 1)


class LeafSpineTopo(Topo):
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
    several switches on a path can hold one block. Which one serves it is set by p4src's fill rule: see
    tests/topo/test_leaf_spine.py for what is checked and what is not yet true (the readers' own leaf).
    """

    UPLINK_BASE = 100
    """Leaf port of spine j is UPLINK_BASE + j, clear of the host ports."""

    def build(self, hosts: int = 4, leaves: int = 2, spines: int = 2) -> None:  # type: ignore[override]
        if leaves < 1 or spines < 1:
            raise ValueError("need at least one leaf and one spine")
        names, storage = _add_endpoints(self, hosts)
        leaf_names = [self.addSwitch(f"l{i}", device_id=i) for i in range(1, leaves + 1)]
        spine_names = [self.addSwitch(f"sp{j}", device_id=leaves + j) for j in range(1, spines + 1)]
        next_port = dict.fromkeys(leaf_names, 1)
        for k, name in enumerate(names):
            leaf = leaf_names[k * leaves // len(names)]
            self.addLink(name, leaf, port1=0, port2=next_port[leaf])
            next_port[leaf] += 1
        self.addLink(storage, leaf_names[-1], port1=0, port2=next_port[leaf_names[-1]])
        for i, leaf in enumerate(leaf_names, start=1):
            for j, spine in enumerate(spine_names, start=1):
                self.addLink(leaf, spine, port1=self.UPLINK_BASE + j, port2=i)


TOPOLOGIES = {"star": StarTopo, "leaf-spine": LeafSpineTopo}
"""Registry by the name `--topology` takes."""
