"""The client under loss: windowed reads and writes, resends, never a false failure, never two versions.

Unit level: an in-process node behind `LocalTransport`, with `LossyTransport` dropping datagrams (seeded), on
simulated time (`SimTransport`): the client's timers run on a clock that moves only while the client waits for
a reply that cannot come, so a request is resent exactly when its request or reply was lost, however slowly
the test runs (on real time, a loaded machine made the client resend answered requests, then run out of tries).
Process level: a real UDP proxy that drops datagrams between a client socket and a node's socket; real time
there, with enough tries that a slow machine only costs resends.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import threading

import pytest

from kvpool.blocks import SMALL_BLOCK_LEN
from kvpool.client import ClientOptions, KVPClient, KVPError
from kvpool.constants import CHUNK_SIZES, Opcode, Status
from kvpool.server import StorageNode, StorageOptions
from kvpool.transport import LocalTransport, LossyTransport
from kvpool.wire import Header

OPTIONS = ClientOptions(timeout=0.005, retries=30)
"""Short timers (simulated: they cost no real time): an in-process node answers inside `send`."""


class SimClock:
    """Simulated seconds: advanced only by `SimTransport.recv` finding nothing to deliver."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SimTransport(LocalTransport):
    """`LocalTransport` on simulated time: the node answers inside `send`, so when nothing is queued nothing
    can ever arrive, and waiting `timeout` is advancing the clock by it (no sleep). While replies are queued the
    clock stands still: a request whose reply is only waiting to be read never times out."""

    def __init__(self, node, clock: SimClock) -> None:
        super().__init__(node)
        self.clock = clock
        self.waited = 0.0

    def recv(self, timeout: float) -> bytes | None:
        if self.inbox:
            return self.inbox.popleft()
        step = max(timeout, 0.0) + 1e-9  # past the deadline, whatever the float rounding of sent_at + timeout
        self.clock.now += step
        self.waited += step
        return None


def local_client(n: StorageNode, loss: float = 0.0, seed: int = 0, drop=None, **options) -> KVPClient:
    clock = SimClock()
    transport = LossyTransport(SimTransport(n, clock), loss, random.Random(seed), drop)
    return KVPClient(dataclasses.replace(OPTIONS, **options), transport, clock=clock)


def is_ack(data: bytes, chunk: int) -> bool:
    h = Header.unpack(data)
    return h.opcode == Opcode.PUT_ACK and h.chunk_idx == chunk


def test_a_lost_put_ack_is_resent_and_reported_as_success():
    n = StorageNode(StorageOptions())
    lost = []

    def drop_the_commits_acks(data: bytes, direction: str) -> bool:
        h = Header.unpack(data)
        if direction == "in" and h.opcode == Opcode.PUT_ACK and h.status == Status.OK and len(lost) < 3:
            lost.append(data)  # every OK of the commit: only a resend can learn it committed
            return True
        return False

    with local_client(n, drop=drop_the_commits_acks) as client:
        client.put_block(0xACC, b"z" * 300, version=1)  # the resend is OK (docs/protocol.md, *Atomic blocks*), never ERR_STALE
        assert len(lost) == 3 and client.sent == 4  # three chunks, one resend (of the chunk that completed it)
        assert client.get_block(0xACC).data == b"z" * 300
    assert n.counters["status.OK"] >= 4


@pytest.mark.parametrize(("seed", "loss"), [(0, 0.05), (1, 0.05), (2, 0.2)])
def test_sixty_writes_under_loss_all_succeed_and_read_back(seed, loss):
    n = StorageNode(StorageOptions())
    rng = random.Random(seed)
    blocks = {ph: rng.randbytes(rng.randrange(1, 2000)) for ph in range(1, 61)}
    with local_client(n, loss=loss, seed=seed) as client:
        for ph, data in blocks.items():
            client.put_block(ph, data, version=1)  # never raises for a stored write
        for ph, data in blocks.items():
            assert client.get_block(ph).data == data
        assert client.transport.dropped > 0


