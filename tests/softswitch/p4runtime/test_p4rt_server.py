"""The P4Runtime server against a fake target: every RPC, arbitration, error codes, packet I/O and digests."""

from __future__ import annotations

import time

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2
from p4rt_fakes import CPU_PORT, Harness, StreamClient, uint128

from softswitch import target as tg

CFG = p4runtime_pb2.SetForwardingPipelineConfigRequest
INSERT, MODIFY, DELETE = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE


# ---- request builders ----------------------------------------------------------------------------------

def set_config(h: Harness, action=CFG.VERIFY_AND_COMMIT, config=b"fake", election=1, cookie=7):
    req = CFG(device_id=0, action=action)
    req.election_id.CopyFrom(uint128(election))
    if action != CFG.COMMIT:
        req.config.p4info.CopyFrom(h.info)
        req.config.p4_device_config = config
        req.config.cookie.cookie = cookie
    return h.stub.SetForwardingPipelineConfig(req)


def write(h: Harness, *updates, election=1, atomicity=0):
    req = p4runtime_pb2.WriteRequest(device_id=0, atomicity=atomicity)
    req.election_id.CopyFrom(uint128(election))
    for utype, entity in updates:
        req.updates.add(type=utype, entity=entity)
    return h.stub.Write(req)


def read(h: Harness, *entities):
    req = p4runtime_pb2.ReadRequest(device_id=0, entities=list(entities))
    return [e for resp in h.stub.Read(req) for e in resp.entities]


def route(h: Harness, prefix: bytes, plen: int, port: bytes = b"\x02", dmac: bytes = b"\xaa" * 6):
    te = p4runtime_pb2.TableEntry(table_id=h.ids("tables")["MyIngress.ipv4_lpm"])
    te.match.add(field_id=1).lpm.CopyFrom(p4runtime_pb2.FieldMatch.LPM(value=prefix, prefix_len=plen))
    te.action.action.action_id = h.ids("actions")["MyIngress.forward"]
    te.action.action.params.add(param_id=1, value=port)
    te.action.action.params.add(param_id=2, value=dmac)
    return p4runtime_pb2.Entity(table_entry=te)


def update_errors(err: grpc.RpcError) -> list[int]:
    """Per-update canonical codes from the grpc-status-details-bin trailer (as p4runtime-shell reads them)."""
    assert err.code() == grpc.StatusCode.UNKNOWN
    raw = dict(err.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    codes = []
    for detail in status.details:
        e = p4runtime_pb2.Error()
        assert detail.Unpack(e)
        codes.append(e.canonical_code)
    return codes


@pytest.fixture
def ready(harness):
    """A harness with a primary client (election 1) and the fake pipeline committed."""
    harness.streams.append(primary := StreamClient(harness.stub, election=1))
    assert primary.get("arbitration").arbitration.status.code == code_pb2.OK
    set_config(harness)
    harness.primary = primary
    return harness


# ---- pipeline config -----------------------------------------------------------------------------------

def test_capabilities_report_the_api_version(harness):
    assert harness.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_write_without_pipeline_is_failed_precondition(harness):
    harness.streams.append(StreamClient(harness.stub, election=1))
    harness.streams[0].get("arbitration")
    with pytest.raises(grpc.RpcError) as e:
        write(harness, (INSERT, route(harness, b"\x0a\x00\x00\x00", 8)))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_committed_config_is_returned_with_its_cookie(ready):
    resp = ready.stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=0))
    assert resp.config.p4info == ready.info
    assert resp.config.p4_device_config == b"fake"
    assert resp.config.cookie.cookie == 7


def test_bad_program_is_invalid_argument_with_its_location(ready):
    with pytest.raises(grpc.RpcError) as e:
        set_config(ready, CFG.VERIFY, config=b"broken")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "prog.p4:3:5: syntax error" in e.value.details()


def test_verify_and_save_then_commit_swaps_the_pipeline(ready):
    write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)))
    set_config(ready, CFG.VERIFY_AND_SAVE, config=b"other")
    assert len(read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))) == 1  # old still live
    set_config(ready, CFG.COMMIT)
    assert read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())) == []


def test_commit_without_saved_config_is_failed_precondition(ready):
    with pytest.raises(grpc.RpcError) as e:
        set_config(ready, CFG.COMMIT)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_reconcile_and_commit_keeps_entries(ready):
    write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)))
    set_config(ready, CFG.RECONCILE_AND_COMMIT, config=b"other")
    assert len(read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))) == 1


# ---- arbitration ---------------------------------------------------------------------------------------

