"""The host plan (hosts.json) the controller installs L3 forwarding from: which IP lives behind which port."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path

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
            host = Host(str(item.get("name", f"h{index}")), str(item["ip"]), str(item["mac"]), int(item["port"]))
            ipaddress.IPv4Address(host.ip)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{where}: needs ip (IPv4), mac and port: {exc}") from None
        if not _MAC.match(host.mac):
            raise ValueError(f"{where}: bad MAC {host.mac!r}")
        if not 0 <= host.port < 511:
            raise ValueError(f"{where}: port {host.port} outside 0..510")
        hosts.append(host)
    return hosts
