"""The P4Runtime gRPC service of one device: pipeline config, Write/Read, StreamChannel, Capabilities.

Everything hangs off one `P4RuntimeServer` object (no module state): the `Device` it drives, the arbitration
of its clients, the digest batcher. Write errors are reported the way BMv2 (PI) reports them: the call fails
with UNKNOWN and its `grpc-status-details-bin` trailer holds a google.rpc.Status with one p4.v1.Error per
update, so p4runtime-shell and other clients see per-update codes.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch.p4runtime import entities
from softswitch.p4runtime.arbitration import Arbitration, Session, election_id
from softswitch.p4runtime.device import Device
from softswitch.p4runtime.device_config import DeviceConfigError, Loaded, Loader
from softswitch.p4runtime.digests import DigestBatcher
from softswitch.p4runtime.errors import P4RuntimeError
from softswitch.p4runtime.packet_io import frame_from_packet_out, packet_in_from_frame
from softswitch.p4runtime.pipeline import Pipeline
from softswitch.p4runtime.read_response import read_responses
from softswitch.p4runtime.write_request import decode_write_request, from_proto

log = logging.getLogger(__name__)

P4RUNTIME_API_VERSION = "1.4.1"
_CFG = p4runtime_pb2.SetForwardingPipelineConfigRequest
_GET = p4runtime_pb2.GetForwardingPipelineConfigRequest
_OK = p4runtime_pb2.Error(canonical_code=code_pb2.OK)


class ServerStartError(RuntimeError):
    """The gRPC address could not be bound (in use, bad address)."""


@dataclass(frozen=True)
class ServerOptions:
    address: str = "127.0.0.1:9559"
    """host:port to listen on (simple_switch_grpc's `--grpc-server-addr`; its default is 0.0.0.0:9559)."""
    max_workers: int = 16
    """gRPC threads: each open StreamChannel holds one."""


def check_p4info_against(p4info: p4info_pb2.P4Info, program_p4info: p4info_pb2.P4Info | None) -> None:
    """VERIFY: every table and action the P4Info names must exist in the program, with the same shape."""
    if program_p4info is None:
        return
    have_tables = {t.preamble.name: t for t in program_p4info.tables}
    have_actions = {a.preamble.name for a in program_p4info.actions}
    for t in p4info.tables:
        mine = have_tables.get(t.preamble.name)
        if mine is None:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                 f"P4Info table {t.preamble.name} is not in the program")
        if [(m.name, m.bitwidth, m.match_type) for m in t.match_fields] != \
                [(m.name, m.bitwidth, m.match_type) for m in mine.match_fields]:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                 f"P4Info table {t.preamble.name}: match fields differ from the program's")
    # only actions that tables can run must exist: P4Info from another compiler may list a few more
    action_names = {a.preamble.id: a.preamble.name for a in p4info.actions}
    for t in p4info.tables:
        for ref in t.action_refs:
            name = action_names.get(ref.id)
            if name is None or name not in have_actions:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     f"P4Info table {t.preamble.name}: action {name or hex(ref.id)} "
                                     "is not in the program")


