"""Codes of the P4 program that only the switch and the controller share (not on the KVP wire), packaged.

The controller reads these from P4Info when p4c lists them there (a serializable enum appears in P4Info only
when a P4Info object has its type) and falls back to this copy otherwise, so an installed controller needs
neither the P4 source nor a regex over it. tests/controller/test_codes.py checks the copy against
p4src/include/constants.p4. The KVP wire codes (opcodes, statuses, tiers) live in `kvpool.constants`.
"""

from __future__ import annotations

from enum import IntEnum


class PuntReason(IntEnum):
    """`enum bit<8> punt_reason_t`: why the switch sent a packet to the CPU port (packet_in.reason)."""

    CLIENT_OP = 1
    """INSERT or LOOKUP_META for the controller."""
    SLOT_REPLY = 2
    """SLOT_WRITE_ACK or SLOT_READ_REPLY."""


class KvpEvent(IntEnum):
    """`enum bit<8> kvp_event_t`: cells of the `kvp_events` counter."""

    GET_HIT = 1
    GET_MISS = 2
    FILL = 3
    PUT_INVALIDATE = 4
    PUNT = 5
    HOT_DIGEST = 6
    SLOT_WRITE = 7
    SLOT_READ = 8
    PACKET_OUT = 9
    PUT_ACK_BOUND = 10
    """A trusted PUT_ACK OK raised an indexed slot's minimum version."""
    FABRIC_INVALIDATE = 11
    """An INVALIDATE from the fabric was applied."""
    OVER_SLOT_REPLY = 12
    """A trusted reply of an indexed key carried a chunk larger than a slot (an over_slot_digest_t was sent)."""


class PortRole(IntEnum):
    """`enum bit<8> port_role_t`: who is behind a switch port, hence what it may do (the trust boundary of docs/protocol.md, *Trust*)."""

    HOST = 0
    """Default, untrusted: its replies are never stored, its control opcodes dropped."""
    STORAGE = 1
    """A storage node: its GET_REPLY may fill a slot, its PUT_ACK raises a key's minimum version."""
    FABRIC = 2
    """A link to another switch: trusted like a storage node."""


FALLBACKS: dict[str, type[IntEnum]] = {
    "punt_reason_t": PuntReason,
    "kvp_event_t": KvpEvent,
    "port_role_t": PortRole,
}
"""P4 enum name → its packaged copy."""


def members(enum: type[IntEnum]) -> dict[str, int]:
    return {member.name: int(member) for member in enum}

FABRIC_INVALIDATE_SESSION = 1
"""Clone session a storage node's acknowledged PUT is copied to as a fabric INVALIDATE
(`FABRIC_INVALIDATE_SESSION` in p4src/include/constants.p4; docs/dataplane.md, "Fabric coherence"): the
controller fills it with the switch's FABRIC ports only."""

