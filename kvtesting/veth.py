"""veth pairs between a switch process and the test: one pair per switch port, names `rtg…` only.

The switch end (`rtg{tag}s{port}`) is handed to the switch with `-i PORT@IFACE`; the test keeps the peer
(`rtg{tag}h{port}`) and reaches it through one AF_PACKET socket each (`HostPorts`). Interface names are
global on the machine, so every name carries the `rtg` prefix this suite owns and a per-process tag.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

PREFIX = "rtg"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
"""sll_pkttype of frames we sent ourselves (the kernel echoes them to every packet socket on the device)."""
MAX_FRAME = 65535


class VethError(Exception):
    """A veth pair could not be created (not root, name taken by someone else, no `ip`)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise VethError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


OFFLOADS = ("rx", "tx", "sg", "tso", "ufo", "gso", "gro", "lro", "rxvlan", "txvlan", "rxhash")
"""Turned off as BMv2's own veth_setup.sh does: no merged or checksum-less frames reach the switch."""


def _offloads_off(iface: str) -> None:
    ethtool = shutil.which("ethtool")
    if ethtool is None:
        return  # veth's offloads only touch kernel-built traffic; our raw frames go through unchanged
    # one call: ethtool applies what the device supports and complains about the rest (ufo on new kernels)
    subprocess.run([ethtool, "--offload", iface, *(a for f in OFFLOADS for a in (f, "off"))],
                   capture_output=True, check=False)


@dataclass(frozen=True)
class VethPair:
    port: int
    """The P4 port number the switch end is attached as."""
    switch_end: str
    host_end: str


class VethPairs:
    """Creates (and on `close`, deletes) one veth pair per switch port, all ends up, IPv6 off, MTU 9000."""

    def __init__(self, ports: Iterable[int], tag: str | None = None) -> None:
        tag = tag or f"{os.getpid() % 10000:04d}"
        self.pairs: tuple[VethPair, ...] = tuple(
            VethPair(p, f"{PREFIX}{tag}s{p}", f"{PREFIX}{tag}h{p}") for p in ports)
        for pair in self.pairs:
            if len(pair.switch_end) > 15:
                raise VethError(f"interface name {pair.switch_end!r} is longer than Linux's 15 characters")

    def __iter__(self) -> Iterator[VethPair]:
        return iter(self.pairs)

    def create(self) -> VethPairs:
        try:
            for pair in self.pairs:
                _ip("link", "del", pair.switch_end, check=False)  # left over from a killed run of ours
                _ip("link", "add", pair.switch_end, "type", "veth", "peer", "name", pair.host_end)
                for end in (pair.switch_end, pair.host_end):
                    # no IPv6 autoconfiguration chatter: only the test's frames cross the link
                    subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{end}.disable_ipv6=1"],
                                   capture_output=True, check=False)
                    _ip("link", "set", end, "mtu", "9000")
                    _ip("link", "set", end, "up")
                    _offloads_off(end)
        except VethError:
            self.close()
            raise
        return self

    def close(self) -> None:
        for pair in self.pairs:
            _ip("link", "del", pair.switch_end, check=False)

    def switch_args(self) -> list[str]:
        """`-i PORT@IFACE` for every pair, as simple_switch_grpc and the softswitch take them."""
        return [a for pair in self.pairs for a in ("-i", f"{pair.port}@{pair.switch_end}")]


class HostPorts:
    """The test's side of the veth pairs: one bound, non-blocking AF_PACKET socket per switch port."""

    def __init__(self, pairs: Iterable[VethPair]) -> None:
        self.socks: dict[int, socket.socket] = {}
        for pair in pairs:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.bind((pair.host_end, 0))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.setblocking(False)
            self.socks[pair.port] = sock
        self.port_of_fd = {s.fileno(): p for p, s in self.socks.items()}

    def send(self, port: int, frame: bytes) -> None:
        self.socks[port].send(frame)

    def receive_ready(self, port: int) -> list[bytes]:
        """Every frame waiting on `port`'s peer that the switch sent (our own transmissions skipped)."""
        sock, out = self.socks[port], list[bytes]()
        while True:
            try:
                frame, addr = sock.recvfrom(MAX_FRAME)
            except BlockingIOError:
                return out
            if addr[2] != PACKET_OUTGOING:
                out.append(frame)

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()
