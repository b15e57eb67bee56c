/* -*- P4_16 -*- */
/*
 * kvswitch: hot-key detection (included inside control MyIngress).
 *
 * A count-min sketch (3 rows, different hash functions) estimates how
 * often each key missed the pool in the current epoch.  When a key's
 * estimate reaches the controller's threshold, a Bloom filter (2 hash
 * functions) lets exactly one hot_key_digest_t through per key and epoch.
 *
 * Reset without register access (P4Runtime cannot write registers on
 * BMv2): the controller sets the epoch in sketch_config's default action.
 * Every cell stores the epoch it was last written in beside its count; a
 * cell from another epoch reads as 0.  Epoch 0 turns detection off.
 */

/* ---- state ------------------------------------------------------------ */

/* Count of row r's cell (GET misses, saturating) and its epoch tag.    */
register<bit<32>>(SKETCH_CELLS) sketch_count_r0;
register<bit<32>>(SKETCH_CELLS) sketch_count_r1;
register<bit<32>>(SKETCH_CELLS) sketch_count_r2;
register<bit<32>>(SKETCH_CELLS) sketch_epoch_r0;
register<bit<32>>(SKETCH_CELLS) sketch_epoch_r1;
register<bit<32>>(SKETCH_CELLS) sketch_epoch_r2;

/* Bloom filter: a cell is set iff it holds the current epoch.          */
register<bit<32>>(BLOOM_CELLS) bloom_epoch_0;
register<bit<32>>(BLOOM_CELLS) bloom_epoch_1;

/* ---- configuration ---------------------------------------------------- */

/* hot_threshold: estimate (GET misses this epoch) that makes a key hot; */
/* epoch: current epoch number, != 0; a new number resets sketch and     */
/* Bloom filter at once.                                                 */
action set_sketch_config(bit<32> hot_threshold, bit<32> epoch) {
    meta.hot_threshold = hot_threshold;
    meta.epoch = epoch;
}

/* Detection off (the initial state). */
action sketch_off() {
    meta.hot_threshold = 0;
    meta.epoch = 0;
}

/* Keyless: the controller sets only its default action. */
table sketch_config {
    actions = {
        set_sketch_config;
        sketch_off;
    }
    size = 1;
    default_action = sketch_off();
}

/* ---- count ------------------------------------------------------------ */

/* Count one GET miss of the packet's key; meta.estimate = min of rows. */
action sketch_update() {
    bit<32> i0;
    bit<32> i1;
    bit<32> i2;
    hash(i0, HashAlgorithm.crc32, 32w0,
         { hdr.kvp.tenant, hdr.kvp.prefix_hash, hdr.kvp.chunk_idx },
         SKETCH_CELLS);
    hash(i1, HashAlgorithm.crc16, 32w0,
         { hdr.kvp.tenant, hdr.kvp.prefix_hash, hdr.kvp.chunk_idx },
         SKETCH_CELLS);
    hash(i2, HashAlgorithm.crc32, 32w0,
         { SKETCH_SALT_ROW2, hdr.kvp.tenant, hdr.kvp.prefix_hash,
           hdr.kvp.chunk_idx },
         SKETCH_CELLS);

    bit<32> c0;
    bit<32> c1;
    bit<32> c2;
    bit<32> e0;
    bit<32> e1;
    bit<32> e2;
    sketch_count_r0.read(c0, i0);
    sketch_count_r1.read(c1, i1);
    sketch_count_r2.read(c2, i2);
    sketch_epoch_r0.read(e0, i0);
    sketch_epoch_r1.read(e1, i1);
    sketch_epoch_r2.read(e2, i2);
    if (e0 != meta.epoch) { c0 = 0; }
    if (e1 != meta.epoch) { c1 = 0; }
    if (e2 != meta.epoch) { c2 = 0; }
    c0 = c0 |+| 1;
    c1 = c1 |+| 1;
    c2 = c2 |+| 1;
    sketch_count_r0.write(i0, c0);
    sketch_count_r1.write(i1, c1);
    sketch_count_r2.write(i2, c2);
    sketch_epoch_r0.write(i0, meta.epoch);
    sketch_epoch_r1.write(i1, meta.epoch);
    sketch_epoch_r2.write(i2, meta.epoch);

    meta.estimate = c0;
    if (c1 < meta.estimate) { meta.estimate = c1; }
    if (c2 < meta.estimate) { meta.estimate = c2; }
}

/* ---- report once per epoch ------------------------------------------ */

/* meta.already_reported = both Bloom cells hold this epoch; then set.   */
action bloom_test_and_set() {
    bit<32> j0;
    bit<32> j1;
    hash(j0, HashAlgorithm.crc32, 32w0,
         { BLOOM_SALT_0, hdr.kvp.tenant, hdr.kvp.prefix_hash,
           hdr.kvp.chunk_idx },
         BLOOM_CELLS);
    hash(j1, HashAlgorithm.crc16, 32w0,
         { BLOOM_SALT_1, hdr.kvp.tenant, hdr.kvp.prefix_hash,
           hdr.kvp.chunk_idx },
         BLOOM_CELLS);
    bit<32> b0;
    bit<32> b1;
    bloom_epoch_0.read(b0, j0);
    bloom_epoch_1.read(b1, j1);
    meta.already_reported = b0 == meta.epoch && b1 == meta.epoch;
    bloom_epoch_0.write(j0, meta.epoch);
    bloom_epoch_1.write(j1, meta.epoch);
}

action report_hot_key() {
    digest<hot_key_digest_t>(HOT_DIGEST_RECEIVER, {
        hdr.kvp.tenant,
        hdr.kvp.prefix_hash,
        hdr.kvp.chunk_idx,
        meta.estimate
    });
    count_event(kvp_event_t.HOT_DIGEST);
}
