"""Packet vectors through kvswitch.p4: built here, recorded from the in-process softswitch, replayed anywhere.

A vector file is one sequence of steps on one fresh switch (state carries from step to step), grouped in
named cases; each step is something the `Target` interface does, with what it gave when recorded:

    {"case": ..., "op": "insert",  "table": ..., "match": {field: [kind, ...]}, "action": ..., "params": {...}}
    {"case": ..., "op": "default", "table": ..., "action": ..., "params": {...}}
    {"case": ..., "op": "packet",  "port": P, "in": HEX, "out": [[port, HEX], ...]}
    {"case": ..., "op": "digests", "out": [[name, [[field, value], ...]], ...]}
    {"case": ..., "op": "counter", "name": ..., "index": I, "out": [packets, bytes]}
    {"case": ..., "op": "clone_session", "session": S, "ports": [port, ...]}

Regenerate the golden file (after a deliberate change of the program's behaviour, reviewing the diff):

    .venv/bin/python -m tests.targets.kvswitch_vectors --write tests/targets/golden/kvswitch_vectors.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import struct
import sys
from collections.abc import Iterator
from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting import expect
from kvtesting.kvnet import (
    CLIENT_IP,
    CLIENT_MAC,
    CLIENT_PORT,
    CPU_PORT,
    P4_MAIN,
    STORAGE_IP,
    STORAGE_MAC,
    STORAGE_PORT,
    SWITCH_MAC,
    _ip,
    _mac,
    chunk_key,
    crc,
    kvp_frame,
    value_chunk,
)
from softswitch.target import Exact, Lpm, Match, Replica, TableEntry, Target, Ternary

GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "kvswitch_vectors.json"
Step = dict[str, Any]

KEY = chunk_key(tenant=7, prefix_hash=0x0123456789ABCDEF, chunk_idx=0)
HOT = chunk_key(tenant=3, prefix_hash=0xAAAABBBBCCCCDDDD, chunk_idx=2)
OTHER = chunk_key(tenant=9, prefix_hash=0xFEEDFACECAFEBEEF, chunk_idx=1)
WRITTEN = chunk_key(tenant=5, prefix_hash=0x0BADC0DE0BADC0DE, chunk_idx=0)
"""The key the SLOT_WRITE cases write (indexed at slot 17: SLOT_WRITE needs the key indexed at its slot)."""
UNINDEXED = chunk_key(tenant=11, prefix_hash=0x1234_0000_0000_4321, chunk_idx=0)
"""A key never indexed: its INSERT and LOOKUP_META go to the controller."""
WIDE = chunk_key(tenant=6, prefix_hash=0x1111222233334444, chunk_idx=65_537)
"""A chunk index beyond 16 bits (protocol v2's 32-bit chunk_idx)."""
V1_GET = bytes.fromhex("4b5601010000000700000001" "0123456789abcdef" "0004" "0000" "00000000" "00000000" "00000000")
"""A protocol-v1 GET (36 bytes): counted BAD_VERSION, forwarded as plain UDP."""
FABRIC_PORTS = (3, 4)
INVALIDATE = 0x30
"""kvp_opcode_t.INVALIDATE (switch to switch)."""
PORT_ROLE = {"STORAGE": 1, "FABRIC": 2}
"""port_role_t values (p4src/include/constants.p4)."""


def _key_match(key: ChunkKey) -> dict[str, list]:
    return {"hdr.kvp.tenant": ["exact", key.tenant], "hdr.kvp.prefix_hash": ["exact", key.prefix_hash],
            "hdr.kvp.chunk_idx": ["exact", key.chunk_idx]}


def _kvp(key: ChunkKey = KEY, **kw) -> KVP:
    return KVP(**({"opcode": Opcode.GET, "tenant": key.tenant, "prefix_hash": key.prefix_hash,
                   "chunk_idx": key.chunk_idx, "chunk_count": 4} | kw))


def _udp_to_storage(payload: bytes, dport: int = KVP_UDP_PORT) -> Ether:
    return (Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
            / UDP(sport=40001, dport=dport) / Raw(payload))


def _reply(key: ChunkKey, value: bytes, version: int, **kw) -> Ether:
    return kvp_frame(_kvp(key, opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, version=version, **kw)
                     / KVPValue.from_bytes(value), to_storage=False)


def _out(egress: int, frame) -> bytes:
    return struct.pack("!HH", egress, 0) + bytes(frame)


def build_steps() -> Iterator[Step]:
    """The vectors' inputs, in order (outputs are filled in by recording)."""
    def packet(case: str, port: int, frame) -> Step:
        return {"case": case, "op": "packet", "port": port, "in": bytes(frame).hex()}

    def counters(case: str) -> Iterator[Step]:
        for name, size in (("MyIngress.drop_reason", 19), ("MyIngress.kvp_events", 12)):
            for i in range(size):
                yield {"case": case, "op": "counter", "name": name, "index": i}

    # -- plain L3 before any route: dropped
    yield packet("l3_no_route_yet", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst=STORAGE_IP) / UDP(dport=53) / b"early")
    for ip, mac, port in ((CLIENT_IP, CLIENT_MAC, CLIENT_PORT), (STORAGE_IP, STORAGE_MAC, STORAGE_PORT)):
        yield {"case": "routes", "op": "insert", "table": "MyIngress.ipv4_lpm",
               "match": {"hdr.ipv4.dst_addr": ["lpm", _ip(ip), 32]}, "action": "MyIngress.ipv4_forward",
               "params": {"dst_mac": _mac(mac), "port": port}}
    yield {"case": "routes", "op": "insert", "table": "MyIngress.ipv4_lpm",
           "match": {"hdr.ipv4.dst_addr": ["lpm", _ip("10.1.0.0"), 16]}, "action": "MyIngress.ipv4_forward",
           "params": {"dst_mac": 0x0000000000AA, "port": 3}}

    for port, role in [(STORAGE_PORT, "STORAGE")] + [(p, "FABRIC") for p in FABRIC_PORTS]:
        yield {"case": "port_roles", "op": "insert", "table": "MyIngress.port_role",
               "match": {"ingress_port": ["exact", port]}, "action": "MyIngress.set_port_role",
               "params": {"role": PORT_ROLE[role]}}

    # -- L3
    base = Ether(dst=SWITCH_MAC, src=CLIENT_MAC) / IP(src=CLIENT_IP, dst=STORAGE_IP)
    yield packet("l3_routed", CLIENT_PORT, base / UDP(sport=1234, dport=53) / b"hello")
    yield packet("l3_routed_other_protocol", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst=STORAGE_IP, proto=6) / Raw(bytes(40)))
    yield packet("l3_lpm_/16", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst="10.1.2.3", ttl=5) / UDP(dport=9) / b"x")
    yield packet("l3_no_route", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst="192.0.2.9") / UDP(dport=53))
    yield packet("l3_ttl_1", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst=STORAGE_IP, ttl=1) / UDP(dport=53))
    yield packet("l3_ttl_2", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst=STORAGE_IP, ttl=2) / UDP(dport=53))
    yield packet("l3_ip_options", CLIENT_PORT, Ether(dst=SWITCH_MAC, src=CLIENT_MAC)
                 / IP(src=CLIENT_IP, dst=STORAGE_IP, options=b"\x01\x01\x01\x01") / UDP(dport=53) / b"opt")
    yield packet("not_ipv4_arp", CLIENT_PORT, Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC)
                 / ARP(psrc=CLIENT_IP, pdst=STORAGE_IP))
    yield packet("runt_ethernet_only", CLIENT_PORT, bytes(Ether(dst=SWITCH_MAC, src=CLIENT_MAC, type=0x0800)))
    yield packet("truncated_ipv4", CLIENT_PORT, bytes(base / UDP(dport=53))[:24])
    yield packet("truncated_udp", CLIENT_PORT, bytes(base / UDP(dport=KVP_UDP_PORT))[:38])

    # -- GET miss, index, fill, hit
    yield packet("get_miss_unindexed", CLIENT_PORT, kvp_frame(_kvp(req_id=1)))
    yield {"case": "index", "op": "insert", "table": "MyIngress.kv_index", "match": _key_match(KEY),
           "action": "MyIngress.set_slot", "params": {"slot": 5, "min_version": 0, "generation": 1}}
    yield packet("get_miss_indexed_unfilled", CLIENT_PORT, kvp_frame(_kvp(req_id=2)))
    yield packet("fill", STORAGE_PORT, _reply(KEY, value_chunk(1), version=3))
    yield packet("get_hit", CLIENT_PORT, kvp_frame(_kvp(req_id=3)))
    yield packet("get_hit_reader_asks_chunk_count_1", CLIENT_PORT, kvp_frame(_kvp(req_id=11, chunk_count=1)))
    # a span GET (aux = chunks asked) is never answered from the pool; aux 1 is a single GET
    yield packet("get_span_1_hit", CLIENT_PORT, kvp_frame(_kvp(req_id=40, aux=1)))
    yield packet("get_span_4_of_a_pooled_chunk_forwarded", CLIENT_PORT, kvp_frame(_kvp(req_id=41, aux=4)))
    yield packet("get_span_17_forwarded", CLIENT_PORT, kvp_frame(_kvp(req_id=42, aux=17)))
    yield packet("get_hit_version_ok", CLIENT_PORT, kvp_frame(_kvp(req_id=4, version=3)))
    yield packet("get_newer_version_misses", CLIENT_PORT, kvp_frame(_kvp(req_id=5, version=4)))
    yield packet("get_bypass", CLIENT_PORT, kvp_frame(_kvp(req_id=6, flags=int(Flag.BYPASS))))
    yield packet("refill_of_valid_slot", STORAGE_PORT, _reply(KEY, value_chunk(2), version=3))

    # -- PUT, stale fill, new fill, short value
    yield packet("put_invalidates", CLIENT_PORT, kvp_frame(_kvp(opcode=Opcode.PUT, version=4)
                                                           / KVPValue.from_bytes(value_chunk(7))))
    yield packet("get_after_put", CLIENT_PORT, kvp_frame(_kvp(req_id=7)))
    yield packet("fill_after_unacknowledged_put", STORAGE_PORT, _reply(KEY, value_chunk(1), version=3))
    yield packet("get_hit_before_ack", CLIENT_PORT, kvp_frame(_kvp(req_id=12)))
    yield packet("forged_put_ack_from_host", CLIENT_PORT, kvp_frame(
        _kvp(opcode=Opcode.PUT_ACK, status=Status.OK, version=0xFFFFFFFF), to_storage=False))
    yield packet("refused_put_ack", STORAGE_PORT, kvp_frame(
        _kvp(opcode=Opcode.PUT_ACK, status=Status.ERR_STALE, version=4), to_storage=False))
    yield packet("get_hit_after_refused_ack", CLIENT_PORT, kvp_frame(_kvp(req_id=13)))
    yield packet("put_ack_bounds", STORAGE_PORT, kvp_frame(
        _kvp(opcode=Opcode.PUT_ACK, status=Status.OK, version=4), to_storage=False))
    yield packet("get_after_ack", CLIENT_PORT, kvp_frame(_kvp(req_id=14)))
    yield packet("forged_fill_from_host", CLIENT_PORT, _reply(KEY, value_chunk(66), version=4))
    yield packet("stale_fill", STORAGE_PORT, _reply(KEY, value_chunk(1), version=3))
    yield packet("fill_bad_checksum", STORAGE_PORT, _reply(KEY, value_chunk(2), version=4,
                                                            value_csum=crc(value_chunk(2)) ^ 1))
    yield packet("fill_bypass", STORAGE_PORT, _reply(KEY, value_chunk(2), version=4,
                                                      flags=int(Flag.VALUE | Flag.BYPASS)))
    short = value_chunk(3)[:100].ljust(128, b"\0")
    yield packet("fill_short_value", STORAGE_PORT, _reply(KEY, short, version=4, value_len=100))
    yield packet("get_hit_short_value", CLIENT_PORT, kvp_frame(_kvp(req_id=8)))
    yield {"case": "index_other_same_slot", "op": "insert", "table": "MyIngress.kv_index",
           "match": _key_match(OTHER), "action": "MyIngress.set_slot",
           "params": {"slot": 5, "min_version": 0, "generation": 2}}
    yield packet("get_other_key_same_slot", CLIENT_PORT, kvp_frame(_kvp(OTHER, req_id=9)))
    yield {"case": "index_min_version", "op": "insert", "table": "MyIngress.kv_index",
           "match": _key_match(HOT), "action": "MyIngress.set_slot",
           "params": {"slot": 6, "min_version": 5, "generation": 3}}
    yield packet("fill_below_index_min_version", STORAGE_PORT, _reply(HOT, value_chunk(4), version=4))
    yield packet("fill_at_index_min_version", STORAGE_PORT, _reply(HOT, value_chunk(4), version=5))
    yield packet("get_hit_hot", CLIENT_PORT, kvp_frame(_kvp(HOT, req_id=10)))

    # -- client ops punted, packet-out, other opcodes from hosts
    for op in (Opcode.INSERT, Opcode.LOOKUP_META):
        yield packet(f"punt_{op.name.lower()}", CLIENT_PORT, kvp_frame(_kvp(UNINDEXED, opcode=op, aux=(3 << 16) | 512)))
    # LOOKUP_META of an indexed key: answered by the switch (steer.p4), tiers + version, no node (no pool)
    yield packet("lookup_meta_answered_in_data_plane", CLIENT_PORT, kvp_frame(_kvp(opcode=Opcode.LOOKUP_META)))
    yield packet("packet_out_to_client", CPU_PORT, _out(CLIENT_PORT, kvp_frame(
        KVP(opcode=Opcode.INSERT_ACK, tenant=KEY.tenant, aux=2), to_storage=False)))
    yield packet("packet_out_to_port_3", CPU_PORT, _out(3, Ether(dst="00:00:00:00:00:aa", src=SWITCH_MAC)
                                                        / IP(dst="10.1.0.1") / UDP(dport=7) / b"po"))
    yield packet("slot_write_from_host_dropped", CLIENT_PORT, kvp_frame(
        _kvp(opcode=Opcode.SLOT_WRITE, aux=4) / KVPValue.from_bytes(value_chunk(1))))
    yield packet("get_reply_opcode_from_client", CLIENT_PORT, kvp_frame(_kvp(opcode=Opcode.SLOT_WRITE_ACK)))
    for op in (Opcode.TIER_MOVE, Opcode.TIER_MOVE_ACK, INVALIDATE):
        yield packet(f"controller_op_{op:#04x}_from_host_dropped", CLIENT_PORT, kvp_frame(_kvp(opcode=op, aux=1)))
    yield packet("tier_move_from_fabric_forwarded", FABRIC_PORTS[0], kvp_frame(_kvp(opcode=Opcode.TIER_MOVE)))

    # -- SLOT_WRITE / SLOT_READ through the CPU port
    def slot_op(kvp) -> bytes:
        return _out(0, kvp_frame(kvp))
    yield packet("slot_read_never_written", CPU_PORT, slot_op(KVP(opcode=Opcode.SLOT_READ, aux=3, req_id=99)))
    yield packet("slot_write_not_indexed", CPU_PORT, slot_op(_kvp(WRITTEN, opcode=Opcode.SLOT_WRITE, version=6,
                                                                  aux=17) / KVPValue.from_bytes(value_chunk(9))))
    yield {"case": "index_written", "op": "insert", "table": "MyIngress.kv_index", "match": _key_match(WRITTEN),
           "action": "MyIngress.set_slot", "params": {"slot": 17, "min_version": 0, "generation": 4}}
    yield packet("slot_write_ok", CPU_PORT, slot_op(_kvp(WRITTEN, opcode=Opcode.SLOT_WRITE, version=6, aux=17,
                                                         chunk_count=3, value_len=77)
                                                    / KVPValue.from_bytes(value_chunk(9))))
    yield packet("slot_read_ok", CPU_PORT, slot_op(KVP(opcode=Opcode.SLOT_READ, aux=17, req_id=98)))
    yield packet("get_hit_slot_written", CLIENT_PORT, kvp_frame(_kvp(WRITTEN, req_id=15, chunk_count=1)))
    yield packet("slot_write_bad_checksum", CPU_PORT, slot_op(
        _kvp(WRITTEN, opcode=Opcode.SLOT_WRITE, version=7, aux=17, value_csum=1)
        / KVPValue.from_bytes(value_chunk(9))))
    yield packet("put_ack_bounds_written", STORAGE_PORT, kvp_frame(
        _kvp(WRITTEN, opcode=Opcode.PUT_ACK, status=Status.OK, version=8), to_storage=False))
    yield packet("slot_write_stale", CPU_PORT, slot_op(_kvp(WRITTEN, opcode=Opcode.SLOT_WRITE, version=7, aux=17)
                                                     / KVPValue.from_bytes(value_chunk(9))))
    yield packet("slot_write_indexed_elsewhere", CPU_PORT, slot_op(
        _kvp(OTHER, opcode=Opcode.SLOT_WRITE, version=7, aux=18) / KVPValue.from_bytes(value_chunk(9))))
    yield packet("slot_write_out_of_range", CPU_PORT, slot_op(
        _kvp(OTHER, opcode=Opcode.SLOT_WRITE, version=1, aux=1 << 20) / KVPValue.from_bytes(value_chunk(9))))
    yield packet("slot_read_out_of_range", CPU_PORT, slot_op(KVP(opcode=Opcode.SLOT_READ, aux=4096)))
    yield packet("slot_read_after_put", CPU_PORT, slot_op(KVP(opcode=Opcode.SLOT_READ, aux=5)))

    # -- fabric invalidation: a storage node's ack starts it, a spine relays it once, a leaf applies it
    yield {"case": "fabric_session", "op": "clone_session", "session": 1, "ports": list(FABRIC_PORTS)}
    yield packet("storage_ack_to_fabric", STORAGE_PORT, kvp_frame(
        _kvp(HOT, opcode=Opcode.PUT_ACK, status=Status.OK, version=6), to_storage=False))
    yield packet("get_hot_after_ack", CLIENT_PORT, kvp_frame(_kvp(HOT, req_id=16)))
    yield packet("fabric_ack_not_restarted", FABRIC_PORTS[0], kvp_frame(
        _kvp(HOT, opcode=Opcode.PUT_ACK, status=Status.OK, version=6), to_storage=False))
    yield packet("fill_hot_v6", STORAGE_PORT, _reply(HOT, value_chunk(5), version=6))
    yield packet("invalidate_relayed", FABRIC_PORTS[0], kvp_frame(
        _kvp(HOT, opcode=INVALIDATE, version=7, aux=1), to_storage=False))
    yield packet("get_hot_after_invalidate", CLIENT_PORT, kvp_frame(_kvp(HOT, req_id=17)))
    yield packet("invalidate_last_hop", FABRIC_PORTS[1], kvp_frame(
        _kvp(HOT, opcode=INVALIDATE, version=7, aux=0), to_storage=False))

    # -- malformed KVP: counted, forwarded as plain UDP
    malformed = {
        "short": bytes(_kvp())[:20],
        "bad_magic": bytes(_kvp(magic=0x1234)),
        "bad_version": bytes(_kvp(ver=3)),
        "v1_get": V1_GET,
        "chunk_shift_6": bytes(_kvp(chunk_shift=6)),
        "chunk_shift_14": bytes(_kvp(chunk_shift=14)),
        "value_truncated_1kib": bytes(_kvp(opcode=Opcode.PUT, chunk_shift=10) / Raw(bytes(1024)))[:-1],
        "unknown_op": bytes(_kvp(opcode=0x7F)),
        "value_truncated": bytes(_kvp(flags=1)) + bytes(50),
        "put_without_value": bytes(_kvp(opcode=Opcode.PUT, flags=0)),
        "chunk_count_0": bytes(_kvp(chunk_count=0)),
        "chunk_idx_too_big": bytes(_kvp(chunk_idx=4, chunk_count=4)),
        "value_len_129": bytes(_kvp(opcode=Opcode.PUT, value_len=129) / KVPValue.from_bytes(value_chunk(1))),
        "empty": b"",
    }
    for name, payload in malformed.items():
        yield packet(f"malformed_{name}", CLIENT_PORT, _udp_to_storage(payload))
    yield packet("malformed_reply_no_fill", STORAGE_PORT, _reply(KEY, value_chunk(1), version=9, chunk_idx=9))

    # -- protocol v2: chunks larger than a slot pass (never stored); a 32-bit chunk_idx indexes and fills
    yield {"case": "v2_index", "op": "insert", "table": "MyIngress.kv_index", "match": _key_match(WIDE),
           "action": "MyIngress.set_slot", "params": {"slot": 9, "min_version": 0, "generation": 7}}
    yield packet("v2_large_reply_not_stored", STORAGE_PORT, kvp_frame(
        _kvp(WIDE, opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, version=2, chunk_count=70_000,
             chunk_shift=10) / Raw(bytes(range(256)) * 4), to_storage=False))
    yield packet("v2_get_after_large_reply_misses", CLIENT_PORT, kvp_frame(_kvp(WIDE, req_id=30,
                                                                             chunk_count=70_000)))
    yield packet("v2_large_put_passes", CLIENT_PORT, kvp_frame(
        _kvp(WIDE, opcode=Opcode.PUT, version=3, chunk_count=70_000, chunk_shift=13) / Raw(bytes(8192))))
    yield packet("v2_slot_sized_fill_wide_idx", STORAGE_PORT, _reply(WIDE, value_chunk(4), version=3,
                                                                     chunk_count=70_000))
    yield packet("v2_hit_wide_idx", CLIENT_PORT, kvp_frame(_kvp(WIDE, req_id=31, chunk_count=70_000)))

    # -- hot-key sketch and digest (a key never indexed: its replies are forwarded, never stored)
    yield {"case": "sketch_on", "op": "default", "table": "MyIngress.sketch_config",
           "action": "MyIngress.set_sketch_config", "params": {"hot_threshold": 2, "epoch": 1}}
    for i in range(3):
        yield packet(f"hot_get_{i}", CLIENT_PORT, kvp_frame(_kvp(UNINDEXED, req_id=20 + i)))
    yield {"case": "no_digest_before_a_reply", "op": "digests"}
    yield packet("hot_reply", STORAGE_PORT, _reply(UNINDEXED, value_chunk(6), version=1))  # reported at its reply
    yield {"case": "hot_digest", "op": "digests"}
    yield {"case": "sketch_new_epoch", "op": "default", "table": "MyIngress.sketch_config",
           "action": "MyIngress.set_sketch_config", "params": {"hot_threshold": 2, "epoch": 2}}
    yield packet("hot_get_new_epoch_0", CLIENT_PORT, kvp_frame(_kvp(UNINDEXED, req_id=30)))
    yield {"case": "no_digest_yet", "op": "digests"}
    yield packet("hot_get_new_epoch_1", CLIENT_PORT, kvp_frame(_kvp(UNINDEXED, req_id=31)))
    yield packet("hot_reply_new_epoch", STORAGE_PORT, _reply(UNINDEXED, value_chunk(6), version=1))
    yield {"case": "hot_digest_again", "op": "digests"}

    # -- what the counters say at the end
    yield from counters("final_counters")
    for slot in (5, 6, 17):
        yield {"case": "final_slot_hits", "op": "counter", "name": "MyIngress.slot_hits", "index": slot}


