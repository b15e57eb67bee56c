"""Fixtures of the engine tests: storage nodes serving on free loopback ports, in threads of this process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kvpool.server import StorageNode, StorageOptions


@dataclass
class RunningNode:
    node: StorageNode
    address: str
    """"127.0.0.1:PORT"."""


def _start(capacity: int) -> tuple[RunningNode, Callable[[], None]]:
    node = StorageNode(StorageOptions(host="127.0.0.1", port=0, capacity=capacity))
    sock = node.bind()
    stop = threading.Event()
    thread = threading.Thread(target=node.serve, args=(sock, stop, 0.05), daemon=True)
    thread.start()
    host, port = sock.getsockname()

    def halt() -> None:
        stop.set()
        thread.join(timeout=5)
        sock.close()
        node.close()

    return RunningNode(node, f"{host}:{port}"), halt


@pytest.fixture
def serve() -> Iterator[Callable[..., RunningNode]]:
    """serve(capacity=BYTES) -> a storage node on 127.0.0.1:<free port>, stopped after the test."""
    halts: list[Callable[[], None]] = []

    def start(capacity: int = 64 << 20) -> RunningNode:
        running, halt = _start(capacity)
        halts.append(halt)
        return running

    yield start
    for halt in halts:
        halt()


@pytest.fixture(scope="module")
def module_node() -> Iterator[RunningNode]:
    """One storage node for a whole module (the engine tests share it: each engine start is costly)."""
    running, halt = _start(256 << 20)
    yield running
    halt()


@pytest.fixture
def closed_port() -> str:
    """A loopback UDP address nothing listens on (bound, read, closed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        host, port = sock.getsockname()
    return f"{host}:{port}"
