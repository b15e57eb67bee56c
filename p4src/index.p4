/* -*- P4_16 -*- */
/*
 * kvswitch: the pool index (included inside control MyIngress).
 *
 * Block key (tenant, prefix_hash, chunk_idx) -> slot of the switch pool.
 * Only the controller writes it.  An entry says where the key's value
 * lives or will live; the store (store.p4) keeps the key beside the value
 * and checks it on every use, so a stale entry can never serve another
 * key's value.
 */

/* The key is in the pool: its value lives in `slot`; values older than */
/* `min_version` (the newest version the controller knows of) are never */
/* served or filled (0 = no bound).                                      */
action set_slot(slot_index_t slot, bit<32> min_version) {
    meta.indexed = true;
    meta.slot = (bit<32>)slot;
    meta.index_min_version = min_version;
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
