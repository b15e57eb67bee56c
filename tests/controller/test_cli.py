"""The CLI and its local JSON API: usage errors, and each command against an in-process API over a fake switch."""

from __future__ import annotations

import io
import json
import socket

import pytest
from rich.console import Console

from controller.__main__ import build_parser, main
from controller.api import ApiServer, handle
from controller.cli import CliError, run
from controller.metrics import Metrics
from controller.policy import infer_kind
from controller.pool import PoolManager
from controller.tiers import StoredChunk, TierMap, TierMover
from kvpool.keys import BlockKey, ChunkKey
from policies.base import Tier
from tests.controller.fakes import Clock, FakeDataPlane, FakeStorage, make_policies

K0, K1 = ChunkKey(1, 0xABC, 0), ChunkKey(2, 0xDEF, 3)


class Backend:
    """The API's backend with a dict-backed switch: what the Controller offers, minus P4Runtime."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.dataplane = FakeDataPlane(4)
        self.pool = PoolManager(self.dataplane, make_policies(), mover=TierMover(TierMap(), FakeStorage()),
                                metrics=self.metrics, clock=Clock())
        self.policy_sets: list[tuple[str, str, dict]] = []

    def status(self) -> dict:
        return {"occupancy": len(self.pool.slots), "capacity": self.pool.slots.capacity}

    def policy_view(self) -> dict:
        return {"admission": self.pool.policies.admission.name}

    def set_policy(self, kind: str, name: str, params: dict[str, str]) -> dict:
        if name == "nope":
            raise ValueError(f"unknown {kind} policy 'nope'")
        self.policy_sets.append((kind, name, params))
        return {kind: name}

    def move_tier(self, key: ChunkKey, tier_name: str) -> dict:
        moved = self.pool.mover.move(key, {"dram": Tier.STORAGE_DRAM, "disk": Tier.STORAGE_DISK}[tier_name])
        return {"key": str(key), "tiers": sorted(t.name for t in self.pool.tiers.tiers(key)), "moved": moved}

    def read_slot(self, slot: int) -> dict:
        if slot >= self.dataplane.capacity:
            raise ValueError(f"slot {slot} outside the pool")
        return {"slot": slot, "valid": False}


@pytest.fixture
def api():
    backend = Backend()
    server = ApiServer(backend, "127.0.0.1", 0)
    server.start()
    yield backend, f"127.0.0.1:{server.address[1]}"
    server.stop()


def test_the_api_is_bound_at_once_serves_once_started_and_frees_its_port_when_stopped():
    server = ApiServer(Backend(), "127.0.0.1", 0)
    address = server.address
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=5).close()  # not listening yet: nobody takes it for ready
    server.start()
    assert cli(f"{address[0]}:{address[1]}", "status")[0] == 0
    server.stop()
    assert not server._thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(address, timeout=5).close()
    server.stop()  # twice: nothing left to stop


def cli(address: str, *argv: str) -> tuple[int, str]:
    sink = io.StringIO()
    console = Console(file=sink, width=200)
    args = build_parser().parse_args(["--api", address, *argv])
    code = run(args, console)
    return code, sink.getvalue()


@pytest.mark.parametrize(
    "argv",
    [["pin", "nokey"], ["pin", "1:xyz:0"], ["pin", "1:ab:0", "--ttl", "-3"], ["read-slot", "seven"],
     ["policy", "set"], ["ls", "--sort", "colour"], ["frobnicate"], []],
    ids=lambda a: " ".join(a) or "no-command",
)
def test_bad_arguments_print_usage_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_unreachable_api_is_a_one_line_error(capsys):
    assert main(["--api", "127.0.0.1:9", "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach the controller API") and err.count("\n") == 1


def store(backend, key: ChunkKey, version: int = 1, chunk_count: int = 1) -> None:
    backend.pool.mover.storage.stored[key] = StoredChunk(version, chunk_count, b"v%d" % version)


def test_pin_ls_show_unpin_evict_round_trip(api):
    backend, address = api
    store(backend, K0)
    store(backend, K1, chunk_count=4)
    assert cli(address, "pin", str(K0))[0] == 0
    assert cli(address, "pin", str(K1), "--ttl", "30")[0] == 0
    assert backend.dataplane.index == {K0: 0, K1: 1}
    _, text = cli(address, "ls", "--sort", "slot")
    assert "0000000000000abc" in text and "hard" in text and "soft" in text
    code, text = cli(address, "--json", "show", str(K1))
    shown = json.loads(text)
    assert shown["pin"] == "soft" and shown["slot"] == 1 and shown["chunk"] == 3
    with pytest.raises(Exception, match="pinned"):
        cli(address, "evict", str(K0))
    cli(address, "unpin", str(K0))
    code, text = cli(address, "evict", str(K0))
    assert code == 0 and "evicted 1:0000000000000abc:0 from slot 0" in text
    assert K0 not in backend.dataplane.index


def test_ls_table_shows_a_limited_number_of_rows(api):
    backend, address = api
    for i in range(4):
        backend.pool.on_hot_key(ChunkKey(1, 0x200 + i, 0))
    _, text = cli(address, "ls", "--limit", "2")
    assert "0000000000000200" in text and "0000000000000203" not in text and "2 more" in text


def test_ls_json_sorts_by_the_requested_column(api):
    backend, address = api
    for i in range(3):
        backend.pool.on_hot_key(ChunkKey(1, 0x100 + i, 0))
    backend.dataplane.hit(ChunkKey(1, 0x101, 0), 9)
    backend.dataplane.hit(ChunkKey(1, 0x102, 0), 4)
    backend.pool.poll_hits()
    _, text = cli(address, "ls", "--json", "--sort", "hits", "--reverse")
    rows = json.loads(text)
    assert [r["hits"] for r in rows] == [9, 4, 0]


def test_unknown_key_and_bad_policy_are_reported_not_crashed(api):
    _, address = api
    with pytest.raises(Exception, match="not tracked"):
        cli(address, "show", "9:1:0")
    with pytest.raises(Exception, match="unknown admission policy"):
        cli(address, "policy", "set", "admission", "nope")
    with pytest.raises(Exception, match="outside the pool"):
        cli(address, "read-slot", "99")


def test_policy_set_passes_kind_name_and_parameters(api):
    backend, address = api
    cli(address, "policy", "set", "eviction", "lru", "a=1", "b=x")
    cli(address, "policy", "set", "s3fifo")
    assert backend.policy_sets == [("eviction", "lru", {"a": "1", "b": "x"}), ("", "s3fifo", {})]


@pytest.mark.parametrize("words", [["admission"], ["eviction", "lru", "novalue"], ["k=v"]])
def test_policy_set_with_bad_words_is_a_clear_error(api, words):
    _, address = api
    with pytest.raises(CliError, match="policy set"):
        cli(address, "policy", "set", *words)


@pytest.mark.parametrize(("name", "kind"), [("lru", "eviction"), ("tinylfu", "admission"), ("drop", "recycling")])
def test_unambiguous_policy_names_imply_their_kind(name, kind):
    assert infer_kind(name) == kind


def test_ambiguous_policy_name_asks_for_the_kind():
    with pytest.raises(ValueError, match="say which"):
        infer_kind("value")


def test_stats_reports_admissions(api):
    backend, address = api
    backend.pool.on_hot_key(K0)
    _, text = cli(address, "--json", "stats")
    stats = json.loads(text)
    assert stats["admissions_total"] == 1 and stats["occupancy"] == 1 and stats["digests"] == 1


def test_stats_shows_a_plan_without_storage_ports_as_a_warning(api):
    backend, address = api
    backend.metrics.storage_ports = 0
    _, text = cli(address, "stats")
    assert "WARNING 1" in text  # the sentence itself may wrap in the table
    backend.metrics.storage_ports = 1
    _, text = cli(address, "stats")
    assert "WARNING" not in text


@pytest.mark.parametrize(
    ("method", "target", "body", "status"),
    [("GET", "/nowhere", b"", 404), ("POST", "/pins", b"{not json", 400), ("POST", "/pins", b"[1]", 400),
     ("POST", "/pins", b'{"key": "1:ab:0", "ttl": -1}', 400), ("GET", "/slots/x", b"", 400),
     ("DELETE", "/pins/1:ab:0", b"", 404), ("POST", "/evict", b'{"key": "1:ab:0"}', 404)],
)
def test_api_answers_bad_requests_with_4xx(method, target, body, status):
    code, payload = handle(Backend(), method, target, body)
    assert code == status and "error" in payload


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["serve", "--p4info", "x", "--device-config", "y", "--state", "s"], "--switch"),
     (["serve", "--switch", "h:1", "--p4info", "/nonexistent.txtpb", "--device-config", "y", "--state", "s"],
      "no such file"),
     (["serve", "--switch", "h:1", "--p4info", __file__, "--device-config", __file__, "--state", "s",
       "--param", "bogus"], "NAME=VALUE")],
)
def test_serve_reports_bad_flags_with_usage(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and message in err


def test_serve_with_an_unreadable_p4info_fails_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.txtpb"
    bad.write_text("this is { not a p4info")
    code = main(["serve", "--switch", "127.0.0.1:1", "--p4info", str(bad), "--device-config", str(bad),
                 "--state", str(tmp_path / "s.sqlite")])
    assert code == 1
    assert "not a P4Info" in capsys.readouterr().err


def test_serve_accepts_the_testbeds_flags_in_its_order():
    args = build_parser().parse_args(
        ["serve", "--switch", "127.0.0.1:9559", "--device-id", "1", "--p4info", __file__, "--device-config", __file__,
         "--storage", "10.0.0.100:7420", "--state", "s.sqlite", "--api", "127.0.0.1:9091", "--hosts-file", __file__,
         "--metrics-port", "9100", "--admission", "value", "--eviction", "value", "--recycling", "residual"])
    assert (args.api, args.device_id, args.storage, args.metrics_port) == ("127.0.0.1:9091", 1, "10.0.0.100:7420", 9100)


def test_tier_command_moves_a_chunk_to_disk(api):
    backend, address = api
    code, text = cli(address, "tier", str(K0), "disk")
    assert code == 0 and "STORAGE_DISK" in text
    assert backend.pool.mover.storage.moves[-1][:2] == (K0, Tier.STORAGE_DISK)


# ---- blocks ----------------------------------------------------------------------------------------------

B = BlockKey(7, 0xB10C)


def test_pin_of_a_block_pins_every_chunk_the_storage_node_holds(api):
    backend, address = api
    for chunk in range(3):
        store(backend, B.chunk(chunk), version=2, chunk_count=3)
    code, text = cli(address, "pin", str(B))
    assert code == 0 and "3 chunk(s)" in text
    assert set(backend.dataplane.index) == set(B.chunks(3))
    assert all(backend.pool.describe(c)["pin"] == "hard" for c in B.chunks(3))
    _, text = cli(address, "--json", "ls", str(B))
    assert sorted(r["chunk"] for r in json.loads(text)) == [0, 1, 2]


def test_show_of_a_block_reports_the_stored_versions_not_zero(api):
    backend, address = api
    for chunk in range(2):
        store(backend, B.chunk(chunk), version=2, chunk_count=2)
    backend.pool.on_hot_key(B.chunk(0))
    backend.pool.on_hot_key(B.chunk(1))
    _, text = cli(address, "--json", "show", str(B))
    shown = json.loads(text)
    assert shown["chunk_count"] == 2 and shown["versions"] == [2] and shown["cached_chunks"] == 2
    assert [r["version"] for r in shown["chunks"]] == [2, 2]


def test_pinning_an_unknown_block_is_refused_with_the_reason_unless_forced(api):
    backend, address = api
    with pytest.raises(CliError, match=r"unknown.*--force"):
        cli(address, "pin", str(B))
    assert backend.dataplane.index == {}
    assert cli(address, "pin", str(B), "--force")[0] == 0
    assert B.chunk(0) in backend.dataplane.index


def test_unknown_block_error_is_json_with_json(api, capsys):
    _, address = api
    assert main(["--api", address, "--json", "pin", str(B)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert "unknown" in out["error"]


def test_orphan_chunks_of_a_shrunk_block_are_evicted_when_it_is_pinned(api):
    backend, address = api
    for chunk in range(3):
        store(backend, B.chunk(chunk), version=1, chunk_count=3)
    cli(address, "pin", str(B))
    for chunk in range(3):  # rewritten shorter: one chunk
        backend.pool.mover.storage.stored.pop(B.chunk(chunk))
    store(backend, B.chunk(0), version=2, chunk_count=1)
    _, text = cli(address, "--json", "pin", str(B))
    assert sorted(json.loads(text)["orphans_evicted"]) == [str(B.chunk(1)), str(B.chunk(2))]
    assert set(backend.dataplane.index) == {B.chunk(0)}


def test_unpin_and_evict_act_on_every_chunk_of_a_block(api):
    backend, address = api
    for chunk in range(2):
        store(backend, B.chunk(chunk), chunk_count=2)
    cli(address, "pin", str(B))
    with pytest.raises(CliError, match="pinned"):
        cli(address, "evict", str(B))
    assert cli(address, "unpin", str(B))[0] == 0
    code, text = cli(address, "evict", str(B))
    assert code == 0 and "evicted 2 chunk(s)" in text
    assert backend.dataplane.index == {}
    assert cli(address, "pin", f"{B}:1")[0] == 0  # chunk addressing still works
    assert set(backend.dataplane.index) == {B.chunk(1)}
