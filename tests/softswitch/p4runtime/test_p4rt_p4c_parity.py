"""P4Info parity with p4c, and programs without tables load as they do on BMv2.

golden/p4c/*.p4info.txtpb were written by p4c 1.2.5.16 (`p4c --target bmv2 --arch v1model
--p4runtime-files X.p4info.txtpb programs/X.p4`); our compiler must write the same text, so a controller reads
the same ids, serializable enums, digest member types and initial default actions from either target.
"""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess

import grpc
import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4rt_fakes import StreamClient, uint128

from softswitch import compile as compiler
from softswitch.p4runtime import p4info
from softswitch.p4runtime.index import P4InfoIndex

HERE = pathlib.Path(__file__).parent
PROGRAMS = HERE / "programs"
GOLDEN = HERE / "golden" / "p4c"
REPO = HERE.parents[2]
CFG = p4runtime_pb2.SetForwardingPipelineConfigRequest

needs_p4c = pytest.mark.skipif(shutil.which("p4c") is None or shutil.which("simple_switch_grpc") is None,
                               reason="p4c / simple_switch_grpc not on PATH")


def _p4c_text(path: pathlib.Path) -> str:
    """p4c's file without its two `# proto-...` comment lines (text_format does not write them)."""
    return "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("# proto-"))\
        .lstrip("\n")


@pytest.fixture(scope="module")
def enums_info() -> p4info_pb2.P4Info:
    return compiler.compile_program(PROGRAMS / "enums.p4").p4info


@pytest.mark.parametrize("program", ["enums", "registers_only", "l2l3"])
def test_p4info_text_is_what_p4c_writes(program):
    ours = p4info.to_text(compiler.compile_program(PROGRAMS / f"{program}.p4").p4info)
    assert ours == _p4c_text(GOLDEN / f"{program}.p4info.txtpb")


def test_serializable_enums_are_listed_when_a_p4info_object_has_their_type(enums_info):
    """Key, action parameter, controller-header field, digest field: listed; metadata or plain header only: not."""
    assert sorted(enums_info.type_info.serializable_enums) == ["key_only_t", "op_t", "param_only_t", "role_t"]


def test_enum_members_carry_their_values_in_the_underlying_width(enums_info):
    op = enums_info.type_info.serializable_enums["op_t"]
    assert op.underlying_type.bitwidth == 16
    assert [(m.name, m.value) for m in op.members] == [("GET", b"\x00\x10"), ("PUT", b"\x00\x20")]


def test_digest_members_typed_with_an_enum_name_it_and_keep_their_width_in_the_index(enums_info):
    members = {m.name: m.type_spec for m in enums_info.type_info.structs["hot_t"].members}
    assert members["role"].serializable_enum.name == "role_t"
    assert members["v"].bitstring.bit.bitwidth == 8
    assert P4InfoIndex(enums_info).digest_by_name["hot_t"].fields == (("role", 8), ("v", 8), ("op", 16))


def test_controller_header_ids_hash_the_header_type_name(enums_info):
    ids = {h.preamble.name: h.preamble.id for h in enums_info.controller_packet_metadata}
    expected = {"packet_in": "packet_in_h", "packet_out": "packet_out_h"}
    assert ids == {name: (0x04 << 24) | (p4info.jenkins_one_at_a_time(t.encode()) & 0xFFFFFF)
                   for name, t in expected.items()}


def test_actions_listed_are_those_used_by_a_table_or_a_call(enums_info):
    assert [a.preamble.name for a in enums_info.actions] == ["NoAction", "I.note", "I.set_role", "I.mark"]


@pytest.mark.bmv2
@needs_p4c
def test_kvswitch_p4info_is_what_p4c_writes(tmp_path):
    out = tmp_path / "kvswitch.p4info.txtpb"
    subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), "--p4runtime-files",
                    str(out), str(REPO / "p4src" / "kvswitch.p4")], check=True, capture_output=True)
    assert p4info.to_text(compiler.compile_program(REPO / "p4src" / "kvswitch.p4").p4info) == _p4c_text(out)


# ---- a program without tables -------------------------------------------------------------------------------


def _set_config(address: str, info: p4info_pb2.P4Info, device_config: bytes) -> p4runtime_pb2.P4Info:
    """Arbitrate, push the pipeline, read it back; returns the P4Info the switch kept."""
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        stream = StreamClient(stub, election=1)
        try:
            stream.get("arbitration")
            req = CFG(device_id=0, action=CFG.VERIFY_AND_COMMIT, election_id=uint128(1))
            req.config.p4info.CopyFrom(info)
            req.config.p4_device_config = device_config
            stub.SetForwardingPipelineConfig(req)
            got = stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0))
            return got.config.p4info
        finally:
            stream.close()


@pytest.mark.slow
def test_registers_only_program_loads_and_runs():
    from softswitch.p4runtime.device import Device
    from softswitch.p4runtime.device_config import load_bundle
    from softswitch.p4runtime.server import P4RuntimeServer, ServerOptions

    compiled = compiler.compile_program(PROGRAMS / "registers_only.p4")
    assert not compiled.p4info.tables and len(compiled.p4info.registers) == 1
    sent: list[tuple[int, bytes]] = []
    server = P4RuntimeServer(Device(0, 255, lambda port, frame: sent.append((port, frame))), load_bundle,
                             p4info_of=compiler.p4info_of)
    port = server.start(ServerOptions("127.0.0.1:0"))
    try:
        kept = _set_config(f"127.0.0.1:{port}", compiled.p4info, compiled.device_config)
        assert kept == compiled.p4info
        target = server.device.pipeline.target
        frame = bytes(range(14)) + b"payload"
        assert target.process(2, frame) == [(1, frame)]
        assert target.register_read("I.frames_seen", 0) == 1
    finally:
        server.stop(0)


@pytest.mark.bmv2
@pytest.mark.slow
@needs_p4c
def test_bmv2_loads_the_same_registers_only_program(tmp_path):
    """The reference: BMv2 accepts p4c's P4Info of this program (no tables), as the softswitch does above."""
    info_path = tmp_path / "registers_only.p4info.txtpb"
    subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), "--p4runtime-files",
                    str(info_path), str(PROGRAMS / "registers_only.p4")], check=True, capture_output=True)
    grpc_port, thrift_port = _free_port(), _free_port()
    log = (tmp_path / "bmv2.log").open("w")
    proc = subprocess.Popen(["simple_switch_grpc", "--no-p4", "--device-id", "0", "--thrift-port", str(thrift_port),
                             "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        info = p4info.from_text(info_path.read_text())
        kept = _set_config(f"127.0.0.1:{grpc_port}", info, (tmp_path / "registers_only.json").read_bytes())
        assert [r.preamble.name for r in kept.registers] == ["I.frames_seen"] and not kept.tables
    finally:
        proc.terminate()  # BMv2 stops promptly on SIGTERM
        proc.wait(timeout=10)
        log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
