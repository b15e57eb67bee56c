"""Coherence, the data plane's part (docs/dataplane.md, "Coherence"): the pool never serves a wrong value.

Admission generations (a slot serves only the admission that filled it), the trust boundary (only STORAGE and
FABRIC ports fill or bound a slot; hosts cannot plant, deny or send controller opcodes), acknowledged bounds
(a PUT invalidates, only its PUT_ACK OK raises the min-version) and fabric invalidations
(docs/dataplane.md, "Coherence").
"""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import Flag, Opcode, Status
from kvpool.keys import ChunkKey
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import (
    CLIENT_PORT,
    FABRIC_PORTS,
    INVALIDATE,
    STORAGE_PORT,
    KvNet,
    chunk_key,
    kvp_frame,
    value_chunk,
)

KEY = chunk_key(tenant=4, prefix_hash=0x1111_2222_3333_4444, chunk_idx=0)
SLOT = 8
V1, V2 = value_chunk(1), value_chunk(2)


def served(net: KvNet, key: ChunkKey = KEY, req_id: int = 1) -> tuple[int, bytes] | None:
    """(version, value) the switch answers a GET with, or None when the GET goes on to the storage node."""
    out = net.get(key, req_id=req_id, frames=1)
    if [p for p, _ in out] == [STORAGE_PORT]:
        return None
    assert [p for p, _ in out] == [CLIENT_PORT], out
    reply = Ether(out[0][1])
    assert reply[KVP].status == Status.HIT_SWITCH
    return reply[KVP].version, reply[KVPValue].value_bytes


def fill(net: KvNet, value: bytes, version: int, key: ChunkKey = KEY) -> None:
    assert [p for p, _ in net.server_reply(key, value, version, frames=1)] == [CLIENT_PORT]


# ---- admission generations ------------------------------------------------------------------------------

def test_readmission_after_evict_and_put_never_serves_the_old_admissions_value(net: KvNet) -> None:
    """The first coherence scenario: PUT v1, admit, HIT_SWITCH; evict; PUT v2 (not indexed: nothing to
    invalidate); admit again into the same slot: the old bytes are still in the slot but never served."""
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    assert served(net) == (1, V1)

    net.evict(KEY)
    assert [p for p, _ in net.put(KEY, V2, version=2, frames=1)] == [STORAGE_PORT]
    assert [p for p, _ in net.put_ack(KEY, version=2, frames=1)] == [CLIENT_PORT]
    assert net.events("PUT_INVALIDATE") == 0 and net.events("PUT_ACK_BOUND") == 0

    net.index(KEY, SLOT)  # a new admission (new generation), no min_version: the controller did not know v2
    assert served(net) is None, "the slot still holds v1 from the old admission: empty for this one"
    assert net.slot_read(SLOT).version == 1
    fill(net, V2, version=2)
    assert served(net) == (2, V2)


def test_readmission_under_the_same_generation_would_serve_the_old_bytes(net: KvNet) -> None:
    """Why the controller must never reuse a generation: the generation is all that tells admissions apart."""
    net.index(KEY, SLOT, generation=40)
    fill(net, V1, version=1)
    net.evict(KEY)
    net.index(KEY, SLOT, generation=40)
    assert served(net) == (1, V1)


def test_a_slot_written_under_another_admission_is_empty_for_fills_puts_and_acks(net: KvNet) -> None:
    """An old admission's min-version does not leak into the new one: a fill of the current version works."""
    net.index(KEY, SLOT)
    fill(net, V2, version=9)
    net.put_ack(KEY, version=9, frames=1)
    net.evict(KEY)
    net.index(KEY, SLOT, min_version=2)
    fill(net, V2, version=2)  # the slot's old bound (9) belonged to the old admission
    assert served(net) == (2, V2)


# ---- trust: fills only from storage or fabric ports -------------------------------------------------------