def test_backup_client_cannot_write(ready):
    ready.streams.append(backup := StreamClient(ready.stub, election=0))
    assert backup.get("arbitration").arbitration.status.code == code_pb2.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)), election=0)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_higher_election_id_takes_over_and_old_primary_is_told(ready):
    ready.streams.append(newer := StreamClient(ready.stub, election=5))
    assert newer.get("arbitration").arbitration.status.code == code_pb2.OK
    demoted = ready.primary.get("arbitration").arbitration
    assert demoted.status.code == code_pb2.ALREADY_EXISTS and demoted.election_id.low == 5
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)), election=1)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)), election=5)


def test_same_election_id_twice_ends_the_second_stream(ready):
    ready.streams.append(dup := StreamClient(ready.stub, election=1))
    assert dup.get("rpc_error").code() == grpc.StatusCode.INVALID_ARGUMENT


def test_wrong_device_id_is_not_found(ready):
    with pytest.raises(grpc.RpcError) as e:
        ready.stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=9))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


# ---- table entries -------------------------------------------------------------------------------------

def test_insert_read_modify_delete_round_trip_with_canonical_bytes(ready):
    write(ready, (INSERT, route(ready, b"\x0a\x01\x00\x00", 16, port=b"\x00\x02")))  # padded port accepted
    assert ready.fake.tables["MyIngress.ipv4_lpm"]
    [e] = read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=ready.ids("tables")["MyIngress.ipv4_lpm"])))
    assert e.table_entry.match[0].lpm.value == b"\x0a\x01\x00\x00" and e.table_entry.match[0].lpm.prefix_len == 16
    assert e.table_entry.action.action.params[0].value == b"\x02"  # canonical out
    write(ready, (MODIFY, route(ready, b"\x0a\x01\x00\x00", 16, port=b"\x07")))
    [e] = read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert e.table_entry.action.action.params[0].value == b"\x07"
    write(ready, (DELETE, route(ready, b"\x0a\x01\x00\x00", 16)))
    assert read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())) == []


def test_entry_metadata_is_kept_and_returned(ready):
    ent = route(ready, b"\x0a\x00\x00\x00", 8)
    ent.table_entry.controller_metadata = 42
    ent.table_entry.metadata = b"cookie"
    write(ready, (INSERT, ent))
    [e] = read(ready, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert (e.table_entry.controller_metadata, e.table_entry.metadata) == (42, b"cookie")


def test_insert_with_counter_data_starts_the_direct_counter(ready):
    ent = route(ready, b"\x0a\x00\x00\x00", 8)
    ent.table_entry.counter_data.packet_count = 5
    ent.table_entry.counter_data.byte_count = 500
    write(ready, (INSERT, ent))
    assert list(ready.fake.direct.values()) == [(5, 500)]


def test_idle_timeout_is_unimplemented(ready):
    ent = route(ready, b"\x0a\x00\x00\x00", 8)
    ent.table_entry.idle_timeout_ns = 10**9
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, ent))
    assert update_errors(e.value) == [code_pb2.UNIMPLEMENTED]


def test_ternary_range_optional_entry_reaches_the_target(ready):
    te = p4runtime_pb2.TableEntry(table_id=ready.ids("tables")["MyIngress.acl"], priority=10)
    te.match.add(field_id=1).ternary.CopyFrom(p4runtime_pb2.FieldMatch.Ternary(value=b"\x0a\x00\x00\x00", mask=b"\xff\x00\x00\x00"))
    te.match.add(field_id=2).range.CopyFrom(p4runtime_pb2.FieldMatch.Range(low=b"\x00\x50", high=b"\x01\xbb"))
    te.match.add(field_id=3).optional.value = b"\x01"
    te.action.action.action_id = ready.ids("actions")["MyIngress.drop"]
    write(ready, (INSERT, p4runtime_pb2.Entity(table_entry=te)))
    [entry] = ready.fake.tables["MyIngress.acl"].values()
    assert entry.match == {"hdr.ipv4.src_addr": tg.Ternary(0x0A000000, 0xFF000000),
                           "hdr.tcp.dst_port": tg.Range(80, 443),
                           "standard_metadata.ingress_port": tg.OptionalMatch(1)}
    assert entry.priority == 10


def test_default_entry_modify_and_read(ready):
    te = p4runtime_pb2.TableEntry(table_id=ready.ids("tables")["MyIngress.ipv4_lpm"], is_default_action=True)
    te.action.action.action_id = ready.ids("actions")["MyIngress.drop"]
    write(ready, (MODIFY, p4runtime_pb2.Entity(table_entry=te)))
    want = p4runtime_pb2.TableEntry(table_id=te.table_id, is_default_action=True)
    [got] = read(ready, p4runtime_pb2.Entity(table_entry=want))
    assert got.table_entry.action.action.action_id == te.action.action.action_id


