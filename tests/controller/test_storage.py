"""The controller's UDP client for TIER_MOVE / STAT against a real storage node (kvpool.server) on loopback."""

from __future__ import annotations

import socket
import threading

import pytest

from controller.storage import StorageClientOptions, UdpStorageNode
from controller.tiers import TierMap, TierMover
from kvpool import wire
from kvpool.client import parse_address
from kvpool.constants import KVP_UDP_PORT, Opcode
from kvpool.keys import ChunkKey
from kvpool.server import StorageNode
from kvpool.server import StorageOptions as NodeOptions
from policies.base import Tier


@pytest.fixture
def node(tmp_path):
    server = StorageNode(NodeOptions("127.0.0.1", 0, 1 << 20, tmp_path / "disk"))
    sock = server.bind()
    stop = threading.Event()
    thread = threading.Thread(target=server.serve, args=(sock, stop, 0.05), daemon=True)
    thread.start()
    yield server, sock.getsockname()[1]
    stop.set()
    thread.join()
    sock.close()
    server.close()


def put(port: int, key: ChunkKey, value: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        header = wire.Header(Opcode.PUT, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk,
                             chunk_count=key.chunk + 1, version=1)
        s.sendto(wire.encode(header, value), ("127.0.0.1", port))
        s.recvfrom(2048)


def test_demote_to_disk_and_promote_back_are_acknowledged(node):
    server, port = node
    key = ChunkKey(1, 0xFEED, 0)
    put(port, key, b"block")
    mover = TierMover(TierMap(), UdpStorageNode(StorageClientOptions("127.0.0.1", port)))
    assert mover.to_disk(key)
    assert server.backend.chunk(key).tier == Tier.STORAGE_DISK
    assert mover.tiers.storage_tier(key) is Tier.STORAGE_DISK
    assert mover.demote(key, residual=2.5)
    stored = server.backend.chunk(key)
    assert stored.tier == Tier.STORAGE_DRAM and stored.score == pytest.approx(2.5)


def test_tier_move_of_an_unknown_chunk_fails_and_changes_nothing(node):
    _, port = node
    mover = TierMover(TierMap(), UdpStorageNode(StorageClientOptions("127.0.0.1", port)))
    assert not mover.demote(ChunkKey(1, 0xDEAD, 0), 1.0)
    assert mover.tiers.storage_tier(ChunkKey(1, 0xDEAD, 0)) is Tier.ABSENT


def test_stat_counts_gets(node):
    _, port = node
    key = ChunkKey(2, 0x1, 0)
    put(port, key, b"x")
    client = UdpStorageNode(StorageClientOptions("127.0.0.1", port))
    assert client.stat(key) == 0


def test_silent_node_times_out_quietly():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        client = UdpStorageNode(StorageClientOptions("127.0.0.1", s.getsockname()[1], timeout=0.05))
        assert client.tier_move(ChunkKey(1, 1, 0), Tier.STORAGE_DRAM) is False
        assert client.stat(ChunkKey(1, 1, 0)) is None


@pytest.mark.parametrize("text", ["nohost:", ":7420", "h:99999", "h:x", "h:-1", "h:0"])
def test_bad_storage_address_is_rejected(text):
    with pytest.raises(ValueError, match="bad address"):
        parse_address(text)


def test_port_zero_means_any_free_port_only_where_the_controller_listens():
    assert parse_address("127.0.0.1:0", 9090, listening=True) == ("127.0.0.1", 0)
    assert parse_address("10.0.0.100") == ("10.0.0.100", KVP_UDP_PORT)
