"""Controller header framing: bit-packed metadata in front of the frame, both directions."""

from __future__ import annotations

import grpc
import pytest
from p4.v1 import p4runtime_pb2

from softswitch.p4runtime.errors import P4RuntimeError
from softswitch.p4runtime.index import FieldInfo, HeaderInfo
from softswitch.p4runtime.packet_io import frame_from_packet_out, packet_in_from_frame

# 9-bit port, 3-bit reason, 4 pad bits: 2 bytes
HEADER = HeaderInfo(0x04000001, "packet_out", (FieldInfo(1, "port", 9), FieldInfo(2, "reason", 3),
                                               FieldInfo(3, "_pad", 4)))


def test_packet_out_packs_fields_msb_first():
    po = p4runtime_pb2.PacketOut(payload=b"frame")
    po.metadata.add(metadata_id=1, value=b"\x01\x01")  # 257
    po.metadata.add(metadata_id=2, value=b"\x05")
    assert frame_from_packet_out(HEADER, po) == bytes([0b10000000, 0b11010000]) + b"frame"


def test_packet_in_unpacks_what_packet_out_packed():
    po = p4runtime_pb2.PacketOut(payload=b"frame")
    po.metadata.add(metadata_id=1, value=b"\x01\x01")
    po.metadata.add(metadata_id=2, value=b"\x05")
    pi = packet_in_from_frame(HEADER, frame_from_packet_out(HEADER, po))
    assert pi.payload == b"frame"
    assert [(m.metadata_id, m.value) for m in pi.metadata] == [(1, b"\x01\x01"), (2, b"\x05"), (3, b"\x00")]


@pytest.mark.parametrize(("mid", "value", "code"), [
    (9, b"\x01", grpc.StatusCode.INVALID_ARGUMENT),
    (2, b"\x08", grpc.StatusCode.OUT_OF_RANGE),
])
def test_bad_metadata_is_refused(mid, value, code):
    po = p4runtime_pb2.PacketOut(payload=b"x")
    po.metadata.add(metadata_id=mid, value=value)
    with pytest.raises(P4RuntimeError) as e:
        frame_from_packet_out(HEADER, po)
    assert e.value.code == code


def test_frame_shorter_than_header_is_passed_whole():
    assert packet_in_from_frame(HEADER, b"\x01").payload == b"\x01"
