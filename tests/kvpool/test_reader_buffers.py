"""A reader's datagrams and blocks without copies: what the buffer reuse and the hand-over must never break.

`UdpTransport.recv` hands out a view of one buffer that the next receive overwrites, and a read hands out the buffer
its chunks were written into (`Reassembly.take`). These tests give the reader a transport that reuses its buffer the
same way (on simulated time, with loss and with pushes held before the first reply), so any part of the read that
kept a datagram instead of copying it would return wrong bytes.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from kvpool.blocks import BlockError, Reassembly, split
from kvpool.client import ClientOptions, KVPClient
from kvpool.server import StorageNode, StorageOptions
from kvpool.transport import LossyTransport
from tests.kvpool.test_client_loss import SimClock, SimTransport
from tests.kvpool.test_stream_client import PH, RTT, StreamPath, block, schedule_pushes, stored


class _Reusing:
    """Every datagram received is copied into one buffer and handed out as a view of it (as `UdpTransport`)."""

    def _reuse(self, data: bytes | memoryview | None) -> memoryview | None:
        if data is None:
            return None
        self.buffer[:len(data)] = data
        self.buffer[len(data):len(data) + 16] = b"\xee" * 16  # what the next datagram leaves of an older one
        return memoryview(self.buffer)[:len(data)]


class ReusingSimTransport(_Reusing, SimTransport):
    def __init__(self, node: StorageNode, clock: SimClock) -> None:
        super().__init__(node, clock)
        self.buffer = bytearray(65536)

    def recv(self, timeout: float) -> memoryview | None:  # type: ignore[override]
        return self._reuse(super().recv(timeout))


class ReusingStreamPath(_Reusing, StreamPath):
    def __init__(self, node: StorageNode, clock: SimClock) -> None:
        super().__init__(node, clock)
        self.buffer = bytearray(65536)

    def recv(self, timeout: float) -> memoryview | None:  # type: ignore[override]
        return self._reuse(super().recv(timeout))


@pytest.mark.parametrize(("chunk", "loss"), [(1024, 0.0), (1024, 0.1), (8192, 0.1), (128, 0.1)])
def test_a_read_through_a_transport_that_reuses_its_buffer_returns_the_written_bytes(chunk, loss):
    node = StorageNode(StorageOptions(capacity=16 << 20))
    clock = SimClock()
    data = random.Random(chunk).randbytes(200 * chunk - 17)
    transport = LossyTransport(ReusingSimTransport(node, clock), loss, random.Random(3))
    with KVPClient(ClientOptions(timeout=0.05), transport, clock=clock) as client:
        client.put_block(PH, data, version=1, chunk_size=chunk)
        first = client.get_block(PH)
        second = client.get_block(PH, 200)
    assert first.data == data and second.data == data
    assert first.data is not second.data, "each read hands out a buffer of its own"
    if loss:
        assert transport.dropped > 0, "the loss was there: resends and late duplicates went through the buffer too"


def test_pushes_held_before_the_first_reply_are_copied_out_of_a_reused_buffer():
    """A late reader holds pushes until its first reply decides the block: with a transport that reuses its buffer,
    each held push must be a copy (the datagrams after it overwrite the buffer)."""
    n, k = 50, 20
    data = block(n, seed=11)
    node = stored(data)
    clock = SimClock()
    path = ReusingStreamPath(node, clock)
    schedule_pushes(path, clock, k, k + 2, n, start=0.0001, every=0.0001)  # before the first reply (RTT)
    schedule_pushes(path, clock, k + 3, n - 1, n, start=RTT + 0.0001, every=0.0005)
    with KVPClient(dataclasses.replace(ClientOptions(timeout=0.05)), path, clock=clock) as client:
        got = client.get_block(PH, None)
    assert [c for c in range(k, k + 3) if got.chunks[c].pushed] == [k, k + 1, k + 2], "the held ones were taken"
    assert got.data == data


def _assembled(data: bytes, chunk: int = 1024) -> Reassembly:
    assembly = Reassembly()
    for c in split(data, 5, chunk):
        assert assembly.add(c.idx, c.count, c.value_len, c.value, c.version, c.csum) is True
    return assembly


def test_take_hands_over_the_buffer_cut_to_the_block_and_the_assembly_keeps_nothing():
    data = random.Random(5).randbytes(10 * 1024 - 300)
    assembly = _assembled(data)
    taken = assembly.take()
    assert isinstance(taken, bytearray) and taken == data and len(taken) == len(data)
    taken[0] ^= 0xFF  # the caller's own: changing it touches nothing the assembly could hand out again
    with pytest.raises(BlockError, match="handed out"):
        assembly.take()
    with pytest.raises(BlockError, match="handed out"):
        assembly.data()
    assert assembly.complete and assembly.version == 5


def test_data_is_a_copy_and_take_still_works_after_it():
    data = random.Random(6).randbytes(3 * 1024)
    assembly = _assembled(data)
    copy = assembly.data()
    assert isinstance(copy, bytes) and copy == data
    assert assembly.take() == data


def test_take_of_an_incomplete_block_raises_and_add_tells_a_duplicate_from_a_new_chunk():
    chunks = split(random.Random(7).randbytes(4 * 1024), 1, 1024)
    assembly = Reassembly()
    c = chunks[1]
    assert assembly.add(c.idx, c.count, c.value_len, c.value, c.version, c.csum) is True
    assert assembly.add(c.idx, c.count, c.value_len, c.value, c.version, c.csum) is False, "a duplicate"
    with pytest.raises(BlockError, match="incomplete"):
        assembly.take()


def test_add_copies_the_chunk_so_the_caller_may_reuse_its_buffer():
    data = random.Random(8).randbytes(2 * 1024)
    chunks = split(data, 1, 1024)
    scratch = bytearray(1024)
    assembly = Reassembly()
    for c in chunks:
        scratch[:] = c.value
        assembly.add(c.idx, c.count, c.value_len, memoryview(scratch), c.version, c.csum)
        scratch[:] = b"\0" * 1024  # reused for the next datagram
    assert assembly.take() == data
