"""An admission the switch shows to be of a chunk larger than a slot is undone, and its block is not admitted
again (controller/overslot.py, `PoolManager.on_over_slot`; docs/dataplane.md, "Over-slot replies"): the entry is
deleted, the slot freed, nothing recycled (the slot never held the chunk), later hot digests of any chunk of the
block ignored while the bounded memory keeps it, admitted again once it forgot."""

from __future__ import annotations

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.ledger import PoolOptions
from controller.overslot import OverSlotBlocks
from controller.pool import PoolManager
from controller.tiers import TierMap, TierMover
from kvpool.constants import KVP_MAX_CHUNK_SHIFT, KVP_SLOT_SHIFT
from kvpool.keys import ChunkKey
from p4rt.bytestrings import encode
from p4rt.p4info import P4Info
from tests.controller.fake_p4rt import controller_on_fake_switch
from tests.controller.fakes import Clock, FakeDataPlane, make_policies
from tests.controller.test_no_incast_amplification import PATIENCE, WatchedStorage
from tests.controller.test_p4runtime import P4INFO_PATH, wait_for
from tests.controller.test_service import digest as hot_digest
from tests.controller.test_service import index_of

BLOCK = [ChunkKey(5, 0x5000, chunk) for chunk in range(4)]
"""Chunks of one block of 8 KiB chunks (chunk 0 is what readers that do not know the size ask slot-sized)."""
OTHER = [ChunkKey(5, 0x6000 + i, 0) for i in range(4)]
"""Chunk 0 of other blocks."""
SHIFT = KVP_MAX_CHUNK_SHIFT


def make_pool(capacity: int = 4, remembered: int = 65_536):
    dataplane, storage = FakeDataPlane(capacity), WatchedStorage()
    pool = PoolManager(dataplane, make_policies(threshold=1, recycle_at=0.0),  # recycling would demote any victim
                       mover=TierMover(TierMap(), storage), clock=Clock(),
                       options=PoolOptions(over_slot_blocks=remembered))
    storage.pool = pool
    return pool, dataplane, storage


def test_the_digest_frees_the_slot_deletes_the_entry_and_recycles_nothing():
    pool, dataplane, storage = make_pool()
    slot = pool.on_hot_key(BLOCK[0], estimate=3)
    assert slot is not None and dataplane.index == {BLOCK[0]: slot}
    assert pool.on_over_slot(BLOCK[0], SHIFT, pool.slotpool.generation_of(BLOCK[0])) == slot
    assert dataplane.index == {} and BLOCK[0] not in pool.slots and len(pool.slots) == 0
    assert storage.calls == [] and storage.moves == [], "recycled what the slot never held"
    assert [d.action for d in pool.decisions][-2:] == ["evict", "drop"]
    snapshot = pool.metrics.snapshot()
    assert snapshot["over_slot"] == {"undone": 1} and snapshot["over_slot_blocks"] == 1
    assert snapshot["evictions"] == {"over-slot": 1} and snapshot["drops"] == 1


def test_later_hot_digests_of_any_chunk_of_the_block_are_ignored():
    pool, dataplane, _ = make_pool()
    pool.on_hot_key(BLOCK[0], estimate=3)
    pool.on_over_slot(BLOCK[0], SHIFT, pool.slotpool.generation_of(BLOCK[0]))
    installs = len(dataplane.installs)
    for key in BLOCK:
        assert pool.on_hot_key(key, estimate=50) is None
    assert len(dataplane.installs) == installs and dataplane.index == {}
    assert pool.metrics.ignored == {"over-slot block digest": len(BLOCK)}
    assert pool.on_hot_key(OTHER[0], estimate=3) is not None, "another block's chunk is still admitted"


def test_an_over_slot_reply_of_an_unadmitted_chunk_still_keeps_its_block_out():
    pool, dataplane, _ = make_pool()
    assert pool.on_over_slot(BLOCK[2], SHIFT, generation=9) is None
    assert pool.on_hot_key(BLOCK[0], estimate=3) is None and dataplane.index == {}
    assert pool.metrics.over_slot == {"not resident": 1}


def test_a_reply_of_an_earlier_admission_leaves_the_current_one():
    """The digest names the admission (generation) the reply passed under; a slot since given to a newer
    admission of the key is that admission's (its own replies report it if they are larger too)."""
    pool, dataplane, _ = make_pool()
    slot = pool.on_hot_key(BLOCK[0], estimate=3)
    current = pool.slotpool.generation_of(BLOCK[0])
    assert pool.on_over_slot(BLOCK[0], SHIFT, generation=current - 1) is None
    assert dataplane.index == {BLOCK[0]: slot}
    assert pool.metrics.over_slot == {"earlier admission": 1}
    assert pool.on_over_slot(BLOCK[0], SHIFT, generation=current) == slot and dataplane.index == {}


