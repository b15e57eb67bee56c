"""Fixtures: a storage node serving on a free loopback port in a thread, and a client pointed at it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kvpool.client import ClientOptions, KVPClient
from kvpool.server import StorageNode, StorageOptions
from kvpool.trust import DEFAULT_CONTROL_FROM, ControlSources


@dataclass
class RunningNode:
    node: StorageNode
    address: tuple[str, int]

    def client(self, **options) -> KVPClient:
        return KVPClient(ClientOptions(server=self.address, timeout=0.3, retries=2, **options))


@pytest.fixture
def serve(tmp_path) -> Iterator:
    """serve(capacity=..., disk=True, control_from=CIDRS) starts a node on 127.0.0.1:<free port>; all are
    stopped afterwards."""
    running: list[tuple[threading.Thread, threading.Event, StorageNode]] = []

    def start(capacity: int = 1 << 20, disk: bool = False, control_from: str = DEFAULT_CONTROL_FROM) -> RunningNode:
        node = StorageNode(StorageOptions(host="127.0.0.1", port=0, capacity=capacity,
                                          disk=tmp_path / f"disk{len(running)}" if disk else None,
                                          control_from=ControlSources.parse(control_from)))
        sock = node.bind()
        stop = threading.Event()
        thread = threading.Thread(target=node.serve, args=(sock, stop, 0.05), daemon=True)
        thread.start()
        running.append((thread, stop, node))
        return RunningNode(node, sock.getsockname())

    yield start
    for thread, stop, node in running:
        stop.set()
        thread.join(timeout=2)
        node.close()