def test_a_windowed_read_of_the_largest_v1_block_under_loss_returns_verified_bytes():
    n = StorageNode(StorageOptions())
    data = random.Random(1).randbytes(SMALL_BLOCK_LEN)  # 255 chunks of 128 B, the largest block of protocol v1
    with local_client(n) as writer:
        writer.put_block(0xB16, data, version=3)
    with local_client(n, loss=0.2, seed=4) as client:
        block = client.get_block(0xB16)
        assert block.data == data and block.version == 3 and len(block.chunks) == 255
        assert client.transport.dropped > 20
        assert max(c.attempts for c in block.chunks) > 1


@pytest.mark.parametrize(("size", "chunk_size"), [(1 << 20, 1024), (3 << 20, 8192), ((1 << 20) + 77, 128)])
def test_mib_blocks_written_and_read_under_loss_come_back_verified(size, chunk_size):
    n = StorageNode(StorageOptions())
    data = random.Random(size).randbytes(size)
    with local_client(n, loss=0.01, seed=size, window=64, chunk_size=chunk_size) as client:
        client.put_block(0xB1C, data, version=2)
        block = client.get_block(0xB1C)
    assert block.data == data and block.version == 2
    assert len(block.chunks) == -(-size // chunk_size) > 255, "chunk_idx beyond 8 bits"
    assert client.transport.dropped > 0
    assert n.counters["put.committed"] == 1
    assert n.counters["status.STAGED"] >= len(block.chunks) - 1, "the writer was paced by staged acks"


def test_a_write_resends_only_the_chunks_that_were_lost():
    n = StorageNode(StorageOptions())
    dropped = []

    def drop_three_puts(data: bytes, direction: str) -> bool:
        h = Header.unpack(data)
        if direction == "out" and h.opcode == Opcode.PUT and h.chunk_idx in (5, 50, 500) \
                and h.chunk_idx not in dropped:
            dropped.append(h.chunk_idx)
            return True
        return False

    with local_client(n, drop=drop_three_puts, window=16, timeout=0.2) as client:  # no late resends
        client.put_block(7, bytes(1024 * 1024), version=1, chunk_size=1024)
        assert sorted(dropped) == [5, 50, 500] and client.sent == 1024 + 3


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_every_chunk_size_round_trips(chunk_size):
    n = StorageNode(StorageOptions())
    data = random.Random(chunk_size).randbytes(5 * chunk_size - 3)
    with local_client(n, chunk_size=chunk_size) as client:
        client.put_block(chunk_size, data, version=1)
        block = client.get_block(chunk_size)
    assert block.data == data and len(block.chunks) == 5


class CountingTransport(SimTransport):
    """Records how many requests went out before each wait for a reply."""

    def __init__(self, node):
        super().__init__(node, SimClock())
        self.sends, self.bursts = 0, []

    def send(self, data):
        self.sends += 1
        super().send(data)

    def recv(self, timeout):
        self.bursts.append(self.sends)
        return super().recv(timeout)


@pytest.mark.parametrize("window", [1, 8, 32])
def test_a_read_keeps_a_window_of_requests_in_flight(window):
    n = StorageNode(StorageOptions())
    with local_client(n) as writer:
        writer.put_block(1, bytes(100 * 128), version=1)
    transport = CountingTransport(n)
    with KVPClient(ClientOptions(window=window, initial_window=window), transport, clock=transport.clock) as client:
        client.get_block(1, chunks=100)
    assert transport.bursts[0] == window  # `window` GETs sent before the first reply is read
    assert transport.sends == 100  # and nothing sent twice without loss


def test_only_the_lost_chunk_is_asked_again():
    n = StorageNode(StorageOptions())
    with local_client(n) as writer:
        writer.put_block(1, bytes(50 * 128), version=1)
    dropped = []

    def drop_chunk_17_once(data, direction):
        h = Header.unpack(data)
        if direction == "out" and h.chunk_idx == 17 and not dropped:
            dropped.append(h)
            return True
        return False

    with local_client(n, drop=drop_chunk_17_once) as client:
        block = client.get_block(1, chunks=50)
    assert client.sent == 51 and [c.attempts for c in block.chunks if c.attempts > 1] == [2]


def test_a_commit_during_a_read_restarts_it_at_the_new_version_instead_of_stitching():
    n = StorageNode(StorageOptions())
    with local_client(n) as writer:
        writer.put_block(1, b"1" * 640, version=1)
    replies = []

    def commit_v2_after_two_replies(data, direction):
        if direction == "in" and Header.unpack(data).opcode == Opcode.GET_REPLY:
            replies.append(data)
            if len(replies) == 2:
                with local_client(n) as other:
                    other.put_block(1, b"2" * 640, version=2)
        return False

    with local_client(n, drop=commit_v2_after_two_replies, window=1) as client:
        block = client.get_block(1)
    assert (block.data, block.version) == (b"2" * 640, 2)


def test_a_stale_write_still_fails():
    n = StorageNode(StorageOptions())
    with local_client(n) as client:
        client.put_block(1, b"new", version=5)
        with pytest.raises(KVPError) as refused:
            client.put_block(1, b"old", version=4)
        assert refused.value.status == Status.ERR_STALE
        with pytest.raises(KVPError) as conflict:
            client.put_block(1, b"other", version=5)
        assert conflict.value.status == Status.ERR_CONFLICT


class LossyProxy:
    """A UDP relay between one client and a node that drops each datagram, either way, with probability `loss`."""

    def __init__(self, server: tuple[str, int], loss: float, seed: int) -> None:
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.server, self.loss, self.rng = server, loss, random.Random(seed)
        self.client: tuple[str, int] | None = None
        self.dropped = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._relay, args=(s,), daemon=True) for s in (self.front, self.back)]
        for t in self.threads:
            t.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.front.getsockname()

    def _relay(self, sock: socket.socket) -> None:
        sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                data, peer = sock.recvfrom(65535)
            except (TimeoutError, OSError):
                continue
            if self.rng.random() < self.loss:
                self.dropped += 1
                continue
            if sock is self.front:
                self.client = peer
                self.back.sendto(data, self.server)
            elif self.client is not None:
                self.front.sendto(data, self.client)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        self.front.close()
        self.back.close()


