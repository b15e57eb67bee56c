"""`RemoteTarget` keeps the in-process `Target` contract: same error codes, entries read back as written,
controller headers in the same bytes. The parity tests run on every target; the helpers' tests are unit tests."""

from __future__ import annotations

import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from kvpool.constants import Status
from kvpool.protocol import KVPValue
from kvtesting.kvnet import CLIENT_PORT, CPU_PORT, P4_MAIN, STORAGE_PORT, KvNet, chunk_key, value_chunk
from kvtesting.p4rt import Field, pack_header, target_error, unpack_header
from kvtesting.remote_target import Quiescence
from kvtesting.switch_process import BMV2, SOFTSWITCH, Compiled
from kvtesting.veth import VethPairs
from softswitch.target import Exact, Lpm, TableEntry, TargetError
from tests.targets.kinds import INPROC, SharedSwitches, kind_of, quiescence_from_env, target_params

PACKET_IN = (Field(1, "ingress_port", 16), Field(2, "reason", 8), Field(3, "pad", 8))
ODD = (Field(1, "port", 9), Field(2, "flag", 1), Field(3, "rest", 6))
KEY = {"hdr.kvp.tenant": Exact(7), "hdr.kvp.prefix_hash": Exact(0x0123456789ABCDEF), "hdr.kvp.chunk_idx": Exact(1)}
ROUTE = {"hdr.ipv4.dst_addr": Lpm(0x0A000000, 8)}


# ---- helpers (unit) --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fields", "values", "data"), [
    (PACKET_IN, {1: 255, 2: 2, 3: 0}, bytes.fromhex("00ff0200")),
    (ODD, {1: 0x1FF, 2: 1, 3: 0x2A}, bytes([0xFF, 0xEA])),  # 9 + 1 + 6 bits, MSB first
])
def test_controller_header_packs_fields_msb_first(fields, values, data) -> None:
    assert pack_header(fields, values) == data
    assert unpack_header(fields, data + b"payload") == values


class _RpcError(Exception):
    """The parts of grpc.RpcError that `target_error` reads."""

    def __init__(self, code, details: str, trailer: bytes | None = None) -> None:
        self._code, self._details, self._trailer = code, details, trailer

    def code(self):
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return [("grpc-status-details-bin", self._trailer)] if self._trailer else []


def test_write_error_takes_the_first_failed_updates_code() -> None:
    import grpc

    status = status_pb2.Status(code=code_pb2.UNKNOWN)
    for code, msg in ((code_pb2.OK, ""), (code_pb2.ALREADY_EXISTS, "entry exists"), (code_pb2.NOT_FOUND, "x")):
        detail = any_pb2.Any()
        detail.Pack(p4runtime_pb2.Error(canonical_code=code, message=msg))
        status.details.append(detail)
    err = target_error(_RpcError(grpc.StatusCode.UNKNOWN, "batch failed", status.SerializeToString()))
    assert (err.code, err.message) == ("ALREADY_EXISTS", "entry exists")
    plain = target_error(_RpcError(grpc.StatusCode.FAILED_PRECONDITION, "no pipeline"))
    assert (plain.code, plain.message) == ("FAILED_PRECONDITION", "no pipeline")


# ---- parity on every target ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def switches(tmp_path_factory):
    s = SharedSwitches(tmp_path_factory.mktemp("remote"), "rm")
    yield s
    s.close()


@pytest.fixture(params=target_params())
def target(request):
    if request.param == INPROC:
        from softswitch.frontend import load_program
        from softswitch.runtime import SoftSwitch

        return SoftSwitch.load(load_program(str(P4_MAIN)), cpu_port=CPU_PORT)
    return request.getfixturevalue("switches").for_test(kind_of(request.param))


def _index(key=KEY, slot: int = 3) -> TableEntry:
    return TableEntry("MyIngress.kv_index", key, "MyIngress.set_slot",
                      {"slot": slot, "min_version": 9, "generation": 3})


def test_entries_read_back_as_written(target) -> None:
    target.table_insert(_index())
    target.table_insert(TableEntry("MyIngress.ipv4_lpm", ROUTE, "MyIngress.ipv4_forward", {"dst_mac": 5, "port": 2}))
    target.table_modify(_index(slot=4))
    [index] = target.table_entries("MyIngress.kv_index")
    assert (dict(index.match), index.action, dict(index.params)) == (KEY, "MyIngress.set_slot",
                                                                     {"slot": 4, "min_version": 9, "generation": 3})
    [route] = target.table_entries("MyIngress.ipv4_lpm")
    assert dict(route.match) == ROUTE and dict(route.params) == {"dst_mac": 5, "port": 2}
    target.table_delete("MyIngress.kv_index", KEY)
    assert list(target.table_entries("MyIngress.kv_index")) == []


