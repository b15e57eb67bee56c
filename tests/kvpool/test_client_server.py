"""Client and storage node over real loopback UDP: whole blocks, refusals, metadata, bad replies."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from kvpool.client import BlockNotFound, ClientOptions, KVPClient, KVPError, KVPTimeout, main
from kvpool.constants import KVP_HEADER_LEN, Opcode, Status, Tier
from kvpool.wire import Header, encode


def test_put_then_get_round_trips_a_multi_chunk_block(serve):
    node = serve()
    data = bytes(random.Random(1).randbytes(1000))
    with node.client() as client:
        client.put_block(0xABC, data, version=1)
        block = client.get_block(0xABC)
    assert block.data == data and block.version == 1
    assert [c.status for c in block.chunks] == [Status.HIT_SERVER] * 8
    assert block.switch_hits == 0


def test_get_with_known_chunk_count_fetches_all_at_once(serve):
    node = serve()
    with node.client() as client:
        client.put_block(1, bytes(300), version=2)
        assert client.get_block(1, chunks=3, version=2).data == bytes(300)


def test_newer_version_replaces_the_block_and_older_is_stale(serve):
    node = serve()
    with node.client() as client:
        client.put_block(7, b"v2", version=2)
        with pytest.raises(KVPError, match="ERR_STALE") as refused:
            client.put_block(7, b"v1", version=1)
        assert refused.value.status == Status.ERR_STALE
        client.put_block(7, b"v3", version=3)
        assert client.get_block(7).data == b"v3"


def test_missing_block_raises_block_not_found(serve):
    with serve().client() as client, pytest.raises(BlockNotFound):
        client.get_block(0xDEAD)


def test_full_node_refuses_with_err_full(serve):
    node = serve(capacity=2 * 128)
    with node.client() as client:
        client.put_block(1, bytes(256), version=1)
        with pytest.raises(KVPError, match="ERR_FULL"):
            client.put_block(2, b"x", version=1)


def test_tier_move_and_stat_through_the_client(serve):
    node = serve(disk=True)
    with node.client() as client:
        client.put_block(5, b"hot", version=1)
        for _ in range(4):
            client.get_block(5)
        assert client.stat(5) == 4
        assert client.tier_move(5, 0, Tier.STORAGE_DISK, score=0.5) == (Status.OK, Tier.STORAGE_DISK)
        assert client.get_block(5).data == b"hot"
        assert client.lookup(5).tiers == {Tier.STORAGE_DISK}


def test_tenant_option_separates_blocks(serve):
    node = serve()
    with node.client(tenant=1) as one, node.client(tenant=2) as two:
        one.put_block(9, b"one", version=1)
        with pytest.raises(BlockNotFound):
            two.get_block(9)


def test_malformed_datagram_gets_err_malformed_over_the_wire(serve):
    node = serve()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        sock.sendto(Header(Opcode.GET, req_id=77, chunk_count=0).pack(), node.address)
        reply = Header.unpack(sock.recv(2048))
    assert (reply.status, reply.req_id) == (Status.ERR_MALFORMED, 77)


class FakeNode:
    """A UDP peer that answers each request with whatever `respond(header, data)` returns (or nothing)."""

    def __init__(self, respond):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.respond, self.seen, self.stop = respond, 0, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                data, peer = self.sock.recvfrom(2048)
            except TimeoutError:
                continue
            self.seen += 1
            for reply in self.respond(Header.unpack(data), data):
                self.sock.sendto(reply, peer)

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def fake():
    nodes = []

    def make(respond):
        nodes.append(FakeNode(respond))
        return nodes[-1]

    yield make
    for n in nodes:
        n.close()


def client_for(node: FakeNode) -> KVPClient:
    return KVPClient(ClientOptions(server=node.sock.getsockname(), timeout=0.05, retries=2, give_up=1.0))


def test_a_silent_peer_fails_a_read_after_the_silence_bound_naming_key_server_and_what_was_heard(fake):
    node = fake(lambda h, d: [])
    options = ClientOptions(server=node.sock.getsockname(), timeout=0.05, retries=2, give_up=0.5)
    with KVPClient(options) as client, pytest.raises(KVPTimeout) as err:
        client.get_block(0xABC)
    text = str(err.value)
    assert "ph=0x0000000000000abc chunk=0" in text and f"{node.sock.getsockname()[1]}" in text
    assert "0.5s of silence" in text and "nothing heard" in text
    assert node.seen >= 3, "resent with backoff while silent"


def test_a_silent_peer_fails_a_one_request_call_after_its_retries(fake):
    node = fake(lambda h, d: [])
    with client_for(node) as client, pytest.raises(KVPTimeout, match="after 3 tries"):
        client.stat(1)
    assert node.seen == 3


def test_a_lost_reply_is_recovered_by_a_retry(fake):
    answered = []

    def respond(h, d):
        answered.append(h.req_id)
        if len(answered) == 1:
            return []  # drop the first try
        return [encode(h.replace(opcode=Opcode.GET_REPLY, status=Status.HIT_SWITCH, version=4), b"cached")]

    with client_for(fake(respond)) as client:
        block = client.get_block(1, chunks=1)
    assert block.data == b"cached" and block.chunks[0].status == Status.HIT_SWITCH and block.chunks[0].attempts == 2


def test_reply_with_wrong_key_is_not_accepted(fake):
    node = fake(lambda h, d: [encode(h.replace(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER,
                                               prefix_hash=h.prefix_hash + 1, version=1), b"x")])
    with client_for(node) as client, pytest.raises(KVPTimeout, match="wrong replies"):
        client.get_block(1)


def test_reply_with_corrupt_value_is_a_checksum_error(fake):
    def respond(h, d):
        data = bytearray(encode(h.replace(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, version=1), b"ok"))
        data[KVP_HEADER_LEN] ^= 1
        return [bytes(data)]

    with client_for(fake(respond)) as client, pytest.raises(KVPError, match="checksum") as err:
        client.get_block(1)
    assert err.value.status == Status.ERR_CHECKSUM


def test_chunks_of_different_versions_are_refused(fake):
    def respond(h, d):
        version = 1 if h.chunk_idx == 0 else 2
        return [encode(h.replace(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, chunk_count=2,
                                 version=version), bytes(128))]

    with client_for(fake(respond)) as client, pytest.raises(KVPError, match="mixed versions"):
        client.get_block(1)


def test_bypass_option_sets_the_flag(fake):
    flags = []

    def respond(h, d):
        flags.append(h.flags)
        return [h.replace(opcode=Opcode.STAT_REPLY, aux=3).pack()]

    with KVPClient(ClientOptions(server=fake(respond).sock.getsockname(), bypass=True)) as client:
        assert client.stat(1) == 3
    assert flags == [0x02]


def test_cli_put_and_get(serve, capsys, tmp_path):
    node = serve()
    server = f"{node.address[0]}:{node.address[1]}"
    assert main(["--server", server, "put", "0x42", "--version", "1", "--data", "hello"]) == 0
    out = tmp_path / "block"
    assert main(["--server", server, "get", "0x42", "--out", str(out)]) == 0
    assert out.read_bytes() == b"hello"
    assert "HIT_SERVER" in capsys.readouterr().out


def test_cli_reports_a_refusal_without_traceback(serve, capsys):
    node = serve()
    assert main(["--server", f"127.0.0.1:{node.address[1]}", "get", "0x99"]) == 1
    assert "MISS" in capsys.readouterr().err


def test_cli_bad_arguments_print_usage():
    with pytest.raises(SystemExit) as exited:
        main(["get", "not-a-number"])
    assert exited.value.code == 2


@pytest.mark.slow
def test_server_process_survives_random_datagrams_and_stops_on_sigterm(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kvpool.server", "--host", "127.0.0.1", "--port", str(port),
                             "--capacity", "65536", "--disk", str(tmp_path)],
                            stderr=subprocess.PIPE, text=True)
    try:
        # The survivor lives under a tenant the fuzz never names (a valid TIER_MOVE to ABSENT would drop it).
        options = ClientOptions(server=("127.0.0.1", port), tenant=0x0909, timeout=0.5, retries=10)
        with KVPClient(options) as client:
            client.put_block(1, b"before", version=1)
            rng = random.Random(2)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                for i in range(2000):
                    if i % 2:  # a real header with a few bytes changed reaches the deeper code paths
                        data = bytearray(Header(rng.choice(list(Opcode)), prefix_hash=1).pack() + bytes(128))
                        for _ in range(3):
                            data[rng.randrange(2, len(data))] = rng.randrange(256)
                    else:
                        data = rng.randbytes(rng.randrange(0, 300))
                    sock.sendto(bytes(data), ("127.0.0.1", port))
                    if i % 200 == 0:
                        time.sleep(0.01)  # let it drain: we test robustness, not the socket buffer
            assert client.get_block(1).data == b"before"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
