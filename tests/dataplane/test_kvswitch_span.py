"""The span GET at the switch (docs/protocol.md, GET `aux`; docs/dataplane.md, "Coalescing"): a GET whose aux k > 1
asks for k consecutive chunks. The switch never answers one from its pool (it holds 128-byte chunks only), and
coalesces identical span GETs: one forwarded GET, every parked reader a copy of each of the k replies with its own
req_id + offset. Runs on every target of `conftest.target`, on test_kvswitch_coalesce's network of readers.
"""

from __future__ import annotations

from collections.abc import Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import Opcode, Status
from kvpool.protocol import KVP
from kvtesting.kvnet import CLIENT_PORT, STORAGE_PORT, KvNet, kvp_frame, value_chunk
from tests.dataplane.test_kvswitch_coalesce import (
    KEY,
    A,
    C,
    CoalesceNet,
    D,
    assert_each_reader_served_once,
    coal,  # noqa: F401 (the fixture)
    gets_to_storage,
)

SPAN = 4
"""Chunks one span GET asks for in these tests."""


# ---- checks -----------------------------------------------------------------------------------------------

def replies_by_reader(out: Sequence[tuple[int, bytes]]) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    """(reader IPv4, UDP port) -> [(port, req_id, chunk_idx)] of the GET_REPLYs in `out`."""
    seen: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for port, data in out:
        frame = Ether(data)
        seen.setdefault((frame[IP].dst, frame[UDP].dport), []).append(
            (port, frame[KVP].req_id, frame[KVP].chunk_idx))
    return seen


# ---- stage 1: a span GET is never answered from the pool ---------------------------------------------------

def test_a_span_get_of_a_pooled_chunk_goes_to_its_storage_node(net: KvNet) -> None:
    """A valid 128-byte chunk in the pool answers a single GET (aux 0 or 1: HIT_SWITCH); a span GET starting at it
    goes to the storage node unchanged: the pool cannot answer its other chunks."""
    net.index(KEY, slot=5)
    assert [p for p, _ in net.server_reply(KEY, value_chunk(1), version=3, frames=1)] == [CLIENT_PORT]
    for req_id, aux in ((10, 0), (11, 1)):
        single = pool_get(net, req_id, aux)
        assert [p for p, _ in single] == [CLIENT_PORT]
        assert Ether(single[0][1])[KVP].status == Status.HIT_SWITCH
    span = pool_get(net, 12, SPAN)
    assert [p for p, _ in span] == [STORAGE_PORT], "a span GET was answered from the pool"
    frame = Ether(span[0][1])
    assert (frame[KVP].opcode, frame[KVP].aux, frame[KVP].req_id) == (Opcode.GET, SPAN, 12)
    assert net.slot_hits(5, until=2) == 2


def test_a_span_get_beside_a_pending_single_get_is_forwarded(coal: CoalesceNet) -> None:  # noqa: F811
    """A span GET of a chunk whose single GET is pending is forwarded (it asks another question), and the single
    GET's waiters still get their reply."""
    coal.configure()
    assert gets_to_storage(coal.get(A, 1, frames=1)) == 1
    assert coal.get(C, 2, parks=True) == []
    assert gets_to_storage(coal.get(D, 3, aux=SPAN, frames=1)) == 1, "a span GET parked on a single GET's entry"
    assert coal.event("COALESCED") == 1
    assert_each_reader_served_once(coal.reply(A, 1, frames=2), {A: 1, C: 2})
    # the span GET's first reply goes to its reader only
    assert_each_reader_served_once(coal.reply(D, 3, frames=1), {D: 3})
    assert coal.replicated() == 1


def pool_get(net: KvNet, req_id: int, aux: int) -> list[tuple[int, bytes]]:
    """The client's GET of KEY with `aux` (the span), and what the switch sends for it (one frame)."""
    kvp = KVP(opcode=Opcode.GET, tenant=KEY.tenant, prefix_hash=KEY.prefix_hash, chunk_idx=KEY.chunk_idx,
              chunk_count=4, req_id=req_id, aux=aux)
    return net.send(CLIENT_PORT, kvp_frame(kvp), frames=1)
