"""Fixtures: storage nodes on each backend, a node serving on a free loopback port in a thread, and a client.

`make_node` is parametrised over the backends, so a test taking it checks the KVP semantics on every backend:
`memory`, `mooncake-fake` (the mooncake backend over an in-process fake store: fast, always runs) and
`mooncake` (over a real `mooncake_master` this session starts; marked slow, skipped only when the `mooncake`
package is not installed).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kvpool.backends.mooncake import MooncakeBackend, MooncakeOptions, StoreClient
from kvpool.client import ClientOptions, KVPClient
from kvpool.server import StorageNode, StorageOptions
from kvpool.trust import DEFAULT_CONTROL_FROM, ControlSources
from tests.kvpool.fake_mooncake import FakeStore

MOONCAKE_SEGMENT = 64 << 20
"""Memory the test session's Mooncake client gives the pool."""

_namespaces = itertools.count()


@dataclass
class RealMooncake:
    """A master this session started and one client on it (tests share it, each in its own namespace)."""

    master: object
    store: StoreClient
    configs: tuple[object, object]

    def backend(self, **options) -> MooncakeBackend:
        mc = MooncakeOptions(self.master.master, self.master.metadata,  # type: ignore[attr-defined]
                             namespace=f"t{next(_namespaces)}", **options)
        return MooncakeBackend(self.store, mc, *self.configs, owns_store=False)


@pytest.fixture(scope="session")
def real_mooncake() -> Iterator[RealMooncake]:
    pytest.importorskip("mooncake.store", reason="the mooncake package is not installed: "
                        "pip install mooncake-transfer-engine-non-cuda==0.3.13.post1 (+ apt-get install libibverbs1)")
    from kvpool.backends.mooncake import open_store, replicate_configs
    from kvpool.mooncake_master import MooncakeMaster

    with MooncakeMaster.start() as master:
        options = MooncakeOptions(master.master, master.metadata)
        store = open_store(options, MOONCAKE_SEGMENT)
        try:
            yield RealMooncake(master, store, replicate_configs(options))
        finally:
            store.close()


BACKEND_PARAMS = ["memory", "mooncake-fake", pytest.param("mooncake", marks=pytest.mark.slow)]


@pytest.fixture(params=BACKEND_PARAMS)
def backend_name(request) -> str:
    return request.param


@pytest.fixture
def make_node(backend_name, request) -> Iterator[Callable[..., StorageNode]]:
    """make_node(**StorageOptions fields) -> a StorageNode on this test's backend (closed afterwards)."""
    made: list[StorageNode] = []

    def make(**options) -> StorageNode:
        node_options = StorageOptions(**options)
        if backend_name == "memory":
            node = StorageNode(node_options)
        elif backend_name == "mooncake-fake":
            node = StorageNode(node_options, backend=MooncakeBackend(FakeStore(), MooncakeOptions()))
        else:
            node = StorageNode(node_options, backend=request.getfixturevalue("real_mooncake").backend())
        made.append(node)
        return node

    yield make
    for node in made:
        node.close()


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
