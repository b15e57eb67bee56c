/* -*- P4_16 -*- */
/*
 * kvswitch: replies too large for a slot (docs/dataplane.md, "Over-slot
 * replies").
 *
 * A slot holds one slot-sized chunk (KVP_SLOT_SHIFT).  A GET does not
 * know its block's chunk size (a reader that has not seen the block yet
 * asks with the slot's), so the sketch may make a key hot, and the
 * controller admit it, though its chunks are larger: such a slot can
 * never be filled.  The storage node's reply says the real size.  For a
 * trusted reply of an indexed key whose chunk is larger than a slot,
 * this step sends over_slot_digest_t (the key, the reply's chunk_shift,
 * the index entry's generation); the controller drops that admission and
 * admits no chunk of the block again.  The reply itself is forwarded as
 * it would be without this step.
 *
 * Reads: the reply's key and chunk_shift (kvp), the index entry's
 * generation.  Writes: the digest, kvp_events (OVER_SLOT_REPLY).  The
 * caller applies it to over-slot replies (request_t.over_slot) of
 * indexed keys.
 */

control OverSlot(in kvp_h kvp, in index_t index, counter kvp_events) {

    @name(".MyIngress.report_over_slot")
    action report_over_slot() {
        digest<over_slot_digest_t>(OVER_SLOT_DIGEST_RECEIVER, {
            kvp.tenant,
            kvp.prefix_hash,
            kvp.chunk_idx,
            kvp.chunk_shift,
            index.generation
        });
        kvp_events.count((bit<32>)(bit<8>)kvp_event_t.OVER_SLOT_REPLY);
    }

    apply {
        report_over_slot();
    }
}
