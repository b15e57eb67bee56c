"""The test harness's P4Runtime session for driving a switch process: names from P4Info, one stream.

Only what BMv2's P4Runtime server offers: pipeline config, Write/Read of table entries, indirect and direct
counters, PRE entries and digest configs; the StreamChannel for arbitration, packet-out, packet-in and digest
lists. No globals: one `P4RuntimeSession` per switch, closed explicitly. Built on `p4rt/` as the controller is:
the connection is `p4rt.connection.SwitchConnection`, P4Info look-ups are `p4rt.p4info.P4Info`'s, byte
strings `p4rt.bytestrings`', and a refused RPC raises `p4rt.errors.P4RuntimeError` (a `TargetError` whose
`code` is the first failed update's canonical code, as the in-process target raises it).
"""

from __future__ import annotations

import contextlib
import os
import queue
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4rt.bytestrings import encode as canonical
from p4rt.connection import DigestList, PacketIn, SwitchConnection, SwitchOptions
from p4rt.errors import P4RuntimeError, TargetError
from p4rt.p4info import P4Info

Update = p4runtime_pb2.Update

__all__ = ["Field", "MatchField", "P4InfoNames", "P4RuntimeError", "P4RuntimeSession", "TableInfo", "Update",
           "canonical", "header_len", "pack_header", "target_error", "unpack_header"]


def target_error(e: grpc.RpcError) -> P4RuntimeError:
    """The error an RPC failure stands for (`P4RuntimeError.from_grpc`): `code` is the first failed update's
    canonical code, else the call's."""
    return P4RuntimeError.from_grpc(e)


# ---- names from P4Info -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class MatchField(Field):
    match_type: int


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    fields: tuple[MatchField, ...]
    is_const: bool
    direct_counter: bool

    def field(self, name: str) -> MatchField:
        for f in self.fields:
            if f.name == name:
                return f
        raise TargetError("INVALID_ARGUMENT", f"table {self.name} has no match field {name!r}")