class P4RuntimeServer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """P4Runtime for one `Device`. `loader` turns a device config into a target (see device_config)."""

    def __init__(self, device: Device, loader: Loader, p4info_of=None) -> None:
        self.device = device
        self._loader = loader
        self._p4info_of = p4info_of
        """Optional callable: loaded program (IR) → its own P4Info, for VERIFY's consistency check."""
        self.arbitration = Arbitration(device.device_id)
        self.digests = DigestBatcher(self._send_to_primary_digest)
        self._saved: Pipeline | None = None
        self._config_lock = threading.Lock()
        self._stream_ids = itertools.count(1)
        self._grpc: grpc.Server | None = None
        self.port: int | None = None
        device.on_cpu_frame = self._on_cpu_frame
        device.on_digests = self.digests.add

    # ---- lifecycle --------------------------------------------------------------------------------------

    def start(self, options: ServerOptions = ServerOptions()) -> int:
        """Listen on `options.address`; returns the bound port. Raises ServerStartError if it is taken."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=options.max_workers),
                             options=[("grpc.so_reuseport", 0),
                                      ("grpc.max_receive_message_length", 256 << 20),
                                      ("grpc.max_send_message_length", 256 << 20)])
        server.add_generic_rpc_handlers((self._handlers(),))
        try:
            port = server.add_insecure_port(options.address)
        except RuntimeError as e:
            raise ServerStartError(f"cannot listen on {options.address}: {e}") from None
        if port == 0:
            raise ServerStartError(f"cannot listen on {options.address} (address in use?)")
        server.start()
        self.digests.start()
        self._grpc, self.port = server, port
        return port

    def _handlers(self) -> grpc.GenericRpcHandler:
        """The P4Runtime service, with Write decoded by the fast wire decoder (see write_request)."""
        pb = p4runtime_pb2

        def unary(fn, req_cls, resp_cls):
            return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req_cls.FromString,
                                                       response_serializer=resp_cls.SerializeToString)

        return grpc.method_handlers_generic_handler("p4.v1.P4Runtime", {
            "Write": grpc.unary_unary_rpc_method_handler(
                self.Write, request_deserializer=decode_write_request,
                response_serializer=pb.WriteResponse.SerializeToString),
            "Read": grpc.unary_stream_rpc_method_handler(
                self.read_serialized, request_deserializer=pb.ReadRequest.FromString,
                response_serializer=_already_serialized),
            "SetForwardingPipelineConfig": unary(self.SetForwardingPipelineConfig,
                                                 pb.SetForwardingPipelineConfigRequest,
                                                 pb.SetForwardingPipelineConfigResponse),
            "GetForwardingPipelineConfig": unary(self.GetForwardingPipelineConfig,
                                                 pb.GetForwardingPipelineConfigRequest,
                                                 pb.GetForwardingPipelineConfigResponse),
            "StreamChannel": grpc.stream_stream_rpc_method_handler(
                self.StreamChannel, request_deserializer=pb.StreamMessageRequest.FromString,
                response_serializer=pb.StreamMessageResponse.SerializeToString),
            "Capabilities": unary(self.Capabilities, pb.CapabilitiesRequest, pb.CapabilitiesResponse),
        })

    def stop(self, grace: float = 0.5) -> None:
        self.digests.stop()
        if self._grpc is not None:
            self._grpc.stop(grace).wait()
            self._grpc = None

    def wait(self) -> None:
        if self._grpc is not None:
            self._grpc.wait_for_termination()

    def commit_loaded(self, p4info: p4info_pb2.P4Info, device_config: bytes, loaded: Loaded) -> None:
        """Install a pipeline directly (the CLI's PROGRAM argument), as if a controller had committed it."""
        self._commit(Pipeline(p4info, device_config, loaded.target))

    # ---- helpers ----------------------------------------------------------------------------------------

    def _check_device(self, device_id: int, context: grpc.ServicerContext) -> None:
        if device_id != self.device.device_id:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"no device {device_id} (this switch is device {self.device.device_id})")

    def _check_primary(self, eid: p4runtime_pb2.Uint128, role: str, context: grpc.ServicerContext) -> None:
        self._check_primary_id(election_id(eid), role, context)

    def _check_primary_id(self, eid: int, role: str, context: grpc.ServicerContext) -> None:
        if role:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "only the default role is supported")
        if not self.arbitration.is_primary(eid, role):
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"election id {eid} is not the primary's: only the primary may write")

    def _pipeline(self, context: grpc.ServicerContext) -> Pipeline:
        p = self.device.pipeline
        if p is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config set")
            raise AssertionError("context.abort raises")  # for the type checker: abort never returns
        return p

    def _commit(self, pipeline: Pipeline | None) -> None:
        self.device.commit(pipeline)
        self.digests.reset(pipeline)

    # ---- unary RPCs -------------------------------------------------------------------------------------

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        self._check_device(request.device_id, context)
        self._check_primary(request.election_id, request.role, context)
        with self._config_lock:
            action = request.action
            if action == _CFG.COMMIT:
                if self._saved is None:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, "COMMIT without a saved config")
                self._commit(self._saved)
                self._saved = None
                return p4runtime_pb2.SetForwardingPipelineConfigResponse()
            if action not in (_CFG.VERIFY, _CFG.VERIFY_AND_SAVE, _CFG.VERIFY_AND_COMMIT,
                              _CFG.RECONCILE_AND_COMMIT):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown action {action}")
            try:
                pipeline = self._verify(request.config)
            except P4RuntimeError as e:
                context.abort(e.code, e.message)
            if action == _CFG.VERIFY_AND_SAVE:
                self._saved = pipeline
            elif action == _CFG.VERIFY_AND_COMMIT:
                self._commit(pipeline)
                self._saved = None
            elif action == _CFG.RECONCILE_AND_COMMIT:
                try:
                    self._reconcile(self.device.pipeline, pipeline)
                except P4RuntimeError as e:
                    context.abort(e.code, f"cannot reconcile, old pipeline kept: {e.message}")
                self._commit(pipeline)
                self._saved = None
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _verify(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> Pipeline:
        if not config.p4_device_config:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, "p4_device_config is empty")
        try:
            loaded = self._loader(config.p4_device_config, self.device.cpu_port)
        except DeviceConfigError as e:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        if self._p4info_of is not None and loaded.program is not None:
            check_p4info_against(config.p4info, self._p4info_of(loaded.program))
        info = p4info_pb2.P4Info()
        info.CopyFrom(config.p4info)
        return Pipeline(info, config.p4_device_config, loaded.target, config.cookie.cookie)

    def _reconcile(self, old: Pipeline | None, new: Pipeline) -> None:
        """Carry table entries, PRE entries and digest configs over where the new program has them."""
        if old is None:
            return
        new_tables = {t.name: t for t in new.index.tables.values()}
        with self.device.lock:
            for t in old.index.tables.values():
                if t.name not in new_tables or t.is_const:
                    continue
                for e in old.target.table_entries(t.name):
                    entities._call(new.target.table_insert, e)
            new.entry_metadata.update({k: v for k, v in old.entry_metadata.items() if k[0] in new_tables})
            for gid, g in old.multicast_groups.items():
                up = p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=g)
                entities.write_pre_entry(new, entities.INSERT, up)
                assert gid in new.multicast_groups
            for s in old.clone_sessions.values():
                entities.write_pre_entry(new, entities.INSERT,
                                         p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=s))
            names = {d.name: d.id for d in new.index.digests.values()}
            for did, cfg in old.digest_configs.items():
                name = old.index.digests[did].name
                if name in names:
                    new.digest_configs[names[name]] = cfg

    def GetForwardingPipelineConfig(self, request, context):
        self._check_device(request.device_id, context)
        p = self._pipeline(context)
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        rt = request.response_type
        if rt in (_GET.ALL, _GET.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(p.p4info)
        if rt in (_GET.ALL, _GET.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = p.device_config
        resp.config.cookie.cookie = p.cookie
        return resp

    def Write(self, request, context):
        if isinstance(request, p4runtime_pb2.WriteRequest):  # an in-process caller
            request = from_proto(request)
        self._check_device(request.device_id, context)
        self._check_primary_id(request.election_id, request.role, context)
        p = self._pipeline(context)
        if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported")
        errors: list[p4runtime_pb2.Error] = []
        failed = False
        with self.device.lock:
            for utype, entity in request.updates:
                err = _OK
                try:
                    entities.write_entity(p, utype, entity)
                except P4RuntimeError as e:
                    err = p4runtime_pb2.Error(canonical_code=e.code.value[0], message=e.message)
                    failed = True
                except Exception as e:  # a bug must reach the client as an error, not kill the thread
                    log.exception("write failed")
                    err = p4runtime_pb2.Error(canonical_code=code_pb2.INTERNAL, message=repr(e))
                    failed = True
                errors.append(err)
        if failed:
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="one or more updates failed")
            for err in errors:
                detail = any_pb2.Any()
                detail.Pack(err)
                status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            first = next(e for e in errors if e.canonical_code != code_pb2.OK)
            context.abort(grpc.StatusCode.UNKNOWN, f"{code_pb2.Code.Name(first.canonical_code)}: {first.message}")
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        """ReadResponse messages, for in-process callers (gRPC clients get `read_serialized`'s bytes)."""
        for data in self.read_serialized(request, context):
            yield p4runtime_pb2.ReadResponse.FromString(data)

    def read_serialized(self, request, context):
        """Serialised ReadResponses of up to 1,000 entities each (see read_response: protobuf's own message
        objects cost a millisecond per table entry in the pure-Python runtime).

        Everything is read under the device lock first, so a failing entity aborts the call before any
        response is sent and the snapshot is consistent; sending happens after the lock is released.
        """
        self._check_device(request.device_id, context)
        p = self._pipeline(context)
        out: list[bytes] = []
        try:
            with self.device.lock:
                for want in request.entities:
                    out.extend(entities.read_entity(p, want))
        except P4RuntimeError as e:
            context.abort(e.code, e.message)
        yield from read_responses(out)

    # ---- stream -----------------------------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context):
        stream_id = next(self._stream_ids)
        outbox: queue.Queue = queue.Queue()
        state: dict = {"session": None}

        def notify(msg):
            outbox.put(msg)

        def reader():
            try:
                for req in request_iterator:
                    kind = req.WhichOneof("update")
                    if kind == "arbitration":
                        err = self._on_arbitration(stream_id, req.arbitration, notify, state)
                        if err is not None:
                            outbox.put(err)
                            return
                    elif state["session"] is None:
                        outbox.put(_stream_error(code_pb2.FAILED_PRECONDITION,
                                                 "send an arbitration message first", req))
                    elif kind == "packet":
                        self._on_packet_out(state["session"], req)
                    elif kind == "digest_ack":
                        self.digests.ack(req.digest_ack.digest_id, req.digest_ack.list_id)
                    else:
                        outbox.put(_stream_error(code_pb2.UNIMPLEMENTED, f"stream message {kind}", req))
            except grpc.RpcError:
                pass  # the client went away
            except Exception:
                log.exception("stream %d reader failed", stream_id)
            finally:
                outbox.put(None)

        threading.Thread(target=reader, name=f"p4rt-stream-{stream_id}", daemon=True).start()
        context.add_callback(lambda: outbox.put(None))
        try:
            while True:
                msg = outbox.get()
                if msg is None:
                    break
                if isinstance(msg, tuple):  # (code, message): end the stream with an error
                    context.abort(*msg)
                yield msg
        finally:
            self.arbitration.remove(stream_id)

    def _on_arbitration(self, stream_id, arb, notify, state):
        if arb.device_id != self.device.device_id:
            return (grpc.StatusCode.NOT_FOUND, f"no device {arb.device_id}")
        if arb.role.name:
            return (grpc.StatusCode.UNIMPLEMENTED, "only the default role is supported")
        session = Session(stream_id, election_id(arb.election_id), arb.role.name, notify)
        err = self.arbitration.update(session)
        if err is not None:
            return (grpc.StatusCode.INVALID_ARGUMENT, err)
        state["session"] = session
        return None

    def _on_packet_out(self, session: Session, req: p4runtime_pb2.StreamMessageRequest) -> None:
        if not self.arbitration.is_primary(session.election_id, session.role):
            session.notify(_stream_error(code_pb2.PERMISSION_DENIED, "only the primary may send packet-outs", req))
            return
        p = self.device.pipeline
        if p is None:
            session.notify(_stream_error(code_pb2.FAILED_PRECONDITION, "no forwarding pipeline config", req))
            return
        if self.device.cpu_port is None:
            session.notify(_stream_error(code_pb2.FAILED_PRECONDITION, "no CPU port (start with --cpu-port)", req))
            return
        try:
            frame = frame_from_packet_out(p.index.headers.get("packet_out"), req.packet)
        except P4RuntimeError as e:
            session.notify(_stream_error(e.code.value[0], e.message, req))
            return
        self.device.receive(self.device.cpu_port, frame)

    def _on_cpu_frame(self, frame: bytes) -> None:
        p = self.device.pipeline
        primary = self.arbitration.primary()
        if p is None or primary is None:
            return
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.packet.CopyFrom(packet_in_from_frame(p.index.headers.get("packet_in"), frame))
        primary.notify(msg)

    def _send_to_primary_digest(self, dl: p4runtime_pb2.DigestList) -> None:
        primary = self.arbitration.primary()
        if primary is not None:
            primary.notify(p4runtime_pb2.StreamMessageResponse(digest=dl))


def _already_serialized(data: bytes) -> bytes:
    return data


def _stream_error(code: int, message: str, req: p4runtime_pb2.StreamMessageRequest):
    msg = p4runtime_pb2.StreamMessageResponse()
    msg.error.canonical_code = code
    msg.error.message = message
    if req.HasField("packet"):
        msg.error.packet_out.packet_out.CopyFrom(req.packet)
    elif req.HasField("digest_ack"):
        msg.error.digest_list_ack.digest_list_ack.CopyFrom(req.digest_ack)
    return msg
