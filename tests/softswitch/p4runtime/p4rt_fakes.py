"""Test doubles for the P4Runtime layer: a small dict-backed fake `Target`, its P4Info, an in-process server.

The fake stands in for the executor at unit level only: it stores entries like a target must (one entry per
key and priority, a size limit) and forwards packets by a rule the test gives, so server behaviour can be
tested in milliseconds. The interop tests (test_p4rt_interop.py) use the real executor through real ports.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch import target as tg
from softswitch.p4runtime import p4info, schema
from softswitch.p4runtime.device import Device
from softswitch.p4runtime.device_config import Loaded
from softswitch.p4runtime.server import P4RuntimeServer, ServerOptions

CPU_PORT = 255


class FakeTarget:
    """Entries in dicts; `process` runs `forward(port, data)` and records digests it returns."""

    def __init__(self, sizes: dict[str, int], defaults: dict[str, str], counters: dict[str, int],
                 registers: dict[str, int], forward: Callable | None = None, cpu_port: int | None = CPU_PORT):
        self.cpu_port = cpu_port
        self.sizes = sizes
        self.tables: dict[str, dict] = {t: {} for t in sizes}
        self.defaults = {t: (a, {}) for t, a in defaults.items()}
        self.counters = {n: [(0, 0)] * size for n, size in counters.items()}
        self.registers = {n: [0] * size for n, size in registers.items()}
        self.direct: dict[tuple, tuple[int, int]] = {}
        self.meters: dict[tuple[str, int], tuple] = {}
        self.mcast: dict[int, list[tg.Replica]] = {}
        self.clones: dict[int, tuple[list[tg.Replica], int]] = {}
        self.pending_digests: list[tg.DigestMessage] = []
        self.forward = forward or (lambda port, data: ([], []))
        self.processed: list[tuple[int, bytes]] = []

    @staticmethod
    def _key(match, priority):
        return (tuple(sorted(match.items(), key=lambda kv: kv[0])), priority)

    def process(self, ingress_port, data):
        self.processed.append((ingress_port, data))
        outs, digests = self.forward(ingress_port, data)
        self.pending_digests.extend(digests)
        return outs

    def drain_digests(self):
        out, self.pending_digests = self.pending_digests, []
        return out

    def table_insert(self, entry):
        t = self.tables[entry.table]
        key = self._key(entry.match, entry.priority)
        if key in t:
            raise tg.TargetError("ALREADY_EXISTS", f"{entry.table}: entry exists")
        if len(t) >= self.sizes[entry.table]:
            raise tg.TargetError("RESOURCE_EXHAUSTED", f"{entry.table} is full")
        t[key] = entry
        self.direct[(entry.table, key)] = (0, 0)

    def table_modify(self, entry):
        t = self.tables[entry.table]
        key = self._key(entry.match, entry.priority)
        if key not in t:
            raise tg.TargetError("NOT_FOUND", f"{entry.table}: no such entry")
        t[key] = entry

    def table_delete(self, table, match, priority=0):
        key = self._key(match, priority)
        if key not in self.tables[table]:
            raise tg.TargetError("NOT_FOUND", f"{table}: no such entry")
        del self.tables[table][key]

    def table_entries(self, table):
        return list(self.tables[table].values())

    def table_set_default(self, table, action, params=None):
        self.defaults[table] = (action, dict(params or {}))

    def table_get_default(self, table):
        return self.defaults[table]

    def register_read(self, name, index):
        return self.registers[name][index]

    def register_write(self, name, index, value):
        self.registers[name][index] = value

    def counter_read(self, name, index):
        return self.counters[name][index]

    def counter_write(self, name, index, packets, bytes_):
        self.counters[name][index] = (packets, bytes_)

    def direct_counter_read(self, table, match, priority=0):
        return self.direct[(table, self._key(match, priority))]

    def direct_counter_write(self, table, match, packets, bytes_, priority=0):
        key = (table, self._key(match, priority))
        if key not in self.direct:
            raise tg.TargetError("NOT_FOUND", f"{table}: no such entry")
        self.direct[key] = (packets, bytes_)

    def meter_set(self, name, index, cir, cburst, pir, pburst):
        self.meters[(name, index)] = (cir, cburst, pir, pburst)

    def meter_clear(self, name, index):
        self.meters.pop((name, index), None)

    def mcast_group_set(self, group_id, replicas):
        self.mcast[group_id] = list(replicas)

    def mcast_group_delete(self, group_id):
        del self.mcast[group_id]

    def clone_session_set(self, session_id, replicas, truncate=0):
        self.clones[session_id] = (list(replicas), truncate)

    def clone_session_delete(self, session_id):
        del self.clones[session_id]


def _n(name, **kw):
    return schema.Named(name, **kw)


SMALL_PROGRAM = schema.Program(
    name="small",
    tables=(
        schema.Table(_n("MyIngress.ipv4_lpm", brief="routes"),
                     (schema.MatchField("hdr.ipv4.dst_addr", 32, "lpm"),),
                     (schema.ActionRef("MyIngress.forward"), schema.ActionRef("MyIngress.drop"),
                      schema.ActionRef("NoAction", "DEFAULT_ONLY")),
                     size=4, direct_counter="MyIngress.route_hits"),
        schema.Table(_n("MyIngress.acl"),
                     (schema.MatchField("hdr.ipv4.src_addr", 32, "ternary"),
                      schema.MatchField("hdr.tcp.dst_port", 16, "range"),
                      schema.MatchField("standard_metadata.ingress_port", 9, "optional")),
                     (schema.ActionRef("MyIngress.drop"), schema.ActionRef("NoAction")),
                     size=16),
        schema.Table(_n("MyIngress.fixed"),
                     (schema.MatchField("hdr.ethernet.ether_type", 16, "exact"),),
                     (schema.ActionRef("MyIngress.drop"),),
                     const_default_action="MyIngress.drop", is_const=True, has_initial_entries=True),
    ),
    actions=(
        schema.Action(_n("MyIngress.forward"), (schema.Param("port", 9), schema.Param("dmac", 48))),
        schema.Action(_n("MyIngress.drop", fixed_id=0x10)),
        schema.Action(_n("NoAction")),
    ),
    counters=(schema.Counter(_n("MyIngress.port_bytes"), "BOTH", 8),),
    direct_counters=(schema.DirectCounter(_n("MyIngress.route_hits"), "PACKETS", "MyIngress.ipv4_lpm"),),
    meters=(schema.Meter(_n("MyIngress.rate"), "BYTES", 4),),
    registers=(schema.Register(_n("MyIngress.last_seen"), 48, 16),),
    digests=(schema.Digest(_n("learn_t"), (("src_mac", 48), ("port", 9))),),
    controller_headers=(
        schema.ControllerHeader(_n("packet_in"), (("ingress_port", 9), ("_pad", 7))),
        schema.ControllerHeader(_n("packet_out"), (("egress_port", 9), ("_pad", 7))),
    ),
)


def make_fake(forward=None) -> FakeTarget:
    return FakeTarget(sizes={"MyIngress.ipv4_lpm": 4, "MyIngress.acl": 16, "MyIngress.fixed": 4},
                      defaults={"MyIngress.ipv4_lpm": "NoAction", "MyIngress.acl": "NoAction",
                                "MyIngress.fixed": "MyIngress.drop"},
                      counters={"MyIngress.port_bytes": 8}, registers={"MyIngress.last_seen": 16},
                      forward=forward)


class Harness:
    """An in-process server on a free loopback port, plus a stub and helpers to build requests."""

    def __init__(self, forward=None):
        self.sent: list[tuple[int, bytes]] = []
        self.info = p4info.build_p4info(SMALL_PROGRAM)
        self.fake = make_fake(forward)
        self.device = Device(0, CPU_PORT, lambda port, frame: self.sent.append((port, frame)))
        self.loaded_configs: list[bytes] = []

        def loader(config: bytes, cpu_port):
            self.loaded_configs.append(config)
            if config == b"broken":
                from softswitch.p4runtime.device_config import DeviceConfigError
                raise DeviceConfigError("prog.p4:3:5: syntax error")
            return Loaded(self.fake if config == b"fake" else make_fake(forward))

        self.server = P4RuntimeServer(self.device, loader)
        port = self.server.start(ServerOptions("127.0.0.1:0"))
        self.address = f"127.0.0.1:{port}"
        self.channel = grpc.insecure_channel(self.address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.streams: list = []

    def ids(self, kind: str) -> dict[str, int]:
        return {o.preamble.name: o.preamble.id for o in getattr(self.info, kind)}

    def close(self):
        for s in self.streams:
            s.close()
        self.channel.close()
        self.server.stop(0)


def uint128(x: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=x >> 64, low=x & ((1 << 64) - 1))


class StreamClient:
    """One StreamChannel: requests from a queue, responses collected by a thread."""

    def __init__(self, stub, device_id: int = 0, election: int | None = 1):
        import queue
        import threading

        self._out: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()

        def requests():
            while True:
                msg = self._out.get()
                if msg is None:
                    return
                yield msg

        self.call = stub.StreamChannel(requests())

        def pump():
            try:
                for resp in self.call:
                    self.inbox.put(resp)
            except grpc.RpcError as e:
                self.inbox.put(e)

        self._thread = threading.Thread(target=pump, daemon=True)
        self._thread.start()
        if election is not None:
            self.arbitrate(device_id, election)

    def arbitrate(self, device_id: int, election: int):
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.CopyFrom(uint128(election))
        self._out.put(req)

    def send(self, req):
        self._out.put(req)

    def get(self, kind: str, timeout: float = 30.0):
        """The next response of `kind` ("arbitration", "packet", "digest", "error"), skipping others. The
        default wait is a bound no busy machine reaches (a response comes in milliseconds); a test that expects
        no response passes its own short `timeout`."""
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {kind} message within {timeout}s") from None
            if isinstance(msg, grpc.RpcError):
                if kind == "rpc_error":
                    return msg
                raise AssertionError(f"stream ended: {msg.code()} {msg.details()}")
            if kind != "rpc_error" and msg.WhichOneof("update") == kind:
                return msg

    def close(self):
        self._out.put(None)
        self.call.cancel()