def test_const_default_action_cannot_be_changed(ready):
    te = p4runtime_pb2.TableEntry(table_id=ready.ids("tables")["MyIngress.fixed"], is_default_action=True)
    te.action.action.action_id = ready.ids("actions")["MyIngress.drop"]
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (MODIFY, p4runtime_pb2.Entity(table_entry=te)))
    assert update_errors(e.value) == [code_pb2.PERMISSION_DENIED]


def test_default_only_action_is_refused_in_an_entry(ready):
    ent = route(ready, b"\x0a\x00\x00\x00", 8)
    ent.table_entry.action.action.action_id = ready.ids("actions")["NoAction"]
    del ent.table_entry.action.action.params[:]
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, ent))
    assert update_errors(e.value) == [code_pb2.INVALID_ARGUMENT]


def test_direct_counter_comes_with_the_entry_when_asked(ready):
    write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)))
    key = next(iter(ready.fake.tables["MyIngress.ipv4_lpm"]))
    ready.fake.direct[("MyIngress.ipv4_lpm", key)] = (3, 300)
    want = p4runtime_pb2.TableEntry(table_id=ready.ids("tables")["MyIngress.ipv4_lpm"])
    want.counter_data.SetInParent()
    [e] = read(ready, p4runtime_pb2.Entity(table_entry=want))
    assert (e.table_entry.counter_data.packet_count, e.table_entry.counter_data.byte_count) == (3, 300)
    dce = p4runtime_pb2.DirectCounterEntry()
    dce.table_entry.table_id = want.table_id
    [d] = read(ready, p4runtime_pb2.Entity(direct_counter_entry=dce))
    assert d.direct_counter_entry.data.packet_count == 3


def test_direct_counter_write_resets_one_entry(ready):
    write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)))
    key = next(iter(ready.fake.tables["MyIngress.ipv4_lpm"]))
    ready.fake.direct[("MyIngress.ipv4_lpm", key)] = (3, 300)
    dce = p4runtime_pb2.DirectCounterEntry()
    dce.table_entry.CopyFrom(route(ready, b"\x0a\x00\x00\x00", 8).table_entry)
    dce.table_entry.ClearField("action")
    write(ready, (MODIFY, p4runtime_pb2.Entity(direct_counter_entry=dce)))
    assert ready.fake.direct[("MyIngress.ipv4_lpm", key)] == (0, 0)


def test_batch_reports_one_error_per_update(ready):
    good = route(ready, b"\x0a\x00\x00\x00", 8)
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, good), (INSERT, good), (DELETE, route(ready, b"\x0b\x00\x00\x00", 8)))
    assert update_errors(e.value) == [code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.NOT_FOUND]
    assert len(ready.fake.tables["MyIngress.ipv4_lpm"]) == 1  # the good one is in (CONTINUE_ON_ERROR)


def _acl_without_priority(h):
    te = p4runtime_pb2.TableEntry(table_id=h.ids("tables")["MyIngress.acl"])
    te.match.add(field_id=3).optional.value = b"\x01"
    te.action.action.action_id = h.ids("actions")["MyIngress.drop"]
    return p4runtime_pb2.Entity(table_entry=te)


def _const_table_entry(h):
    te = p4runtime_pb2.TableEntry(table_id=h.ids("tables")["MyIngress.fixed"])
    te.match.add(field_id=1).exact.value = b"\x08\x00"
    te.action.action.action_id = h.ids("actions")["MyIngress.drop"]
    return p4runtime_pb2.Entity(table_entry=te)


def _counter(h, index):
    ce = p4runtime_pb2.CounterEntry(counter_id=h.ids("counters")["MyIngress.port_bytes"])
    ce.index.index = index
    ce.data.packet_count = 1
    return p4runtime_pb2.Entity(counter_entry=ce)


def _unknown_table(h):
    te = p4runtime_pb2.TableEntry(table_id=0x02FFFFFF)
    return p4runtime_pb2.Entity(table_entry=te)


@pytest.mark.parametrize(("make", "code"), [
    (lambda h: route(h, b"\x0a\x00\x00\x01", 8), code_pb2.INVALID_ARGUMENT),  # bits beyond the prefix
    (lambda h: route(h, b"\x0a\x00\x00\x00", 8, port=b"\x02\x00"), code_pb2.OUT_OF_RANGE),  # 512 > bit<9>
    (_acl_without_priority, code_pb2.INVALID_ARGUMENT),
    (_const_table_entry, code_pb2.PERMISSION_DENIED),
    (_unknown_table, code_pb2.NOT_FOUND),
])
def test_bad_table_entry_gets_the_spec_code(ready, make, code):
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, make(ready)))
    assert update_errors(e.value) == [code]


