"""Bring a long-lived kvswitch process back to a fresh switch's state between tests, over P4Runtime only.

Tables and counters are easy (delete, write 0). The store's registers are not reachable on BMv2, so every
slot a test may have written is scrubbed with the program's own operations: a SLOT_WRITE of key (0, 0, 0),
version 0 and a zero value through a temporary index entry of generation 0 (SLOT_WRITE needs the key
indexed at the slot), then a PUT of that key, which leaves the slot invalid with version, min-version and
generation 0. The scrubbed slot differs from a never-written one only in
`slot_value_csum` (CRC-32 of 128 zero bytes instead of 0) and `slot_chunk_count` (1 instead of 0: a
SLOT_WRITE needs chunk_count >= 1), visible solely to a SLOT_READ of that slot.
The sketch and Bloom filter need no scrubbing: a new epoch number resets them (`KvNet.epoch_offset`).

Which slots need it is learned by `SlotTracker`, a `Target` wrapper that notes the slot of every
`kv_index` entry (fills and PUTs reach only indexed slots) and of every SLOT_WRITE packet-out.
"""

from __future__ import annotations

import struct
import zlib

from scapy.layers.l2 import Ether

from kvpool.constants import Opcode, Status
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import CLIENT_PORT, STORAGE_IP, STORAGE_MAC, STORAGE_PORT, kvp_frame
from kvtesting.remote_target import RemoteTarget
from softswitch.target import Exact, Lpm, TableEntry

INDEX = "MyIngress.kv_index"
SCRUB_KEY = {"hdr.kvp.tenant": Exact(0), "hdr.kvp.prefix_hash": Exact(0), "hdr.kvp.chunk_idx": Exact(0)}
"""Key (0, 0, 0): no test uses it, so a slot bound to it looks unused."""


class SlotTracker:
    """Forwards everything to the wrapped target; remembers the slots this test may have written."""

    def __init__(self, target: RemoteTarget) -> None:
        self._target = target
        self.dirty_slots: set[int] = set()
        self.clone_sessions: set[int] = set()
        """Clone sessions this test configured (deleted by the reset)."""
        self.epoch_offset = 0
        """Added to every sketch epoch the test sets (`KvNet.epoch_offset`): old cells never count again."""

    def __getattr__(self, name: str):
        return getattr(self._target, name)

    def table_insert(self, entry: TableEntry) -> None:
        self._note_entry(entry)
        self._target.table_insert(entry)

    def table_modify(self, entry: TableEntry) -> None:
        self._note_entry(entry)
        self._target.table_modify(entry)

    def clone_session_set(self, session_id: int, replicas, truncate: int = 0) -> None:
        self.clone_sessions.add(session_id)
        self._target.clone_session_set(session_id, replicas, truncate)

    def process(self, ingress_port: int, data: bytes) -> list[tuple[int, bytes]]:
        self._note_packet(ingress_port, data)
        return self._target.process(ingress_port, data)

    def process_expecting(self, ingress_port: int, data: bytes, frames: int) -> list[tuple[int, bytes]]:
        self._note_packet(ingress_port, data)
        return self._target.process_expecting(ingress_port, data, frames)

    def _note_packet(self, ingress_port: int, data: bytes) -> None:
        if ingress_port == self._target.cpu_port:
            frame = Ether(data[4:])
            if KVP in frame and frame[KVP].opcode == Opcode.SLOT_WRITE:
                self.dirty_slots.add(int(frame[KVP].aux))

    def _note_entry(self, entry: TableEntry) -> None:
        if entry.table == INDEX and "slot" in entry.params:
            self.dirty_slots.add(entry.params["slot"])


def reset_kvswitch(tracker: SlotTracker) -> None:
    """Tables, counters, digests and every slot the tracker saw, back to a fresh switch's state."""
    target: RemoteTarget = tracker._target
    slot_count = target.names.counter("MyIngress.slot_hits").size
    slots = sorted(s for s in tracker.dirty_slots if s < slot_count)
    target.clear_tables()
    for session in sorted(tracker.clone_sessions):
        target.clone_session_delete(session)
    tracker.clone_sessions.clear()
    if slots:
        _scrub_slots(target, slots)
        target.clear_tables()
        for s in slots:
            target.counter_write("MyIngress.slot_hits", s, 0, 0)
    target.zero_counters(["MyIngress.drop_reason", "MyIngress.kvp_events"])
    target.drain_digests()
    target.late_frames.clear()
    tracker.dirty_slots.clear()


def _scrub_slots(target: RemoteTarget, slots: list[int]) -> None:
    target.table_insert(TableEntry("MyIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(_ip(STORAGE_IP), 32)},
                                   "MyIngress.ipv4_forward", {"dst_mac": _mac(STORAGE_MAC), "port": STORAGE_PORT}))
    zero = bytes(128)
    for slot in slots:
        # generation 0: what a never-written slot holds (every test admission has a generation >= 1)
        target.table_insert(TableEntry(INDEX, SCRUB_KEY, "MyIngress.set_slot",
                                       {"slot": slot, "min_version": 0, "generation": 0}))
        write = KVP(opcode=Opcode.SLOT_WRITE, chunk_count=1, version=0, aux=slot, value_len=0,
                    value_csum=zlib.crc32(zero)) / KVPValue.from_bytes(zero)
        out = target.process_expecting(target.cpu_port, struct.pack("!HH", 0, 0) + bytes(kvp_frame(write)), 1)
        assert len(out) == 1 and Ether(out[0][1][4:])[KVP].status == Status.OK, f"scrub of slot {slot}: {out}"
        put = KVP(opcode=Opcode.PUT, chunk_count=1, version=0) / KVPValue.from_bytes(zero)
        out = target.process_expecting(CLIENT_PORT, bytes(kvp_frame(put)), 1)
        assert [p for p, _ in out] == [STORAGE_PORT], f"scrub of slot {slot}: the PUT was not forwarded: {out}"
        target.table_delete(INDEX, SCRUB_KEY)


def _ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)