def test_writes_and_reads_over_real_udp_through_a_lossy_proxy_never_fail(serve):
    node = serve()
    proxy = LossyProxy(node.address, loss=0.1, seed=9)
    rng = random.Random(2)
    blocks = {ph: rng.randbytes(rng.randrange(1, 3000)) for ph in range(1, 13)}
    try:
        # real time: a loaded machine may make the client resend answered requests (harmless), so tries are
        # plentiful; a broken resend still fails here, since 10% of the datagrams never arrive
        with KVPClient(ClientOptions(server=proxy.address, timeout=0.05, retries=400)) as client:
            for ph, data in blocks.items():
                client.put_block(ph, data, version=1)
            for ph, data in blocks.items():
                assert client.get_block(ph).data == data
    finally:
        proxy.close()
    assert proxy.dropped > 0
    assert node.node.counters["put.committed"] == len(blocks)


def test_a_16_mib_block_over_real_udp_through_a_lossy_proxy_comes_back_verified(serve):
    node = serve(capacity=32 << 20)
    proxy = LossyProxy(node.address, loss=0.01, seed=16)
    data = random.Random(16).randbytes(16 << 20)
    try:
        with KVPClient(ClientOptions(server=proxy.address, timeout=0.05, retries=400, window=64,
                                     chunk_size=8192)) as client:
            client.put_block(0x16, data, version=1)
            block = client.get_block(0x16)
    finally:
        proxy.close()
    assert block.data == data and len(block.chunks) == 2048
    assert proxy.dropped > 0