class P4InfoNames:
    """The `p4rt.p4info.P4Info` look-ups in the shape `kvtesting.remote_target.RemoteTarget` uses them: by the fully
    qualified names of the `Target` interface (aliases too) and by id; an unknown name is a NOT_FOUND
    `TargetError`, as the in-process target answers."""

    def __init__(self, info: p4info_pb2.P4Info) -> None:
        self.info = info
        self.p4info = p4info = P4Info(info)
        direct_counters = {d.preamble.id for d in info.direct_counters}
        self.tables = {t.preamble.name: TableInfo(
            t.preamble.id, t.preamble.name,
            tuple(MatchField(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields),
            t.is_const_table, any(r in direct_counters for r in t.direct_resource_ids))
            for t in info.tables}
        self.table_by_id = {t.id: t for t in self.tables.values()}
        self.actions = {a.preamble.name: a for a in info.actions}
        self.action_by_id = {a.preamble.id: a for a in info.actions}
        self.counters = {c.preamble.name: c for c in info.counters}
        self.counter_by_id = {c.preamble.id: c for c in info.counters}
        self.digests = {d.preamble.name: d for d in info.digests}
        self.digest_by_id = {d.preamble.id: d for d in info.digests}
        self.controller_headers = {
            h.preamble.name: tuple(Field(m.id, m.name, m.bitwidth)
                                   for m in sorted(p4info.packet_metadata(h.preamble.name), key=lambda m: m.id))
            for h in info.controller_packet_metadata}

    @classmethod
    def from_text(cls, text: str) -> P4InfoNames:
        info = p4info_pb2.P4Info()
        text_format.Parse(text, info, allow_unknown_field=True)
        return cls(info)

    def _lookup(self, resolve, name: str, kind: str):
        try:
            return resolve(name)
        except KeyError:
            raise TargetError("NOT_FOUND", f"no {kind} {name!r} in P4Info") from None

    def table(self, name: str) -> TableInfo:
        return self.tables[self._lookup(self.p4info.table_name, name, "table")]

    def action(self, name: str) -> p4info_pb2.Action:
        return self.action_by_id[self._lookup(self.p4info.action_id, name, "action")]

    def counter(self, name: str) -> p4info_pb2.Counter:
        return self.counter_by_id[self._lookup(self.p4info.counter_id, name, "counter")]

    def digest_fields(self, digest: p4info_pb2.Digest) -> tuple[Field, ...]:
        """(name, width) of the digest's struct members, in declaration order (from type_info)."""
        return tuple(Field(i + 1, name, width)
                     for i, (name, width) in enumerate(self.p4info.digest_fields(digest.preamble.name)))


def pack_header(fields: Sequence[Field], values: dict[int, int]) -> bytes:
    """A `@controller_header` as the program sees it: fields MSB first, padded to whole bytes."""
    acc, bits = 0, 0
    for f in fields:
        acc = (acc << f.bitwidth) | values.get(f.id, 0)
        bits += f.bitwidth
    pad = -bits % 8
    return (acc << pad).to_bytes((bits + pad) // 8, "big")


def unpack_header(fields: Sequence[Field], data: bytes) -> dict[int, int]:
    """The inverse of `pack_header` on the first bytes of `data`."""
    bits = sum(f.bitwidth for f in fields)
    n = (bits + 7) // 8
    acc = int.from_bytes(data[:n], "big") >> (n * 8 - bits)
    out = {}
    for f in reversed(fields):
        out[f.id] = acc & ((1 << f.bitwidth) - 1)
        acc >>= f.bitwidth
    return out


def header_len(fields: Sequence[Field]) -> int:
    return (sum(f.bitwidth for f in fields) + 7) // 8


# ---- the session -----------------------------------------------------------------------------------------

class P4RuntimeSession:
    """One primary connection to one device, the project's `p4rt.connection.SwitchConnection`, shaped for the
    harness: packet-ins land in `packet_ins` (a queue of `p4.v1.PacketIn`), digest lists are acknowledged as
    they arrive and land in `digest_lists`; each arrival also writes a byte to `wake_fd`, so a caller can poll
    it with packet sockets. RPC failures raise `P4RuntimeError`.
    """

    def __init__(self, address: str, device_id: int, election_id: int = 1, timeout: float = 30.0,
                 rpc_timeout: float = 300.0) -> None:
        self.device_id = device_id
        self.packet_ins: queue.SimpleQueue[p4runtime_pb2.PacketIn] = queue.SimpleQueue()
        self.digest_lists: queue.SimpleQueue[p4runtime_pb2.DigestList] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        # No P4Info until set_pipeline: the stream's messages are handed on as received.
        self.connection = SwitchConnection(
            SwitchOptions(address, device_id, election_id, rpc_timeout=rpc_timeout),
            P4Info(p4info_pb2.P4Info()), on_packet_in=self._on_packet_in, on_digest=self._on_digest)
        try:
            self.connection.open(timeout)
        except P4RuntimeError:
            self._close_pipe()
            raise

    @property
    def wake_fd(self) -> int:
        return self._wake_r

    def clear_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _wake(self, why: bytes) -> None:
        with contextlib.suppress(OSError):  # wake pipe closed during shutdown
            os.write(self._wake_w, why)

    def _on_packet_in(self, packet: PacketIn) -> None:
        assert packet.message is not None
        self.packet_ins.put(packet.message)
        self._wake(b"p")

    def _on_digest(self, digests: DigestList) -> None:
        assert digests.message is not None
        self.digest_lists.put(digests.message)  # the connection acknowledges the list when this returns
        self._wake(b"d")

    def close(self) -> None:
        self.connection.close()
        self._close_pipe()

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- unary RPCs
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes) -> None:
        self.connection.set_pipeline(device_config, p4info=P4Info(p4info))

    def write(self, updates: Iterable[p4runtime_pb2.Update]) -> None:
        self.connection.write(list(updates))

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        return self.connection.read(list(entities))

    def packet_out(self, payload: bytes, metadata: dict[int, int]) -> None:
        """Send `payload` with the `packet_out` header fields given by id (canonical byte strings)."""
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = payload
        for mid, value in sorted(metadata.items()):
            request.packet.metadata.add(metadata_id=mid, value=canonical(value))
        self.connection.send(request)
