"""`RemoteTarget` keeps the in-process `Target` contract: same error codes, entries read back as written,
controller headers in the same bytes. The parity tests run on every target; the helpers' tests are unit tests."""

from __future__ import annotations

import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from softswitch.target import Exact, Lpm, TableEntry, TargetError
from tests.dataplane.kvnet import CPU_PORT, P4_MAIN
from tests.targets.kinds import INPROC, SharedSwitches, kind_of, target_params
from tests.targets.p4rt import Field, pack_header, target_error, unpack_header

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
    s = SharedSwitches(tmp_path_factory.mktemp("remote"))
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
    return TableEntry("MyIngress.kv_index", key, "MyIngress.set_slot", {"slot": slot, "min_version": 9})


def test_entries_read_back_as_written(target) -> None:
    target.table_insert(_index())
    target.table_insert(TableEntry("MyIngress.ipv4_lpm", ROUTE, "MyIngress.ipv4_forward", {"dst_mac": 5, "port": 2}))
    target.table_modify(_index(slot=4))
    [index] = target.table_entries("MyIngress.kv_index")
    assert (dict(index.match), index.action, dict(index.params)) == (KEY, "MyIngress.set_slot",
                                                                     {"slot": 4, "min_version": 9})
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
