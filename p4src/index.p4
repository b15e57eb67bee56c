/* -*- P4_16 -*- */
/*
 * kvswitch: the pool index (included inside control MyIngress).
 *
 * Block key (tenant, prefix_hash, chunk_idx) -> slot of the switch pool.
 * Only the controller writes it.  An entry says where the key's value
 * lives or will live, and under which admission: the store (store.p4)
 * keeps the key and the admission's generation beside the value and
 * checks both on every use, so neither a stale entry nor an old
 * admission of the same key can ever be served.
 */

/* The key is in the pool: its value lives in `slot`; values older than */
/* `min_version` (the newest version the controller knows of) are never */
/* served or filled (0 = no bound).  `generation` (!= 0) identifies this */
/* admission of the key to the slot: unique per admission, strictly      */
/* increasing across controller and switch restarts.  A slot filled or   */
/* written under another generation counts as empty.                     */
action set_slot(slot_index_t slot, bit<32> min_version, bit<32> generation) {
    meta.indexed = true;
    meta.slot = (bit<32>)slot;
    meta.index_min_version = min_version;
    meta.index_generation = generation;
}

table kv_index {
    key = {
        hdr.kvp.tenant: exact;
        hdr.kvp.prefix_hash: exact;
        hdr.kvp.chunk_idx: exact;
    }
    actions = {
        set_slot;
        @defaultonly NoAction;
    }
    size = 1 << SLOT_INDEX_WIDTH;
    default_action = NoAction();
}