@pytest.mark.parametrize(("operation", "code"), [
    ("insert_twice", "ALREADY_EXISTS"),
    ("delete_missing", "NOT_FOUND"),
    ("modify_missing", "NOT_FOUND"),
])
def test_refused_writes_carry_the_same_code(target, operation: str, code: str) -> None:
    with pytest.raises(TargetError) as err:
        if operation == "insert_twice":
            target.table_insert(_index())
            target.table_insert(_index())
        elif operation == "delete_missing":
            target.table_delete("MyIngress.kv_index", KEY)
        else:
            target.table_modify(_index())
    assert err.value.code == code


def test_default_action_round_trips(target) -> None:
    assert target.table_get_default("MyIngress.sketch_config") == ("MyIngress.sketch_off", {})
    target.table_set_default("MyIngress.sketch_config", "MyIngress.set_sketch_config",
                             {"hot_threshold": 4, "epoch": 77})
    name, params = target.table_get_default("MyIngress.sketch_config")
    assert (name, dict(params)) == ("MyIngress.set_sketch_config", {"hot_threshold": 4, "epoch": 77})


def test_counter_write_then_read(target) -> None:
    target.counter_write("MyIngress.kvp_events", 3, 12, 3400)
    assert target.counter_read("MyIngress.kvp_events", 3) == (12, 3400)
    assert target.counter_read("MyIngress.kvp_events", 4) == (0, 0)
    with pytest.raises(TargetError):
        target.counter_read("MyIngress.kvp_events", 1 << 20)


# ---- the harness itself ----------------------------------------------------------------------------------

def test_bmv2_is_started_with_the_documented_command_lines(tmp_path) -> None:
    p4info = tmp_path / "kvswitch.p4info.txtpb"
    assert BMV2.compile_command(P4_MAIN, tmp_path) == [
        "p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), "--p4runtime-files", str(p4info),
        str(P4_MAIN)]
    compiled = Compiled(p4info, tmp_path / "kvswitch.json")
    assert BMV2.switch_command(compiled, VethPairs([1, 2], tag="x"), "127.0.0.1:9559", 255) == [
        "simple_switch_grpc", "--no-p4", "-i", "1@rtgxs1", "-i", "2@rtgxs2", "--device-id", "1",
        "--", "--grpc-server-addr", "127.0.0.1:9559", "--cpu-port", "255"]


def test_bmv2_counts_as_available_only_with_both_tools_on_path(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert BMV2.missing_tools() == ["p4c", "simple_switch_grpc"]
    for tool in ("p4c", "simple_switch_grpc"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    assert BMV2.available() and SOFTSWITCH.available()


def test_waits_can_be_lengthened_from_the_environment() -> None:
    assert quiescence_from_env({}) == Quiescence()
    got = quiescence_from_env({"KVSWITCH_REMOTE_WAIT_S": "0.5,0.1"})
    assert (got.first_frame_s, got.quiet_s) == (0.5, 0.1)
    with pytest.raises(ValueError, match="KVSWITCH_REMOTE_WAIT_S"):
        quiescence_from_env({"KVSWITCH_REMOTE_WAIT_S": "slow"})


@pytest.fixture(scope="module")
def enums() -> dict[str, dict[str, int]]:
    from softswitch.frontend import load_program

    program = load_program(str(P4_MAIN))
    return {n: {m: program.type(n).value_of(m) for m in program.type(n).members}
            for n in ("punt_reason_t", "drop_reason_t", "kvp_event_t", "port_role_t")}


@pytest.mark.parametrize("param", target_params()[1:])
def test_reset_between_tests_scrubs_written_slots(switches, enums, param) -> None:
    kind = kind_of(param)
    net = KvNet(switches.for_test(kind), enums)
    net.install_routes()
    net.set_port_roles()
    net.index(chunk_key(), 40)
    assert net.slot_write(chunk_key(), 40, value_chunk(3), version=9).status == Status.OK
    assert [p for p, _ in net.get(chunk_key(), frames=1)] == [CLIENT_PORT]

    net = KvNet(switches.for_test(kind), enums)  # what the next test gets
    assert net.target.table_entries("MyIngress.kv_index") == []
    assert (net.slot_hits(40), net.events("GET_HIT"), net.events("SLOT_WRITE")) == (0, 0, 0)
    got = net.slot_read(40)
    assert (got.status, got.tenant, got.prefix_hash, got.version) == (Status.MISS, 0, 0, 0)
    assert got[KVPValue].value_bytes == bytes(128)
    net.install_routes()
    net.set_port_roles()
    net.index(chunk_key(), 40)
    assert [p for p, _ in net.get(chunk_key(), frames=1)] == [STORAGE_PORT], "nothing of the old value is served"
    net.server_reply(chunk_key(), value_chunk(4), version=1, frames=1)  # older than the scrubbed key's 9: still fills
    assert [p for p, _ in net.get(chunk_key(), frames=1)] == [CLIENT_PORT]
