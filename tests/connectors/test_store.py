"""PoolStore against a real storage node on loopback: one-round-trip probes, blocks, a full pool, a down pool."""

from __future__ import annotations

import logging

import pytest

from connectors import blockcodec
from connectors.breaker import BreakerOptions, CircuitBreaker
from connectors.identity import ModelIdentity, block_hashes
from connectors.store import PoolStore, auto_chunk_size
from kvpool.client import parse_address
from kvpool.transport import UdpTransport

TINY = ModelIdentity("kvswitch/tiny", "float32", 4, 2, 64, 256)
KEYS = block_hashes(list(range(3, 3 + 256 * 6)), TINY)


class RecordingTransport(UdpTransport):
    """A UDP transport that records the order of its sends and receives."""

    def __init__(self, address: str) -> None:
        super().__init__(parse_address(address))
        self.events: list[str] = []

    def send(self, data: bytes) -> None:
        self.events.append("send")
        super().send(data)

    def recv(self, timeout: float) -> bytes | None:
        data = super().recv(timeout)
        if data is not None:
            self.events.append("recv")
        return data


def test_put_get_round_trip_with_8k_chunks_on_loopback(serve) -> None:
    node = serve()
    with PoolStore(node.address, tenant=TINY.tenant()) as store:
        assert store.chunk_size == 8192
        blob = blockcodec.encode(TINY, bytes(range(256)) * 4096, KEYS[0])  # 1 MiB: 129 chunks
        assert store.put(KEYS[0], blob)
        assert store.get(KEYS[0]) == blob
        assert store.get(KEYS[1]) is None
    assert store.stats.puts == 1 and store.stats.gets == 1 and store.stats.get_misses == 1
    assert store.stats.bytes_read == store.stats.bytes_written == len(blob)


@pytest.mark.parametrize("probe", ["stat", "lookup_meta"])
def test_leading_hits_asks_every_key_in_one_round_trip(serve, probe: str) -> None:
    node = serve()
    with PoolStore(node.address, tenant=TINY.tenant()) as writer:
        for key in (KEYS[0], KEYS[1], KEYS[3]):  # a hole at 2: only two leading hits
            assert writer.put(key, b"block")
    transport = RecordingTransport(node.address)
    with PoolStore(node.address, tenant=TINY.tenant(), probe=probe, transport=transport) as store:  # type: ignore[arg-type]
        assert store.leading_hits(KEYS) == 2
        assert store.present(KEYS) == [True, True, False, True, False, False]
    first_probe = transport.events[:2 * len(KEYS)]
    assert first_probe == ["send"] * len(KEYS) + ["recv"] * len(KEYS)  # all sent before any reply is read
    assert node.node.counters["GET"] == 0  # no data moved
    assert store.stats.lookups == 12 and store.stats.hits == 6  # 3 stored keys, probed twice


def test_other_tenant_sees_nothing(serve) -> None:
    node = serve()
    with PoolStore(node.address, tenant=1) as one, PoolStore(node.address, tenant=2) as two:
        assert one.put(KEYS[0], b"block")
        assert one.leading_hits(KEYS[:1]) == 1
        assert two.leading_hits(KEYS[:1]) == 0 and two.get(KEYS[0]) is None


def test_full_pool_drops_saves_counts_them_and_logs_once(serve, caplog) -> None:
    node = serve(capacity=16 << 10)
    caplog.set_level(logging.WARNING)
    with PoolStore(node.address, chunk_size=1024) as store:
        assert store.put(KEYS[0], bytes(8 << 10))
        assert not store.put(KEYS[1], bytes(32 << 10))
        assert not store.put(KEYS[2], bytes(32 << 10))
        assert store.get(KEYS[0]) == bytes(8 << 10)  # what was stored stays readable
    assert store.stats.dropped_full == 2 and store.stats.failures == 0
    assert len([r for r in caplog.records if "full" in r.getMessage()]) == 1


def test_second_write_of_a_key_is_kept_as_present(serve) -> None:
    node = serve()
    with PoolStore(node.address) as store:
        assert store.put(KEYS[0], b"first")
        assert store.put(KEYS[0], b"other bytes")  # ERR_CONFLICT: the key is held, the first write stays
        assert store.get(KEYS[0]) == b"first"
    assert store.stats.conflicts == 1


