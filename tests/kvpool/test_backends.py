"""The storage backends themselves: the registry, and the mooncake backend's mapping onto Mooncake Store
(one object per committed version, the newest-version record, the per-block cache, eviction, restarts).

Most tests use the in-process `FakeStore`; the ones marked slow run a real `mooncake_master` (and one runs
`python -m kvpool.server --backend mooncake` as a process) and are skipped only without the mooncake package.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from kvpool.backends import open_backend
from kvpool.backends.memory import MemoryBackend
from kvpool.backends.mooncake import BackendUnavailable, MooncakeBackend, MooncakeOptions
from kvpool.blocks import split
from kvpool.client import ClientOptions, KVPClient
from kvpool.constants import KVP_HEADER_LEN, Opcode, Status, Tier
from kvpool.keys import ChunkKey
from kvpool.server import StorageNode, StorageOptions
from kvpool.wire import Header, encode
from tests.kvpool.fake_mooncake import FakeStore

WRITER, READER = ("10.0.0.1", 5001), ("10.0.0.9", 6000)
NEEDS_MOONCAKE = "the mooncake package is not installed: pip install mooncake-transfer-engine-non-cuda==0.3.13.post1"


def mooncake_node(store: FakeStore, **options) -> StorageNode:
    return StorageNode(StorageOptions(), backend=MooncakeBackend(store, MooncakeOptions(**options)))


def write(n: StorageNode, ph: int, data: bytes, version: int, writer=WRITER, chunk_len: int = 128) -> set[Status]:
    """PUT a whole block; the set of ack verdicts (STAGED progress acks left out)."""
    out = []
    for c in split(data, version, chunk_len):
        out += n.receive(encode(Header(Opcode.PUT, req_id=c.idx, prefix_hash=ph, chunk_idx=c.idx,
                                       chunk_count=c.count, version=version, chunk_shift=chunk_len.bit_length() - 1),
                                c.value[:c.value_len]), writer)
    return {Status(Header.unpack(d.data).status) for d in out} - {Status.STAGED}


def get(n: StorageNode, ph: int, idx: int, count: int, opcode: Opcode = Opcode.GET) -> tuple[Header, bytes]:
    out = n.receive(Header(opcode, prefix_hash=ph, chunk_idx=idx, chunk_count=count).pack(), READER)
    return Header.unpack(out[0].data), out[0].data[KVP_HEADER_LEN:]


def test_registry_opens_memory_by_default_and_refuses_unknown_names_and_foreign_options(tmp_path):
    assert isinstance(open_backend("memory", capacity=128), MemoryBackend)
    with pytest.raises(ValueError, match="unknown storage backend 'redis'"):
        open_backend("redis", capacity=128)
    with pytest.raises(ValueError, match="--disk"):
        open_backend("mooncake", capacity=128, disk=tmp_path)


def test_an_unreachable_master_is_reported_at_once_not_retried_for_ever():
    pytest.importorskip("mooncake.store", reason=NEEDS_MOONCAKE)
    options = MooncakeOptions(master="127.0.0.1:1", metadata="http://127.0.0.1:1/metadata")
    with pytest.raises(BackendUnavailable, match="does not answer"):
        open_backend("mooncake", capacity=1 << 20, mooncake=options)


def test_the_segment_is_published_at_the_nodes_own_address_not_its_first_interfaces(monkeypatch):
    """Mooncake's transfer engine publishes MC_TCP_BIND_ADDRESS (else the first interface's address) as where
    other clients reach this node's segment; in the testbed that first interface is the management link, which
    the other storage nodes cannot reach (most PUTs of a pool refused). open_store sets it to local_hostname,
    for its setup only (no leak into later stores or child processes), unless the user set it."""
    import socketserver
    import threading
    import types

    from kvpool.backends import mooncake

    seen: list[str | None] = []

    class Client:
        def setup(self, *args) -> int:
            seen.append(os.environ.get(mooncake.BIND_ADDRESS_ENV))
            return 0

    monkeypatch.setattr(mooncake, "_mooncake_store", lambda: types.SimpleNamespace(MooncakeDistributedStore=Client))
    with socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler) as listener:
        threading.Thread(target=listener.serve_forever, daemon=True).start()
        port = listener.server_address[1]
        options = MooncakeOptions(f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/metadata", local_hostname="10.0.0.101")
        monkeypatch.setenv(mooncake.BIND_ADDRESS_ENV, "")  # so that monkeypatch restores the caller's value
        monkeypatch.delenv(mooncake.BIND_ADDRESS_ENV)
        mooncake.open_store(options, 1 << 20)
        # ours is not left behind: a second store (another address) and the processes this one starts get theirs
        assert mooncake.BIND_ADDRESS_ENV not in os.environ
        mooncake.open_store(dataclasses.replace(options, local_hostname="10.0.0.102"), 1 << 20)
        monkeypatch.setenv(mooncake.BIND_ADDRESS_ENV, "192.0.2.7")
        mooncake.open_store(options, 1 << 20)
        assert os.environ[mooncake.BIND_ADDRESS_ENV] == "192.0.2.7"
        listener.shutdown()
    assert seen == ["10.0.0.101", "10.0.0.102", "192.0.2.7"]


def test_a_commit_is_one_object_per_version_plus_a_record_and_replaces_the_older_object():
    store = FakeStore()
    n = mooncake_node(store)
    assert write(n, 0xAB, b"a" * 300, 1) == {Status.OK}
    assert store.calls["put"] == 1 and set(store.objects) == {"kvp/0/00000000000000ab/v1", "kvp/0/00000000000000ab/newest"}
    assert write(n, 0xAB, b"b" * 300, 2) == {Status.OK}
    assert set(store.objects) == {"kvp/0/00000000000000ab/v2", "kvp/0/00000000000000ab/newest"}


def test_gets_of_every_chunk_of_a_block_fetch_it_once():
    store = FakeStore()
    n = mooncake_node(store)
    write(n, 1, bytes(range(256)) * 4, 1)  # 8 chunks
    fresh = mooncake_node(store)  # a node with an empty cache over the same store
    before = store.calls["get"]
    values = [get(fresh, 1, i, 8)[1] for i in range(8)]
    assert b"".join(values) == bytes(range(256)) * 4
    assert store.calls["get"] - before == 2  # the record once, the block object once


@pytest.mark.parametrize("cache_bytes", [MooncakeOptions().cache_bytes, 0])
def test_a_span_get_over_mooncake_serves_each_chunk_from_one_fetch_of_the_block(cache_bytes):
    store = FakeStore()
    data = bytes(i % 251 for i in range(20 * 1024))
    assert write(mooncake_node(store), 0x5A, data, 1, chunk_len=1024) == {Status.OK}
    fresh = mooncake_node(store, cache_bytes=cache_bytes)  # an empty cache over the same store
    before = store.calls["get"]
    out = fresh.receive(Header(Opcode.GET, req_id=50, prefix_hash=0x5A, chunk_idx=16, chunk_count=20, chunk_shift=10,
                               aux=8).pack(), READER)
    replies = [(Header.unpack(d.data), d.data[KVP_HEADER_LEN:]) for d in out]
    assert [(h.status, h.chunk_idx, h.req_id, h.aux) for h, _ in replies] == [
        (Status.HIT_SERVER, 16 + i, 50 + i, i) for i in range(4)]
    assert b"".join(value for _, value in replies) == data[16 * 1024:]
    fetches = store.calls["get"] - before
    assert fetches == (2 if cache_bytes else 5)  # the record, then the block object once, or once per chunk


def test_a_commit_invalidates_the_cached_older_version():
    store = FakeStore()
    n = mooncake_node(store)
    write(n, 1, b"old" * 50, 1)
    assert get(n, 1, 0, 2)[1][:3] == b"old"
    write(n, 1, b"new" * 50, 2)
    reply, value = get(n, 1, 0, 2)
    assert (reply.version, value[:3]) == (2, b"new")


def test_a_restarted_node_serves_the_block_and_still_refuses_other_bytes_for_its_version():
    store = FakeStore()
    write(mooncake_node(store), 5, b"kept" * 40, 3)
    again = mooncake_node(store)
    reply, value = get(again, 5, 1, 2)
    assert (reply.status, reply.version, value[:4]) == (Status.HIT_SERVER, 3, b"kept")
    assert write(again, 5, b"evil" * 40, 3) == {Status.ERR_CONFLICT}
    assert write(again, 5, b"old!" * 40, 2) == {Status.ERR_STALE}


@pytest.mark.parametrize("backend", ["memory", "mooncake-fake"])
def test_a_block_of_more_than_255_large_chunks_is_served_chunk_by_chunk_after_a_restart(backend):
    store = FakeStore()

    def start() -> StorageNode:
        return StorageNode(StorageOptions()) if backend == "memory" else mooncake_node(store, cache_bytes=0)

    n = start()
    data = bytes(i % 251 for i in range(400 * 1024 - 5))  # 400 chunks of 1 KiB (protocol v2)
    assert write(n, 0x400, data, 2, chunk_len=1024) == {Status.OK}
    again = n if backend == "memory" else start()  # the record (count, chunk size, lens, CRCs) read back
    reply, value = get(again, 0x400, 399, 400)
    assert (reply.status, reply.chunk_count, reply.chunk_shift, reply.value_len) == (Status.HIT_SERVER, 400, 10, 1019)
    assert value[:1019] == data[399 * 1024:] and len(value) == 1024
    assert write(again, 0x400, bytes(len(data)), 2, chunk_len=1024) == {Status.ERR_CONFLICT}


def test_an_object_evicted_by_mooncake_is_a_miss_and_its_version_stays_taken():
    store = FakeStore()
    n = mooncake_node(store, cache_bytes=0)
    write(n, 7, b"x" * 200, 4)
    del store.objects["kvp/0/0000000000000007/v4"]  # Mooncake's eviction
    assert get(n, 7, 0, 2)[0].status == Status.MISS
    assert get(n, 7, 0, 2, Opcode.STAT)[0].status == Status.MISS
    assert write(n, 7, b"y" * 200, 4) == {Status.ERR_STALE}
    assert write(n, 7, b"y" * 200, 5) == {Status.OK}


def test_a_corrupted_object_is_a_miss_never_a_wrong_value():
    store = FakeStore()
    n = mooncake_node(store, cache_bytes=0)
    write(n, 8, b"z" * 200, 1)
    name = "kvp/0/0000000000000008/v1"
    store.objects[name] = store.objects[name][:-1] + b"!"
    assert get(n, 8, 1, 2)[0].status == Status.MISS
    assert n.backend.summary()["mooncake"]["corrupt"] == 1  # type: ignore[index]


def test_an_object_no_record_names_is_replaced_by_the_next_commit_of_its_version():
    store = FakeStore()
    store.objects["kvp/0/0000000000000009/v1"] = b"left by a crash before its record was written"
    n = mooncake_node(store)
    assert write(n, 9, b"real" * 10, 1) == {Status.OK}
    assert get(mooncake_node(store), 9, 0, 1)[1][:4] == b"real"


def test_a_refused_put_is_err_full_for_the_whole_block_and_changes_nothing():
    store = FakeStore()
    n = mooncake_node(store)
    store.refuse_puts = True
    assert write(n, 3, b"q" * 400, 1) == {Status.ERR_FULL}
    assert get(n, 3, 0, 4)[0].status == Status.MISS and store.objects == {}


def test_dropping_every_chunk_removes_the_object_but_keeps_the_record():
    store = FakeStore()
    n = mooncake_node(store)
    write(n, 4, b"w" * 200, 2)
    for i in range(2):
        reply = Header.unpack(n.handle(Header(Opcode.TIER_MOVE, prefix_hash=4, chunk_idx=i, chunk_count=2,
                                              aux=Tier.ABSENT).pack()))
        assert (reply.status, reply.aux) == (Status.OK, Tier.ABSENT)
    assert set(store.objects) == {"kvp/0/0000000000000004/newest"}
    assert write(mooncake_node(store), 4, b"v" * 200, 2) == {Status.ERR_STALE}


def test_tier_move_to_dram_records_the_score_and_disk_is_refused():
    n = mooncake_node(FakeStore())
    write(n, 6, b"s", 1)
    moved = Header.unpack(n.handle(Header(Opcode.TIER_MOVE, prefix_hash=6, aux=Tier.STORAGE_DRAM | 1500 << 8).pack()))
    assert (moved.status, moved.aux) == (Status.OK, Tier.STORAGE_DRAM)
    assert n.backend.chunk(ChunkKey(0, 6, 0)).score == 1.5  # type: ignore[union-attr]
    denied = Header.unpack(n.handle(Header(Opcode.TIER_MOVE, prefix_hash=6, aux=Tier.STORAGE_DISK).pack()))
    assert (denied.status, denied.aux) == (Status.ERR_DENIED, Tier.STORAGE_DRAM)


def test_block_objects_carry_the_replica_and_soft_pin_config_and_records_the_hard_pin():
    store = FakeStore()
    block_config, record_config = object(), object()
    n = StorageNode(StorageOptions(), backend=MooncakeBackend(store, MooncakeOptions(), block_config, record_config))
    write(n, 2, b"c", 1)
    assert store.configs == {"kvp/0/0000000000000002/v1": block_config, "kvp/0/0000000000000002/newest": record_config}


@pytest.mark.slow
def test_the_real_store_behaves_as_the_fake_assumes(real_mooncake):
    """put never overwrites (and says 0), upsert does, get of a missing key is b"", is_exist is 1 / 0."""
    store, prefix = real_mooncake.store, f"probe{time.monotonic_ns()}"
    assert store.put(f"{prefix}/a", b"first") == 0 and store.put(f"{prefix}/a", b"second") == 0
    assert store.get(f"{prefix}/a") == b"first"
    assert store.upsert(f"{prefix}/r", b"1") == 0 and store.upsert(f"{prefix}/r", b"22") == 0
    assert store.get(f"{prefix}/r") == b"22"
    assert store.get(f"{prefix}/missing") == b"" and store.is_exist(f"{prefix}/missing") == 0
    assert store.is_exist(f"{prefix}/a") == 1 and store.remove(f"{prefix}/a", True) == 0
    assert store.is_exist(f"{prefix}/a") == 0


@pytest.mark.slow
def test_the_server_process_on_mooncake_round_trips_blocks_through_a_client(tmp_path):
    pytest.importorskip("mooncake.store", reason=NEEDS_MOONCAKE)
    from kvpool.mooncake_master import MooncakeMaster, free_port

    port = free_port()
    env = {**os.environ, "GLOG_minloglevel": "2"}
    with MooncakeMaster.start() as master:
        server = subprocess.Popen([sys.executable, "-m", "kvpool.server", "--host", "127.0.0.1", "--port", str(port),
                                   "--backend", "mooncake", "--mooncake-master", master.master,
                                   "--mooncake-metadata", master.metadata, "--capacity", str(32 << 20)],
                                  env=env, stderr=subprocess.PIPE, text=True)
        try:
            client = KVPClient(ClientOptions(server=("127.0.0.1", port), timeout=0.5, retries=20))
            data = os.urandom(5000)
            client.put_block(0xFEED, data, version=1)
            assert client.get_block(0xFEED).data == data
            client.put_block(0xFEED, data[::-1], version=2)
            assert client.get_block(0xFEED).data == data[::-1]
        finally:
            server.terminate()
            _, err = server.communicate(timeout=10)
    summary = json.loads(err.rsplit("kvpool.server: stopped ", 1)[1].splitlines()[0])
    assert server.returncode == 0 and summary["backend"] == "mooncake" and summary["counters"]["put.committed"] == 2


@pytest.mark.slow
def test_the_master_helper_stops_the_master_it_started():
    pytest.importorskip("mooncake.store", reason=NEEDS_MOONCAKE)
    from kvpool.mooncake_master import MooncakeMaster

    with MooncakeMaster.start() as master:
        assert master.process.poll() is None
    assert master.process.poll() is not None
