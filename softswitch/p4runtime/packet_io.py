"""Packet-in / packet-out framing: the `@controller_header` headers P4Info describes, bit-packed in order.

On the CPU port the program sees (packet-out) and emits (packet-in) these headers in front of the frame;
the controller sees them as `PacketMetadata`. Field widths need not be byte multiples; the header as a whole
is (P4 headers are byte-aligned), so it is packed MSB first into `byte_len` bytes.
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from p4rt import bytestrings
from softswitch.p4runtime.errors import decode_bytestring, invalid
from softswitch.p4runtime.index import HeaderInfo


def frame_from_packet_out(header: HeaderInfo | None, po: p4runtime_pb2.PacketOut) -> bytes:
    """The bytes that enter the CPU port for one PacketOut (missing metadata count as 0)."""
    if header is None:
        if po.metadata:
            raise invalid("the program has no @controller_header(\"packet_out\"): metadata not allowed")
        return po.payload
    by_id = {f.id: f for f in header.fields}
    values: dict[int, int] = {}
    for md in po.metadata:
        f = by_id.get(md.metadata_id)
        if f is None:
            raise invalid(f"packet_out has no metadata with id {md.metadata_id}")
        values[f.id] = decode_bytestring(md.value, f.bitwidth, f"packet_out metadata {f.name}")
    acc, bits = 0, 0
    for f in header.fields:
        acc = (acc << f.bitwidth) | values.get(f.id, 0)
        bits += f.bitwidth
    pad = header.byte_len * 8 - bits
    return (acc << pad).to_bytes(header.byte_len, "big") + po.payload


def packet_in_from_frame(header: HeaderInfo | None, frame: bytes) -> p4runtime_pb2.PacketIn:
    """Split a frame the program sent to the CPU port into PacketIn metadata and payload."""
    pi = p4runtime_pb2.PacketIn()
    if header is None or len(frame) < header.byte_len:
        pi.payload = frame
        return pi
    n = header.byte_len
    acc = int.from_bytes(frame[:n], "big")
    shift = n * 8
    for f in header.fields:
        shift -= f.bitwidth
        value = (acc >> shift) & ((1 << f.bitwidth) - 1)
        pi.metadata.add(metadata_id=f.id, value=bytestrings.encode(value))
    pi.payload = frame[n:]
    return pi