@pytest.mark.parametrize("status", [Status.HIT_SERVER, Status.HIT_SWITCH])
def test_forged_reply_from_a_host_is_delivered_marked_bypass_and_never_fills(net: KvNet, status: int) -> None:
    """A host's GET_REPLY (valid CRC, F_VALUE) right after a PUT invalidated the slot. It still
    reaches its destination, marked F_BYPASS (UDP checksum 0), so no switch downstream fills from it either."""
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    net.put(KEY, V2, version=2, frames=1)
    forged = value_chunk(66)
    out = net.server_reply(KEY, forged, version=2, port=CLIENT_PORT, status=status, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    reply = Ether(out[0][1])
    assert int(reply[KVP].flags) & Flag.BYPASS and reply[UDP].chksum == 0
    assert reply[KVPValue].value_bytes == forged
    assert net.drops("REPLY_FROM_HOST") == 1
    assert net.events("FILL") == 1 and served(net) is None

    # the same frame arriving at the next switch over a fabric link: still not a fill source
    assert [p for p, _ in net.send(FABRIC_PORTS[0], reply, frames=1)] == [CLIENT_PORT]
    assert net.events("FILL") == 1 and served(net) is None
    fill(net, V1, version=1)  # the storage node's own reply does fill
    assert served(net) == (1, V1)


def test_reply_from_an_upstream_switch_fills(net: KvNet) -> None:
    net.index(KEY, SLOT)
    assert [p for p, _ in net.server_reply(KEY, V1, version=1, port=FABRIC_PORTS[0],
                                           status=Status.HIT_SWITCH, frames=1)] == [CLIENT_PORT]
    assert served(net) == (1, V1)


def test_forged_put_ack_from_a_host_never_raises_the_min_version(net: KvNet) -> None:
    """A forged PUT_ACK OK with version 0xFFFFFFFF would make the key uncacheable forever."""
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    out = net.put_ack(KEY, version=0xFFFFFFFF, port=CLIENT_PORT, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT] and int(Ether(out[0][1])[KVP].flags) & Flag.BYPASS
    assert net.events("PUT_ACK_BOUND") == 0
    assert served(net) == (1, V1), "not even the valid copy is retired"

    net.put(KEY, V2, version=2, frames=1)
    net.put_ack(KEY, version=2, frames=1)
    fill(net, V2, version=2)
    assert served(net) == (2, V2)


def test_refused_put_leaves_the_key_cacheable(net: KvNet) -> None:
    """A PUT with version 0xFFFFFFFF that the storage node refuses (ERR_STALE) only invalidates."""
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    net.put(KEY, V2, version=0xFFFFFFFF, frames=1)
    out = net.put_ack(KEY, version=0xFFFFFFFF, status=Status.ERR_STALE, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    assert net.events("PUT_ACK_BOUND") == 0
    assert served(net) is None
    fill(net, V1, version=1)
    assert served(net) == (1, V1)


# ---- trust: controller-only opcodes ----------------------------------------------------------------------

CONTROLLER_ONLY = [Opcode.TIER_MOVE, Opcode.TIER_MOVE_ACK, Opcode.SLOT_WRITE_ACK, Opcode.SLOT_READ_REPLY,
                   INVALIDATE]


@pytest.mark.parametrize("opcode", CONTROLLER_ONLY, ids=lambda o: getattr(o, "name", "INVALIDATE"))
def test_controller_only_opcodes_from_a_host_are_dropped(net: KvNet, opcode: int) -> None:
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    frame = kvp_frame(KVP(opcode=opcode, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_count=1,
                          version=7, aux=1))
    assert net.send(CLIENT_PORT, frame) == []
    assert net.drops("CONTROL_OP_FROM_HOST", until=1) == 1
    assert served(net) == (1, V1)


def test_tier_move_from_the_fabric_is_forwarded(net: KvNet) -> None:
    """The controller's TIER_MOVE may cross other switches on its way to the storage node."""
    frame = kvp_frame(KVP(opcode=Opcode.TIER_MOVE, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash,
                          chunk_count=1, aux=3))
    assert [p for p, _ in net.send(FABRIC_PORTS[0], frame, frames=1)] == [STORAGE_PORT]
    assert net.drops("CONTROL_OP_FROM_HOST") == 0


# ---- fabric invalidation ---------------------------------------------------------------------------------

def _invalidations(out: list[tuple[int, bytes]]) -> dict[int, KVP]:
    return {p: Ether(data)[KVP] for p, data in out if Ether(data)[KVP].opcode == INVALIDATE}


def test_storage_nodes_ack_is_sent_to_every_fabric_port_as_an_invalidate(net: KvNet) -> None:
    net.fabric_session()
    out = net.put_ack(KEY, version=5, frames=3)
    assert sorted(p for p, _ in out) == sorted([CLIENT_PORT, *FABRIC_PORTS])
    ack = Ether(next(d for p, d in out if p == CLIENT_PORT))
    assert (ack[KVP].opcode, ack[KVP].status, ack[KVP].version) == (Opcode.PUT_ACK, Status.OK, 5)
    copies = _invalidations(out)
    assert sorted(copies) == sorted(FABRIC_PORTS)
    for port, inv in copies.items():
        frame = Ether(next(d for p, d in out if p == port))
        assert (inv.tenant, inv.prefix_hash, inv.chunk_idx, inv.version, inv.aux) == (
            KEY.tenant, KEY.prefix_hash, KEY.chunk_idx, 5, 1)
        assert inv.status == Status.OK and frame[UDP].chksum == 0
        assert frame[IP].len == len(frame[IP])


@pytest.mark.parametrize("case", ["error-ack", "ack-from-fabric", "ack-from-host", "no-session"])
def test_only_a_storage_nodes_ok_ack_starts_an_invalidation(net: KvNet, case: str) -> None:
    if case != "no-session":
        net.fabric_session()
    if case == "error-ack":
        out = net.put_ack(KEY, version=5, status=Status.ERR_STALE, frames=1)
    elif case == "ack-from-fabric":  # the storage node's own leaf already told the fabric
        out = net.put_ack(KEY, version=5, port=FABRIC_PORTS[0], frames=1)
    elif case == "ack-from-host":
        out = net.put_ack(KEY, version=5, port=CLIENT_PORT, frames=1)
    else:  # one switch, no fabric: the controller configured no session
        out = net.put_ack(KEY, version=5, frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]


def test_invalidate_from_the_fabric_bounds_the_slot_and_is_relayed_once(net: KvNet) -> None:
    """A spine: applies the INVALIDATE, relays it with one hop fewer to its other fabric ports, never back."""
    net.fabric_session()
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    out = net.invalidate(KEY, version=2, hops=1, port=FABRIC_PORTS[0], frames=1)
    assert [p for p, _ in out] == [FABRIC_PORTS[1]]
    relayed = Ether(out[0][1])[KVP]
    assert (relayed.opcode, relayed.version, relayed.aux) == (INVALIDATE, 2, 0)
    assert net.events("FABRIC_INVALIDATE") == 1
    assert served(net) is None
    fill(net, V1, version=1)  # a v1 reply still in flight: refused
    assert net.drops("STALE_FILL") == 1 and served(net) is None
    fill(net, V2, version=2)
    assert served(net) == (2, V2)


def test_invalidate_with_no_relays_left_is_applied_and_goes_nowhere(net: KvNet) -> None:
    """A leaf: applies it, and neither relays nor routes it (it is not addressed to anyone)."""
    net.fabric_session()
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    assert net.invalidate(KEY, version=2, hops=0) == []
    assert net.events("FABRIC_INVALIDATE", until=1) == 1  # applied before the GET below is sent
    assert served(net) is None


def test_invalidate_for_a_key_not_indexed_changes_nothing(net: KvNet) -> None:
    other = chunk_key(tenant=KEY.tenant, prefix_hash=KEY.prefix_hash ^ 0xFF, chunk_idx=0)
    net.index(KEY, SLOT)
    fill(net, V1, version=1)
    assert net.invalidate(other, version=2, hops=0) == []
    assert net.events("FABRIC_INVALIDATE", until=1) == 1  # handled before the GET below is sent
    assert served(net) == (1, V1)