# ---- replay ----------------------------------------------------------------------------------------------

def _match(spec: dict[str, list]) -> dict[str, Match]:
    out: dict[str, Match] = {}
    for field, (kind, *args) in spec.items():
        out[field] = {"exact": Exact, "lpm": Lpm, "ternary": Ternary}[kind](*args)
    return out


def run_step(target: Target, step: Step) -> Any:
    """Do one step; returns its result in the JSON form the golden file stores (None for control steps).

    Replaying (the step has its recorded `out`) on a switch process, the harness waits for what was recorded
    (`process_expecting`, `drain_digests_expecting`, counters read until they match): the verdict is the same
    however busy the machine is; only a switch that does not send what it should makes the wait long."""
    op = step["op"]
    if "out" in step and hasattr(target, "process_expecting"):
        return _replay_step_on_process(target, step)
    if op == "insert":
        target.table_insert(TableEntry(step["table"], _match(step["match"]), step["action"], step["params"]))
        return None
    if op == "default":
        target.table_set_default(step["table"], step["action"], step["params"])
        return None
    if op == "packet":  # sorted: a real switch promises no order between copies on different ports
        return sorted([port, data.hex()] for port, data in target.process(step["port"], bytes.fromhex(step["in"])))
    if op == "digests":
        return [[m.name, [list(f) for f in m.fields]] for m in target.drain_digests()]
    if op == "counter":
        return list(target.counter_read(step["name"], step["index"]))
    if op == "clone_session":
        target.clone_session_set(step["session"], [Replica(p, 0) for p in step["ports"]])
        return None
    raise ValueError(f"unknown step {op!r}")


