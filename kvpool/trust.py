"""Who may send the storage node controller-only requests (TIER_MOVE, ...): the controller's networks.

The switch drops control opcodes that arrive on a host port, but the storage node must not rely on a switch
being on the path (nor on every switch being configured), so it checks the source address itself. Addresses
are only as good as the network that carries them: the default trusts loopback and the testbed's management
link, which no inference host can reach (topo/topologies.py: MGMT_ROOT_IP 172.31.74.1/30, the root-namespace
end of st1's second interface, is where the controller's requests come from).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_CONTROL_FROM = "127.0.0.0/8,172.31.74.0/30"
"""Loopback and the testbed's management link (`topo.topologies.MGMT_ROOT_IP`/`MGMT_PREFIX`)."""


def parse_networks(text: str) -> tuple[Network, ...]:
    """"CIDR[,CIDR...]" (a bare address is a /32) -> networks; ValueError naming the bad part."""
    networks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError as exc:
            raise ValueError(f"bad network {part!r} in {text!r}: {exc}") from None
    return tuple(networks)


@dataclass(frozen=True, slots=True)
class ControlSources:
    """The networks controller-only requests may come from."""

    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, text: str = DEFAULT_CONTROL_FROM) -> ControlSources:
        return cls(parse_networks(text))

    @classmethod
    def of(cls, networks: Iterable[str]) -> ControlSources:
        return cls.parse(",".join(networks))

    def allows(self, address: str) -> bool:
        """Whether a request from `address` may be a controller's (an unparsable address never is)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.networks)
