"""The server in-process over the real front end and executor (no ports): pipeline checks, error codes,
register read/write, and a packet-out that the program turns into a frame on the requested port."""

from __future__ import annotations

import pathlib

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from p4rt_fakes import StreamClient, uint128

from softswitch import compile as compiler
from softswitch.p4runtime.device import Device
from softswitch.p4runtime.device_config import load_bundle
from softswitch.p4runtime.server import P4RuntimeServer, ServerOptions

pytestmark = pytest.mark.slow  # each test loads the program through the real front end (about a second)

PROGRAM = pathlib.Path(__file__).parent / "programs" / "l2l3.p4"
CFG = p4runtime_pb2.SetForwardingPipelineConfigRequest
INSERT, MODIFY = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY


@pytest.fixture(scope="module")
def compiled():
    return compiler.compile_program(PROGRAM)


class Real:
    def __init__(self, compiled):
        self.compiled = compiled
        self.sent: list[tuple[int, bytes]] = []
        self.device = Device(0, 255, lambda port, frame: self.sent.append((port, frame)))
        self.server = P4RuntimeServer(self.device, load_bundle, p4info_of=compiler.p4info_of)
        port = self.server.start(ServerOptions("127.0.0.1:0"))
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        from p4.v1 import p4runtime_pb2_grpc

        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.stream = StreamClient(self.stub, election=1)
        self.stream.get("arbitration")
        info = compiled.p4info
        self.tables = {t.preamble.name: t for t in info.tables}
        self.actions = {a.preamble.name: a.preamble.id for a in info.actions}
        self.registers = {r.preamble.name: r.preamble.id for r in info.registers}

    def set_config(self, p4info=None, device_config=None, action=CFG.VERIFY_AND_COMMIT):
        req = CFG(device_id=0, action=action, election_id=uint128(1))
        req.config.p4info.CopyFrom(p4info or self.compiled.p4info)
        req.config.p4_device_config = device_config or self.compiled.device_config
        return self.stub.SetForwardingPipelineConfig(req)

    def write(self, *updates):
        req = p4runtime_pb2.WriteRequest(device_id=0, election_id=uint128(1))
        for utype, entity in updates:
            req.updates.add(type=utype, entity=entity)
        return self.stub.Write(req)

    def dmac(self, mac: int, port: int = 2):
        te = p4runtime_pb2.TableEntry(table_id=self.tables["MyIngress.dmac"].preamble.id)
        te.match.add(field_id=1).exact.value = mac.to_bytes(6, "big")
        te.action.action.action_id = self.actions["MyIngress.forward"]
        te.action.action.params.add(param_id=1, value=bytes([port]))
        return p4runtime_pb2.Entity(table_entry=te)

    def close(self):
        self.stream.close()
        self.channel.close()
        self.server.stop(0)


@pytest.fixture
def real(compiled):
    r = Real(compiled)
    r.set_config()
    yield r
    r.close()


def _codes(err: grpc.RpcError) -> list[int]:
    from google.rpc import status_pb2

    status = status_pb2.Status.FromString(dict(err.trailing_metadata())["grpc-status-details-bin"])
    out = []
    for d in status.details:
        e = p4runtime_pb2.Error()
        d.Unpack(e)
        out.append(e.canonical_code)
    return out


def test_full_table_is_resource_exhausted_on_the_real_target(real):
    size = real.tables["MyIngress.dmac"].size
    real.write(*[(INSERT, real.dmac(i + 1)) for i in range(size)])
    with pytest.raises(grpc.RpcError) as e:
        real.write((INSERT, real.dmac(size + 1)), (INSERT, real.dmac(1)))
    assert _codes(e.value) == [code_pb2.RESOURCE_EXHAUSTED, code_pb2.ALREADY_EXISTS]


def test_delete_of_missing_entry_is_not_found_on_the_real_target(real):
    with pytest.raises(grpc.RpcError) as e:
        real.write((p4runtime_pb2.Update.DELETE, real.dmac(77)))
    assert _codes(e.value) == [code_pb2.NOT_FOUND]


def test_register_write_then_read_and_index_out_of_range(real):
    rid = real.registers["MyIngress.last_ttl"]
    re_ = p4runtime_pb2.RegisterEntry(register_id=rid)
    re_.index.index = 3
    re_.data.bitstring = b"\x2a"
    real.write((MODIFY, p4runtime_pb2.Entity(register_entry=re_)))
    want = p4runtime_pb2.RegisterEntry(register_id=rid)
    want.index.index = 3
    [resp] = real.stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[p4runtime_pb2.Entity(register_entry=want)]))
    assert resp.entities[0].register_entry.data.bitstring == b"\x2a"
    re_.index.index = 512
    with pytest.raises(grpc.RpcError) as e:
        real.write((MODIFY, p4runtime_pb2.Entity(register_entry=re_)))
    assert _codes(e.value) == [code_pb2.OUT_OF_RANGE]


def test_p4info_naming_a_missing_table_fails_verify(real):
    info = p4runtime_pb2.ForwardingPipelineConfig().p4info.__class__()
    info.CopyFrom(real.compiled.p4info)
    info.tables[0].preamble.name = "MyIngress.not_there"
    with pytest.raises(grpc.RpcError) as e:
        real.set_config(p4info=info, action=CFG.VERIFY)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not_there" in e.value.details()


def test_bad_program_in_device_config_reports_file_line_col(real, tmp_path):
    from softswitch.p4runtime.device_config import bundle

    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<8> x }\n")
    with pytest.raises(grpc.RpcError) as e:
        real.set_config(device_config=bundle(bad), action=CFG.VERIFY)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad.p4:3:" in e.value.details()


def test_packet_out_is_sent_where_its_header_says(real):
    req = p4runtime_pb2.StreamMessageRequest()
    frame = bytes.fromhex("020000000003" "0200000000fe" "88b5") + b"hello"
    req.packet.payload = frame
    req.packet.metadata.add(metadata_id=1, value=b"\x03")
    real.stream.send(req)
    real.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
    import time

    deadline = time.monotonic() + 30  # reached only when the frame never leaves
    while not real.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert real.sent == [(3, frame)]


def test_entry_metadata_round_trips_through_the_real_target(real):
    te = p4runtime_pb2.TableEntry(table_id=real.tables["MyIngress.ipv4_lpm"].preamble.id, metadata=b"m1")
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes([10, 0, 2, 0]), 24
    te.action.action.action_id = real.actions["MyIngress.drop"]
    real.write((INSERT, p4runtime_pb2.Entity(table_entry=te)))
    want = p4runtime_pb2.TableEntry(table_id=te.table_id)
    [resp] = real.stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[p4runtime_pb2.Entity(table_entry=want)]))
    [got] = resp.entities
    assert got.table_entry.metadata == b"m1"
    assert got.table_entry.match[0].lpm.value == bytes([10, 0, 2, 0])