def _replay_step_on_process(target: Any, step: Step) -> Any:
    """A recorded step on a switch process (a `kvtesting.remote_target.RemoteTarget`)."""
    op = step["op"]
    if op == "packet":
        out = target.process_expecting(step["port"], bytes.fromhex(step["in"]), len(step["out"]))
        return sorted([port, data.hex()] for port, data in out)
    if op == "digests":
        return [[m.name, [list(f) for f in m.fields]] for m in target.drain_digests_expecting(len(step["out"]))]
    if op == "counter":  # a dropped packet gives no output to wait for: read until it was counted
        return expect.settled(target, lambda: list(target.counter_read(step["name"], step["index"])), step["out"])
    raise ValueError(f"unknown recorded step {op!r}")


def record(target: Target) -> list[Step]:
    steps = []
    for step in build_steps():
        result = run_step(target, step)
        if result is not None:
            step["out"] = result
        steps.append(step)
    return steps


def replay(target: Target, steps: list[Step]) -> list[str]:
    """Every step whose result differs from the recorded one, described (empty: identical)."""
    diffs = []
    for i, step in enumerate(steps):
        got = run_step(target, step)
        if "out" in step and got != step["out"]:
            diffs.append(f"step {i} ({step['case']}, {step['op']}): expected {step['out']}, got {got}")
    return diffs


def load(path: pathlib.Path = GOLDEN) -> list[Step]:
    return json.loads(path.read_text())["steps"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.targets.kvswitch_vectors",
                                 description="Record kvswitch.p4's golden packet vectors from the in-process softswitch.")
    ap.add_argument("--write", type=pathlib.Path, metavar="FILE", help=f"where to write them (e.g. {GOLDEN})")
    args = ap.parse_args(argv)
    from softswitch.frontend import load_program
    from softswitch.runtime import SoftSwitch

    steps = record(SoftSwitch.load(load_program(str(P4_MAIN)), cpu_port=CPU_PORT))
    text = json.dumps({"program": "p4src/kvswitch.p4", "recorded_with": "softswitch.runtime.SoftSwitch (in-process)",
                       "regenerate": "python -m tests.targets.kvswitch_vectors --write " + str(GOLDEN.relative_to(
                           GOLDEN.parents[3])), "steps": steps}, indent=1) + "\n"
    if args.write:
        args.write.write_text(text)
        print(f"{args.write}: {sum(s['op'] == 'packet' for s in steps)} packets, {len(steps)} steps")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
