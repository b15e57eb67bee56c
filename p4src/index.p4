/* -*- P4_16 -*- */
/*
 * kvswitch: the pool index (docs/dataplane.md, "Index").
 *
 * Chunk key (tenant, prefix_hash, chunk_idx) -> slot of the switch pool.
 * Only the controller writes it.  An entry says where the key's value
 * lives or will live, and under which admission: the store (store.p4)
 * keeps the key and the admission's generation beside the value and
 * checks both on every use, so neither a stale entry nor an old
 * admission of the same key can ever be served.
 *
 * Looked up for what the pool may act on (request_t: a SLOT_WRITE, GET,
 * fill, PUT, ack, INVALIDATE or LOOKUP_META) and for a trusted reply
 * larger than a slot (over_slot.p4 reports it when indexed), once on
 * every path (BMv2 needs one successor per table).
 *
 * Reads: the KVP header's key (aux: a SLOT_* op's slot), request_t.
 * Writes: index_t (hit, slot, min_version, generation); on a miss slot is
 * kvp.aux and the rest is left as it was.
 */

control Index(in kvp_h kvp, in request_t req, inout index_t index) {

    /* The key is in the pool: its value lives in `slot`; values older   */
    /* than `min_version` (the newest version the controller knows of)   */
    /* are never served or filled (0 = no bound).  `generation` (!= 0)   */
    /* identifies this admission of the key to the slot: unique per      */
    /* admission, strictly increasing across controller and switch       */
    /* restarts.  A slot filled or written under another generation      */
    /* counts as empty.                                                   */
    @name(".MyIngress.set_slot")
    action set_slot(slot_index_t slot, bit<32> min_version, bit<32> generation) {
        index.hit = true;
        index.slot = (bit<32>)slot;
        index.min_version = min_version;
        index.generation = generation;
    }

    @name(".MyIngress.kv_index")
    table kv_index {
        key = {
            kvp.tenant: exact @name("hdr.kvp.tenant");
            kvp.prefix_hash: exact @name("hdr.kvp.prefix_hash");
            kvp.chunk_idx: exact @name("hdr.kvp.chunk_idx");
        }
        actions = {
            set_slot;
            @defaultonly NoAction;
        }
        size = 1 << SLOT_INDEX_WIDTH;
        default_action = NoAction();
    }

    apply {
        index.slot = kvp.aux;
        if (req.slot_write || req.get || req.fill || req.put || req.ack
            || req.invalidate || req.lookup || req.over_slot) {
            kv_index.apply();
        }
    }
}
