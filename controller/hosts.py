"""The host plan (hosts.json) the controller installs from: which IP lives behind which port (L3 routes), and
who is behind each port (`port_role`: only storage nodes and other switches may fill the pool: docs/protocol.md, *Trust*).

    {"hosts": [{"name": "h1", "ip": "10.0.0.1", "mac": "...", "port": 1, "role": "inference"}, ...],
     "ports": [{"port": 1, "role": "host"}, {"port": 5, "role": "storage"}, {"port": 3, "role": "fabric"}]}

Without `ports`, every port is a host port except those a route with role "storage" leaves through.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path

from controller.codes import PortRole

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    ip: str
    """IPv4 address of the host."""
    mac: str
    """Its MAC, `aa:bb:cc:dd:ee:ff`: the destination MAC of frames the switch forwards to it."""
    port: int
    """Switch port the host is attached to."""
    role: str = ""
    """What it is ("inference", "storage", ...): informational, except for the port-role fallback."""


@dataclass(frozen=True, slots=True)
class HostPlan:
    hosts: list[Host]
    ports: dict[int, PortRole]
    """Role of each port the plan names; a port not in it is a HOST port (the table's default)."""

    def storage_ports(self) -> list[int]:
        """Ports whose replies may fill the pool (role STORAGE); none means the pool never fills."""
        return sorted(port for port, role in self.ports.items() if role is PortRole.STORAGE)


def load_plan(path: str | Path) -> HostPlan:
    """hosts.json: the routes and the port roles (from `ports`, else the fallback); errors name the entry."""
    path = Path(path)
    hosts = load_hosts(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the host plan: {exc}") from exc
    listed = data.get("ports") if isinstance(data, dict) else None
    if listed is None:
        return HostPlan(hosts, {h.port: PortRole.STORAGE for h in hosts if h.role == "storage"})
    if not isinstance(listed, list):
        raise ValueError(f"{path}: `ports` must be a list of {{port, role}}")
    roles: dict[int, PortRole] = {}
    for index, item in enumerate(listed):
        where = f"{path}: ports #{index}"
        try:
            port, role = int(item["port"]), PortRole[str(item["role"]).upper()]
        except (KeyError, ValueError, TypeError):
            known = ", ".join(r.name.lower() for r in PortRole)
            raise ValueError(f"{where}: needs port (0..510) and role ({known}), got {item!r}") from None
        if not 0 <= port < 511:
            raise ValueError(f"{where}: port {port} outside 0..510")
        roles[port] = role
    return HostPlan(hosts, roles)


def load_hosts(path: str | Path) -> list[Host]:
    """Read a list of `{name, ip, mac, port}` (or `{"hosts": [...]}`); errors name the file and the entry."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the host plan: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("hosts", data)
    if isinstance(data, dict):  # {"h1": {...}, ...}
        data = [{"name": name, **spec} for name, spec in data.items()]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of hosts {{name, ip, mac, port}}")
    hosts = []
    for index, item in enumerate(data):
        where = f"{path}: host #{index}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {item!r}")
        try:
            host = Host(str(item.get("name", f"h{index}")), str(item["ip"]), str(item["mac"]), int(item["port"]),
                        str(item.get("role", "")))
            ipaddress.IPv4Address(host.ip)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{where}: needs ip (IPv4), mac and port: {exc}") from None
        if not _MAC.match(host.mac):
            raise ValueError(f"{where}: bad MAC {host.mac!r}")
        if not 0 <= host.port < 511:
            raise ValueError(f"{where}: port {host.port} outside 0..510")
        hosts.append(host)
    return hosts