def test_full_table_is_resource_exhausted(ready):
    for i in range(4):
        write(ready, (INSERT, route(ready, bytes([10, i, 0, 0]), 16)))
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, route(ready, bytes([10, 9, 0, 0]), 16)))
    assert update_errors(e.value) == [code_pb2.RESOURCE_EXHAUSTED]


def test_counter_index_past_the_end_is_out_of_range(ready):
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (MODIFY, _counter(ready, 8)))
    assert update_errors(e.value) == [code_pb2.OUT_OF_RANGE]


def test_rollback_atomicity_is_unimplemented(ready):
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, route(ready, b"\x0a\x00\x00\x00", 8)),
              atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


# ---- counters, registers, PRE, digests ------------------------------------------------------------------

def test_counter_write_then_wildcard_read(ready):
    write(ready, (MODIFY, _counter(ready, 3)))
    ents = read(ready, p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry()))
    assert len(ents) == 8
    assert [e.counter_entry.data.packet_count for e in ents] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_register_write_and_read_back(ready):
    re_ = p4runtime_pb2.RegisterEntry(register_id=ready.ids("registers")["MyIngress.last_seen"])
    re_.index.index = 5
    re_.data.bitstring = b"\x00\x01\x02\x03\x04\x05"
    write(ready, (MODIFY, p4runtime_pb2.Entity(register_entry=re_)))
    assert ready.fake.registers["MyIngress.last_seen"][5] == 0x0102030405
    want = p4runtime_pb2.RegisterEntry(register_id=re_.register_id)
    want.index.index = 5
    [got] = read(ready, p4runtime_pb2.Entity(register_entry=want))
    assert got.register_entry.data.bitstring == b"\x01\x02\x03\x04\x05"


def test_meter_config_written_read_and_cleared(ready):
    me = p4runtime_pb2.MeterEntry(meter_id=ready.ids("meters")["MyIngress.rate"])
    me.index.index = 2
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 1000, 100, 2000, 200
    write(ready, (MODIFY, p4runtime_pb2.Entity(meter_entry=me)))
    assert ready.fake.meters[("MyIngress.rate", 2)] == (1000, 100, 2000, 200)
    ents = read(ready, p4runtime_pb2.Entity(meter_entry=p4runtime_pb2.MeterEntry(meter_id=me.meter_id)))
    assert [e.meter_entry.HasField("config") for e in ents] == [False, False, True, False]
    me.ClearField("config")
    write(ready, (MODIFY, p4runtime_pb2.Entity(meter_entry=me)))
    assert ("MyIngress.rate", 2) not in ready.fake.meters


def test_multicast_group_lifecycle(ready):
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = 1
    pre.multicast_group_entry.replicas.add(egress_port=1, instance=0)
    pre.multicast_group_entry.replicas.add(port=b"\x02", instance=1)
    ent = p4runtime_pb2.Entity(packet_replication_engine_entry=pre)
    write(ready, (INSERT, ent))
    assert ready.fake.mcast[1] == [tg.Replica(1, 0), tg.Replica(2, 1)]
    with pytest.raises(grpc.RpcError) as e:
        write(ready, (INSERT, ent))
    assert update_errors(e.value) == [code_pb2.ALREADY_EXISTS]
    [got] = read(ready, p4runtime_pb2.Entity(packet_replication_engine_entry=p4runtime_pb2.PacketReplicationEngineEntry()))
    assert got.packet_replication_engine_entry == pre
    write(ready, (DELETE, ent))
    assert 1 not in ready.fake.mcast


def test_clone_session_reaches_the_target(ready):
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.clone_session_entry.session_id = 5
    pre.clone_session_entry.replicas.add(egress_port=CPU_PORT)
    pre.clone_session_entry.packet_length_bytes = 64
    write(ready, (INSERT, p4runtime_pb2.Entity(packet_replication_engine_entry=pre)))
    assert ready.fake.clones[5] == ([tg.Replica(CPU_PORT, 0)], 64)


def _digest_entry(h, max_list_size=2, timeout_ns=10**9, ack_ns=0):
    de = p4runtime_pb2.DigestEntry(digest_id=h.ids("digests")["learn_t"])
    de.config.max_list_size, de.config.max_timeout_ns, de.config.ack_timeout_ns = max_list_size, timeout_ns, ack_ns
    return p4runtime_pb2.Entity(digest_entry=de)


def _learn(mac: int, port: int):
    return tg.DigestMessage("learn_t", (("src_mac", mac), ("port", port)))