def test_down_pool_answers_nothing_without_asking_again_and_logs_once(closed_port, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="connectors")
    transport = RecordingTransport(closed_port)
    store = PoolStore(closed_port, timeout_s=0.05, retries=1, transport=transport,  # type: ignore[arg-type]
                      breaker=BreakerOptions(backoff_s=3600, max_backoff_s=3600))
    with store:
        assert store.leading_hits(KEYS) == 0  # the one call that waits: 2 tries of 0.05 s
        sent = transport.events.count("send")
        for _ in range(20):
            assert store.leading_hits(KEYS) == 0
            assert store.get(KEYS[0]) is None
            assert store.put(KEYS[0], b"x") is False
        assert transport.events.count("send") == sent  # the breaker kept every later call off the network
    assert store.stats.failures == 1 and store.stats.skipped == 60
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unreachable" in warnings[0].getMessage()


def test_breaker_backs_off_doubling_and_closes_on_success(caplog) -> None:
    now = [0.0]
    breaker = CircuitBreaker("pool x", BreakerOptions(backoff_s=1.0, max_backoff_s=4.0), clock=lambda: now[0])
    caplog.set_level(logging.DEBUG)
    assert breaker.allow()
    breaker.failure(TimeoutError("t"))
    assert not breaker.allow()
    now[0] = 1.0
    assert breaker.allow()  # half open: one try
    breaker.failure(TimeoutError("t"))
    now[0] = 2.9
    assert not breaker.allow()  # backed off 2 s
    now[0] = 3.0
    assert breaker.allow()
    for _ in range(5):
        breaker.failure(TimeoutError("t"))
    now[0] += 3.9
    assert not breaker.allow()  # capped at 4 s
    now[0] += 0.1
    assert breaker.allow()
    breaker.success()
    assert breaker.allow() and not breaker.is_open
    assert breaker.outages == 1 and breaker.trips == 7
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert sum("reachable again" in r.getMessage() for r in caplog.records) == 1


def test_auto_chunk_size_only_on_loopback() -> None:
    assert auto_chunk_size("127.0.0.1") == 8192 and auto_chunk_size("localhost") == 8192
    assert auto_chunk_size("10.0.0.200") is None


def test_parallel_reader_returns_blocks_in_order_and_shares_one_breaker(serve, closed_port, caplog) -> None:
    from connectors.fetch import ParallelReader

    node = serve()
    with PoolStore(node.address, tenant=7) as writer:
        for i, key in enumerate(KEYS[:4]):
            assert writer.put(key, bytes([i]) * (100_000 + i))
    reader = ParallelReader(lambda: PoolStore(node.address, tenant=7), workers=3)
    try:
        blocks = list(reader.get_many(KEYS))
    finally:
        reader.close()
    assert blocks[:4] == [bytes([i]) * (100_000 + i) for i in range(4)] and blocks[4:] == [None, None]
    assert reader.stats().gets == 4 and reader.stats().get_misses == 2

    caplog.set_level(logging.WARNING)
    shared = CircuitBreaker(f"pool {closed_port}", BreakerOptions(backoff_s=3600, max_backoff_s=3600))
    down = ParallelReader(lambda: PoolStore(closed_port, timeout_s=0.05, retries=0, breaker=shared), workers=3)
    try:
        assert list(down.get_many(KEYS)) == [None] * len(KEYS)
    finally:
        down.close()
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert down.stats().failures + down.stats().skipped == len(KEYS)


def test_saver_process_writes_what_the_pool_lacks(serve) -> None:
    from connectors.saver import SaverProcess

    node = serve()
    with PoolStore(node.address, tenant=TINY.tenant()) as store:
        assert store.put(KEYS[0], blockcodec.encode(TINY, b"already there", KEYS[0]))
        saver = SaverProcess(node.address, {"tenant": TINY.tenant(), "timeout_s": 0.5}, queue_size=8)
        for key in KEYS[:3]:
            assert saver.submit(key, TINY, key.to_bytes(8, "big") * 1000)
        saver.close(timeout=30)
        counters = saver.counters()
        assert counters["saved_blocks"] == 2 and counters["save_skipped_present"] == 1
        assert counters["saved_bytes"] == 2 * 8000
        assert blockcodec.decode(TINY, store.get(KEYS[0]), KEYS[0]) == b"already there"
        for key in KEYS[1:3]:
            assert blockcodec.decode(TINY, store.get(key), key) == key.to_bytes(8, "big") * 1000


def test_saver_process_counts_saves_a_full_pool_drops(serve) -> None:
    from connectors.saver import SaverProcess

    node = serve(capacity=16 << 10)
    saver = SaverProcess(node.address, {"tenant": TINY.tenant(), "chunk_size": 1024}, queue_size=8)
    for key in KEYS[:3]:
        assert saver.submit(key, TINY, bytes(32 << 10))  # each larger than the whole pool
    saver.close(timeout=30)
    counters = saver.counters()
    assert counters["save_dropped_full"] == 3 and counters["save_failed"] == 3 and counters["saved_blocks"] == 0