def test_a_block_forgotten_by_the_bounded_memory_is_admitted_again():
    pool, dataplane, _ = make_pool(remembered=2)
    pool.on_hot_key(BLOCK[0], estimate=3)
    pool.on_over_slot(BLOCK[0], SHIFT, pool.slotpool.generation_of(BLOCK[0]))
    pool.on_over_slot(OTHER[0], SHIFT)
    assert pool.on_hot_key(BLOCK[0], estimate=3) is None, "still remembered (and now the most recently seen)"
    pool.on_over_slot(OTHER[1], SHIFT)  # a third block: OTHER[0]'s, the least recently seen, is forgotten
    assert pool.on_hot_key(BLOCK[1], estimate=3) is None and len(pool.over_slot_blocks) == 2
    pool.on_over_slot(OTHER[2], SHIFT)  # a fourth: OTHER[1]'s goes, BLOCK's was seen after it
    assert pool.on_hot_key(OTHER[0], estimate=3) is not None, "forgotten: admitted again"
    pool.on_over_slot(OTHER[3], SHIFT)
    pool.on_over_slot(OTHER[1], SHIFT)  # two more blocks: BLOCK's is forgotten now
    assert pool.on_hot_key(BLOCK[0], estimate=3) is not None and BLOCK[0] in dataplane.index


def test_an_insert_of_a_remembered_block_is_not_admitted_unless_it_carries_a_slot_sized_chunk():
    pool, dataplane, _ = make_pool()
    pool.on_over_slot(BLOCK[0], SHIFT)
    pool.offer(BLOCK[1], version=1)
    assert dataplane.index == {} and pool.metrics.ignored == {"over-slot block INSERT": 1}
    pool.offer(BLOCK[1], value=b"v" * 128, version=2, chunk_shift=KVP_SLOT_SHIFT)  # the block's chunks fit now
    assert BLOCK[1] in dataplane.index and len(pool.over_slot_blocks) == 0


def test_a_pinned_chunk_keeps_its_slot():
    pool, dataplane, _ = make_pool()
    pool.pin(BLOCK[0])
    assert pool.on_over_slot(BLOCK[0], SHIFT, pool.slotpool.generation_of(BLOCK[0])) is None
    assert BLOCK[0] in dataplane.index and pool.metrics.over_slot == {"pinned": 1}


def test_the_memory_forgets_the_least_recently_seen_block_first():
    blocks = OverSlotBlocks(capacity=2)
    a, b, c = (key.block for key in OTHER[:3])
    assert blocks.add(a) and blocks.add(b) and not blocks.add(a)
    assert blocks.seen(b)  # b is now the most recently seen, a the least
    blocks.add(c)
    assert (blocks.seen(a), blocks.seen(b), blocks.seen(c)) == (False, True, True)
    assert blocks.forget(b) and not blocks.forget(b) and len(blocks) == 1


# ---- the controller process: the switch's digest undoes the admission ------------------------------------------


def with_over_slot_digest(tmp_path) -> tuple[str, P4Info]:
    """A copy of the test P4Info with the program's `over_slot_digest_t` (its chunk_idx as wide as the test
    P4Info's hot-key digest's)."""
    message = p4info_pb2.P4Info()
    message.CopyFrom(P4Info.load(P4INFO_PATH).message)
    digest = message.digests.add()
    digest.preamble.id = max(d.preamble.id for d in message.digests) + 1
    digest.preamble.name = digest.preamble.alias = digest.type_spec.struct.name = "over_slot_digest_t"
    struct = message.type_info.structs["over_slot_digest_t"]
    for name, width in (("tenant", 16), ("prefix_hash", 64), ("chunk_idx", 8), ("chunk_shift", 8),
                        ("generation", 32)):
        struct.members.add(name=name).type_spec.bitstring.bit.bitwidth = width
    path = tmp_path / "with_over_slot.p4info.txtpb"
    path.write_text(text_format.MessageToString(message))
    return str(path), P4Info(message)


def over_slot_digest(info: P4Info, key: ChunkKey, generation: int) -> p4runtime_pb2.StreamMessageResponse:
    response = p4runtime_pb2.StreamMessageResponse()
    response.digest.digest_id = info.digest_id("over_slot_digest_t")
    response.digest.list_id = 2
    member = response.digest.data.add().struct
    for value, width in ((key.tenant, 16), (key.prefix_hash, 64), (key.chunk, 8), (SHIFT, 8), (generation, 32)):
        member.members.add().bitstring = encode(value, width)
    return response


def test_the_controller_subscribes_to_the_digest_and_the_switch_table_loses_the_entry(tmp_path):
    p4info, info = with_over_slot_digest(tmp_path)
    with controller_on_fake_switch(tmp_path, p4info, PATIENCE) as (controller, switch):
        assert info.digest_id("over_slot_digest_t") in switch.digests
        switch.push(hot_digest(BLOCK[0]))
        assert wait_for(lambda: BLOCK[0] in index_of(switch), PATIENCE)
        generation = controller.pool.slotpool.generation_of(BLOCK[0])
        assert generation is not None
        switch.push(over_slot_digest(info, BLOCK[0], generation))
        switch.push(hot_digest(BLOCK[1]))  # ignored: its block is remembered
        switch.push(hot_digest(OTHER[0]))  # the barrier: digests are handled in order
        assert wait_for(lambda: OTHER[0] in index_of(switch), PATIENCE)
        assert index_of(switch) == {OTHER[0]: 0}
        snapshot = controller.metrics.snapshot()
        assert snapshot["over_slot"] == {"undone": 1} and snapshot["ignored"] == {"over-slot block digest": 1}
        assert controller.status()["over_slot_blocks"] == 1