def test_digests_are_batched_by_list_size():
    h = Harness(forward=lambda port, data: ([], [_learn(int.from_bytes(data[6:12], "big"), port)]))
    try:
        h.streams.append(primary := StreamClient(h.stub, election=1))
        primary.get("arbitration")
        set_config(h, config=b"other")
        write(h, (INSERT, _digest_entry(h, max_list_size=2)))
        h.device.receive(1, b"\xff" * 6 + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00")
        h.device.receive(2, b"\xff" * 6 + b"\x00\x00\x00\x00\x00\x02" + b"\x08\x00")
        dl = primary.get("digest").digest
        assert dl.digest_id == h.ids("digests")["learn_t"]
        assert [[m.bitstring for m in d.struct.members] for d in dl.data] == [[b"\x01", b"\x01"], [b"\x02", b"\x02"]]
    finally:
        h.close()


def test_unacked_digest_data_is_not_repeated():
    h = Harness(forward=lambda port, data: ([], [_learn(0xA, 1)]))
    try:
        h.streams.append(primary := StreamClient(h.stub, election=1))
        primary.get("arbitration")
        set_config(h, config=b"other")
        write(h, (INSERT, _digest_entry(h, max_list_size=1, timeout_ns=0, ack_ns=10**10)))
        h.device.receive(1, b"x" * 14)
        first = primary.get("digest").digest
        h.device.receive(1, b"x" * 14)  # same data, list not acked: suppressed
        with pytest.raises(AssertionError, match="no digest"):
            primary.get("digest", timeout=0.3)
        ack = p4runtime_pb2.StreamMessageRequest()
        ack.digest_ack.digest_id, ack.digest_ack.list_id = first.digest_id, first.list_id
        primary.send(ack)
        # The ack is handled on the stream's own thread, ordered with nothing we can observe from here: offer the
        # same data again until it is reported (bounded), which happens once the ack has been processed.
        second = None
        deadline = time.monotonic() + 30  # a bound no busy machine reaches
        while second is None and time.monotonic() < deadline:
            h.device.receive(1, b"x" * 14)
            try:
                second = primary.get("digest", timeout=0.05).digest
            except AssertionError:
                continue
        assert second is not None, "the acked data was never reported again"
        assert second.list_id == first.list_id + 1
    finally:
        h.close()


# ---- packet I/O ----------------------------------------------------------------------------------------

def test_packet_out_enters_the_cpu_port_with_its_header(ready):
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = b"\x01" * 14
    req.packet.metadata.add(metadata_id=1, value=b"\x01\x02")  # egress_port = 258 (9 bits), then 7 pad bits
    ready.primary.send(req)
    read(ready, p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=0)))
    deadline = time.monotonic() + 30  # a bound no busy machine reaches
    while not ready.fake.processed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready.fake.processed == [(CPU_PORT, bytes([258 >> 1, (258 & 1) << 7]) + b"\x01" * 14)]


def test_cpu_port_output_becomes_packet_in():
    h = Harness(forward=lambda port, data: ([(CPU_PORT, bytes([port >> 1, (port & 1) << 7]) + data)], []))
    try:
        h.streams.append(primary := StreamClient(h.stub, election=1))
        primary.get("arbitration")
        set_config(h, config=b"other")
        h.device.receive(3, b"\xee" * 20)
        pin = primary.get("packet").packet
        assert pin.payload == b"\xee" * 20
        assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x03"), (2, b"\x00")]
        h.device.receive(4, b"\xee" * 20)  # ordinary ports go to the port set
        assert h.sent == []
    finally:
        h.close()


def test_packet_out_from_backup_is_refused_on_the_stream(ready):
    ready.streams.append(backup := StreamClient(ready.stub, election=0))
    backup.get("arbitration")
    req = p4runtime_pb2.StreamMessageRequest()
    req.packet.payload = b"\x01" * 14
    backup.send(req)
    assert backup.get("error").error.canonical_code == code_pb2.PERMISSION_DENIED


def test_digest_list_is_flushed_when_max_timeout_passes():
    h = Harness(forward=lambda port, data: ([], [_learn(0xB, 2)]))
    try:
        h.streams.append(primary := StreamClient(h.stub, election=1))
        primary.get("arbitration")
        set_config(h, config=b"other")
        write(h, (INSERT, _digest_entry(h, max_list_size=100, timeout_ns=50_000_000)))  # 50 ms
        h.device.receive(1, b"x" * 14)
        dl = primary.get("digest", timeout=30).digest  # the 50 ms flush, however late a loaded machine runs it
        assert len(dl.data) == 1
    finally:
        h.close()
