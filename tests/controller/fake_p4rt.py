"""An in-process fake P4Runtime server (finsy's idea): enough of the protocol to unit-test our client.

Keeps table entries, default actions, counters and digest configs in dicts, arbitrates by election id,
reports Write errors the BMv2 way (UNKNOWN + per-update p4.v1.Error in grpc-status-details-bin), and lets a
test push packet-ins and digest lists and see packet-outs. It has no pipeline: tests script the switch's side.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def _match_key(entry: p4runtime_pb2.TableEntry) -> tuple:
    return (entry.table_id, tuple(sorted(m.SerializeToString() for m in entry.match)), entry.priority)


class FakeP4Runtime(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.config: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.tables: dict[tuple, p4runtime_pb2.TableEntry] = {}
        self.defaults: dict[int, p4runtime_pb2.TableEntry] = {}
        self.counters: dict[tuple[int, int], tuple[int, int]] = {}
        self.counter_sizes: dict[int, int] = {}
        self.digests: dict[int, p4runtime_pb2.DigestEntry] = {}
        self.groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = {}
        self.packet_outs: queue.Queue = queue.Queue()
        self.acks: queue.Queue = queue.Queue()
        self.on_packet_out = None
        """Optional callable(PacketOut) -> list[PacketIn]: the scripted switch side."""
        self._streams: list[queue.Queue] = []
        self._lock = threading.Lock()
        self.pipeline_sets = 0

    # ---- unary -------------------------------------------------------------------------------------------

    def SetForwardingPipelineConfig(self, request, context):
        self.config = request.config
        self.tables.clear()
        self.defaults.clear()
        self.counters.clear()
        self.counter_sizes = {c.preamble.id: c.size for c in request.config.p4info.counters}
        self.pipeline_sets += 1
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        if self.config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config")
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        response.config.cookie.CopyFrom(self.config.cookie)
        return response

    def Write(self, request, context):
        errors = []
        for update in request.updates:
            errors.append(self._apply(update))
        if any(code != code_pb2.OK for code, _ in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failed")
            for code, message in errors:
                detail = any_pb2.Any()
                detail.Pack(p4runtime_pb2.Error(canonical_code=code, message=message))
                status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "write failed")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, update) -> tuple[int, str]:
        entity = update.entity
        kind = entity.WhichOneof("entity")
        with self._lock:
            if kind == "table_entry":
                entry = entity.table_entry
                if entry.is_default_action:
                    self.defaults[entry.table_id] = entry
                    return code_pb2.OK, ""
                key = _match_key(entry)
                if update.type == p4runtime_pb2.Update.INSERT:
                    if key in self.tables:
                        return code_pb2.ALREADY_EXISTS, "entry exists"
                    self.tables[key] = entry
                elif update.type == p4runtime_pb2.Update.MODIFY:
                    if key not in self.tables:
                        return code_pb2.NOT_FOUND, "no such entry"
                    self.tables[key] = entry
                else:
                    if self.tables.pop(key, None) is None:
                        return code_pb2.NOT_FOUND, "no such entry"
                return code_pb2.OK, ""
            if kind == "digest_entry":
                exists = entity.digest_entry.digest_id in self.digests
                if update.type == p4runtime_pb2.Update.INSERT and exists:
                    return code_pb2.ALREADY_EXISTS, "digest configured"
                self.digests[entity.digest_entry.digest_id] = entity.digest_entry
                return code_pb2.OK, ""
            if kind == "packet_replication_engine_entry":
                group = entity.packet_replication_engine_entry.multicast_group_entry
                exists = group.multicast_group_id in self.groups
                if update.type == p4runtime_pb2.Update.INSERT and exists:
                    return code_pb2.ALREADY_EXISTS, "group exists"
                self.groups[group.multicast_group_id] = group
                return code_pb2.OK, ""
        return code_pb2.UNIMPLEMENTED, f"{kind} not supported"

    def Read(self, request, context):
        response = p4runtime_pb2.ReadResponse()
        for entity in request.entities:
            kind = entity.WhichOneof("entity")
            if kind == "table_entry":
                for entry in list(self.tables.values()):
                    if entity.table_entry.table_id in (0, entry.table_id):
                        response.entities.add().table_entry.CopyFrom(entry)
            elif kind == "counter_entry":
                counter_id = entity.counter_entry.counter_id
                indices = ([entity.counter_entry.index.index] if entity.counter_entry.HasField("index")
                           else range(self.counter_sizes.get(counter_id, 0)))
                for index in indices:
                    packets, bytes_ = self.counters.get((counter_id, index), (0, 0))
                    found = response.entities.add().counter_entry
                    found.counter_id = counter_id
                    found.index.index = index
                    found.data.packet_count, found.data.byte_count = packets, bytes_
            else:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, f"read of {kind}")
        yield response

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version="1.4.1")

    # ---- stream ------------------------------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context):
        out: queue.Queue = queue.Queue()
        with self._lock:
            self._streams.append(out)

        def read_requests():
            try:
                for request in request_iterator:
                    kind = request.WhichOneof("update")
                    if kind == "arbitration":
                        reply = p4runtime_pb2.StreamMessageResponse()
                        reply.arbitration.CopyFrom(request.arbitration)
                        reply.arbitration.status.code = code_pb2.OK
                        out.put(reply)
                    elif kind == "packet":
                        self.packet_outs.put(request.packet)
                        if self.on_packet_out is not None:
                            for packet_in in self.on_packet_out(request.packet):
                                reply = p4runtime_pb2.StreamMessageResponse()
                                reply.packet.CopyFrom(packet_in)
                                out.put(reply)
                    elif kind == "digest_ack":
                        self.acks.put(request.digest_ack)
            except grpc.RpcError:
                pass
            finally:
                out.put(None)

        threading.Thread(target=read_requests, daemon=True).start()
        try:
            while True:
                item = out.get()
                if item is None:
                    return
                yield item
        finally:
            with self._lock:
                self._streams.remove(out)

    def push(self, response: p4runtime_pb2.StreamMessageResponse) -> None:
        """Send a stream message (packet-in, digest list) to every connected client."""
        with self._lock:
            for out in self._streams:
                out.put(response)

    @property
    def connected(self) -> int:
        return len(self._streams)


class FakeServer:
    """A gRPC server around FakeP4Runtime on a free loopback port; restartable on the same port."""

    def __init__(self, servicer: FakeP4Runtime | None = None, port: int = 0) -> None:
        self.servicer = servicer or FakeP4Runtime()
        self.port = port
        self.server: grpc.Server | None = None

    def start(self) -> str:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{self.port}")
        self.server.start()
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None)
            self.server = None


@contextlib.contextmanager
def controller_on_fake_switch(tmp_path: Path, p4info: Path, timeout: float) -> Iterator[tuple[Any, FakeP4Runtime]]:
    """A whole `controller.service.Controller` started (within `timeout` s) against a FakeServer that serves
    `p4info`'s pipeline, with a throw-away device config and state under `tmp_path`: (controller, the fake
    switch). Both stop on leaving."""
    from controller.service import Controller, ServeOptions

    server = FakeServer()
    address = server.start()
    device_config = tmp_path / "kvswitch.json"
    device_config.write_bytes(b'{"fake": "device config"}')
    controller = Controller(ServeOptions(switch=address, p4info=p4info, device_config=device_config,
                                         state=tmp_path / "state.sqlite", api="127.0.0.1:0"))
    try:
        controller.start(timeout=timeout)
        yield controller, server.servicer
    finally:
        controller.stop()
        server.stop()
