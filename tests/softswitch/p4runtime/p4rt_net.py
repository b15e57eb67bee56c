"""veth pairs for the real-port tests. Names start with `sswp` (this suite's prefix on this machine)."""

from __future__ import annotations

import socket
import subprocess
import time

PREFIX = "sswp"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class VethPairs:
    """Creates `sswp{tag}{i}a` <-> `sswp{tag}{i}b` pairs; `a` ends go to the switch, `b` ends to the test."""

    def __init__(self, tag: str, count: int) -> None:
        self.pairs: list[tuple[str, str]] = []
        for i in range(count):
            a, b = f"{PREFIX}{tag}{i}a", f"{PREFIX}{tag}{i}b"
            ip("link", "del", a, check=False)
            ip("link", "add", a, "type", "veth", "peer", "name", b)
            self.pairs.append((a, b))
            for end in (a, b):
                ip("link", "set", end, "mtu", "9000")
                # no IPv6 autoconf chatter on the test ends: only our frames cross the links
                subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=False,
                               capture_output=True)
                ip("link", "set", end, "up")

    def close(self) -> None:
        for a, _ in self.pairs:
            ip("link", "del", a, check=False)


class Tap:
    """A raw socket on a test-side veth end: send frames, collect what arrives."""

    def __init__(self, iface: str) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind((iface, 0))
        self.sock.settimeout(0.05)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def receive(self, timeout: float = 2.0, want=lambda f: True) -> bytes | None:
        """The next incoming frame satisfying `want`, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                frame, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            if addr[2] != 4 and want(frame):  # 4 = PACKET_OUTGOING: our own sends
                return frame
        return None

    def drain(self) -> None:
        while self.receive(timeout=0.1) is not None:
            pass

    def close(self) -> None:
        self.sock.close()
