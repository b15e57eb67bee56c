"""The whole switch in one process, for tests and benchmarks of the control plane: the embedded target running
p4src/kvswitch.p4 behind its real P4Runtime server on loopback gRPC, a client port whose frames are collected,
and a storage-node port wired to a real `kvpool.server.StorageNode` object (a GET is one synchronous round trip).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
"""The repository (p4src/ lives there)."""
PROGRAM = ROOT / "p4src" / "kvswitch.p4"
CPU_PORT = 255
CLIENT: dict[str, Any] = {"name": "h1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1}
STORAGE: dict[str, Any] = {"name": "storage", "ip": "10.0.0.100", "mac": "02:00:00:00:00:64", "port": 2, "role": "storage"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compile_program(out: Path) -> tuple[Path, Path]:
    """P4Info and device config of p4src/kvswitch.p4 for the embedded target (softswitch.compile)."""
    from softswitch import compile as compiler

    compiled = compiler.compile_program(PROGRAM)
    p4info, config = out / "kvswitch.p4info.txtpb", out / "kvswitch.json"
    compiler.write_p4info(compiled.p4info, p4info)
    config.write_bytes(compiled.device_config)
    return p4info, config


class InProcessSwitch:
    """The embedded switch with its P4Runtime server on loopback, packets injected and collected in-process.

    Port 2 is wired to a real storage node object: whatever the switch sends there is answered at once (with
    addresses swapped) and the answer re-enters port 2, so a GET is one synchronous round trip.
    """

    def __init__(self) -> None:
        from kvpool.server import StorageNode, StorageOptions
        from softswitch.p4runtime.device import Device
        from softswitch.p4runtime.device_config import load_bundle
        from softswitch.p4runtime.server import P4RuntimeServer

        self.storage = StorageNode(StorageOptions("127.0.0.1", 0, 64 << 20, None))
        self.device = Device(0, CPU_PORT, self._send)
        self.server = P4RuntimeServer(self.device, load_bundle)
        self.to_client: list[bytes] = []
        self.digest_times: list[float] = []
        forward = self.device.on_digests

        def on_digests(messages) -> None:
            self.digest_times.append(time.perf_counter())
            forward(messages)

        self.device.on_digests = on_digests
        self.address = ""

    def start(self) -> str:
        from softswitch.p4runtime.server import ServerOptions

        port = self.server.start(ServerOptions("127.0.0.1:0"))
        self.address = f"127.0.0.1:{port}"
        return self.address

    def stop(self) -> None:
        self.server.stop()

    def _send(self, port: int, frame: bytes) -> None:
        if port == CLIENT["port"]:
            self.to_client.append(frame)
        elif port == STORAGE["port"]:
            for reply in self._storage_replies(frame):
                self.device.receive(STORAGE["port"], reply)

    def _storage_replies(self, frame: bytes) -> list[bytes]:
        """The node's answers to `frame` (a span GET has one per chunk), back to the sender."""
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether

        packet = Ether(frame)
        if UDP not in packet:
            return []
        sender = (packet[IP].src, packet[UDP].sport)
        return [bytes(Ether(src=packet.dst, dst=packet.src) / IP(src=packet[IP].dst, dst=packet[IP].src)
                      / UDP(sport=packet[UDP].dport, dport=packet[UDP].sport, chksum=0) / b"".join(out.parts))
                for out in self.storage.receive(bytes(packet[UDP].payload), sender) if out.to == sender]

    def put(self, tenant: int, prefix_hash: int, value: bytes, version: int = 1) -> None:
        from kvpool import wire
        from kvpool.constants import Opcode

        header = wire.Header(Opcode.PUT, tenant=tenant, prefix_hash=prefix_hash, version=version)
        self.storage.handle(wire.encode(header, value))

    def get(self, tenant: int, prefix_hash: int, req_id: int) -> int | None:
        """One GET from the client port; the status of the reply that came back (None: no reply)."""
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether

        from kvpool import wire
        from kvpool.constants import KVP_HEADER_LEN, Opcode

        header = wire.Header(Opcode.GET, tenant=tenant, req_id=req_id, prefix_hash=prefix_hash)
        frame = bytes(Ether(src=CLIENT["mac"], dst=STORAGE["mac"]) / IP(src=CLIENT["ip"], dst=STORAGE["ip"])
                      / UDP(sport=40000, dport=7420) / header.pack())
        self.to_client.clear()
        self.device.receive(CLIENT["port"], frame)
        for reply in self.to_client:
            payload = bytes(Ether(reply)[UDP].payload)
            if len(payload) >= KVP_HEADER_LEN:
                got = wire.Header.unpack(payload)
                if got.req_id == req_id and got.opcode == Opcode.GET_REPLY:
                    return got.status
        return None
