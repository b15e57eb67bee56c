/* -*- P4_16 -*- */
/*
 * kvswitch: hot-key detection (docs/dataplane.md, "Hot-key detection").
 *
 * A count-min sketch (3 rows, different hash functions) estimates how
 * often each key missed the pool in the current epoch.  A key is reported
 * at its reply, not at its GET: when a trusted slot-sized reply of the
 * key passes (the storage node's word that a slot can hold the
 * chunk) and the key's estimate has reached the controller's threshold,
 * a Bloom filter (2 hash functions) lets exactly one hot_key_digest_t
 * through per key and epoch.  A GET does not know its block's chunk size,
 * its reply does: a chunk no slot can hold never has a slot-sized reply,
 * so it is never reported (docs/dataplane.md, "Over-slot replies").
 *
 * Reset without register access (P4Runtime cannot write registers on
 * BMv2): the controller sets the epoch in sketch_config's default action.
 * Every cell stores the epoch it was last written in beside its count; a
 * cell from another epoch reads as 0.  Epoch 0 turns detection off.
 *
 * Reads: the key (kvp); at_reply: the packet is a trusted slot-sized
 * reply (req.fill: report the key if hot), else a GET miss of a
 * slot-sized chunk (count).  Writes: its own registers, the digest,
 * kvp_events (HOT_DIGEST).  Its state (epoch, threshold, estimate) is
 * its own.
 */

control Sketch(in kvp_h kvp, in bool at_reply, counter kvp_events) {
    bit<32> current_epoch = 0;  /* sketch_config's epoch; 0 = sketch off */
    bit<32> threshold = 0;      /* estimate that makes a key hot         */
    bit<32> estimate = 0;       /* count-min estimate after this packet  */
    bool already_reported = false; /* Bloom filter: digest sent this epoch */

    /* ---- state ------------------------------------------------------------ */

    /* Count of row r's cell (GET misses, saturating) and its epoch tag.    */
    @name(".MyIngress.sketch_count_r0")
    register<bit<32>>(SKETCH_CELLS) sketch_count_r0;
    @name(".MyIngress.sketch_count_r1")
    register<bit<32>>(SKETCH_CELLS) sketch_count_r1;
    @name(".MyIngress.sketch_count_r2")
    register<bit<32>>(SKETCH_CELLS) sketch_count_r2;
    @name(".MyIngress.sketch_epoch_r0")
    register<bit<32>>(SKETCH_CELLS) sketch_epoch_r0;
    @name(".MyIngress.sketch_epoch_r1")
    register<bit<32>>(SKETCH_CELLS) sketch_epoch_r1;
    @name(".MyIngress.sketch_epoch_r2")
    register<bit<32>>(SKETCH_CELLS) sketch_epoch_r2;

    /* Bloom filter: a cell is set iff it holds the current epoch.          */
    @name(".MyIngress.bloom_epoch_0")
    register<bit<32>>(BLOOM_CELLS) bloom_epoch_0;
    @name(".MyIngress.bloom_epoch_1")
    register<bit<32>>(BLOOM_CELLS) bloom_epoch_1;

    /* ---- configuration ---------------------------------------------------- */

    /* hot_threshold: estimate (GET misses this epoch) that makes a key hot; */
    /* epoch: current epoch number, != 0; a new number resets sketch and     */
    /* Bloom filter at once.                                                 */
    @name(".MyIngress.set_sketch_config")
    action set_sketch_config(bit<32> hot_threshold, bit<32> epoch) {
        threshold = hot_threshold;
        current_epoch = epoch;
    }

    /* Detection off (the initial state). */
    @name(".MyIngress.sketch_off")
    action sketch_off() {
        threshold = 0;
        current_epoch = 0;
    }

    /* Keyless: the controller sets only its default action. */
    @name(".MyIngress.sketch_config")
    table sketch_config {
        actions = {
            set_sketch_config;
            sketch_off;
        }
        size = 1;
        default_action = sketch_off();
    }

    /* ---- count ------------------------------------------------------------ */

    /* Add `misses` (1: a GET miss; 0: a reply only reads) to the packet's  */
    /* key; estimate = min of rows.                                          */
    @name(".MyIngress.sketch_update")
    action sketch_update(in bit<32> misses) {
        bit<32> i0;
        bit<32> i1;
        bit<32> i2;
        hash(i0, HashAlgorithm.crc32, 32w0,
             { kvp.tenant, kvp.prefix_hash, kvp.chunk_idx },
             SKETCH_CELLS);
        hash(i1, HashAlgorithm.crc16, 32w0,
             { kvp.tenant, kvp.prefix_hash, kvp.chunk_idx },
             SKETCH_CELLS);
        hash(i2, HashAlgorithm.crc32, 32w0,
             { SKETCH_SALT_ROW2, kvp.tenant, kvp.prefix_hash,
               kvp.chunk_idx },
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
        if (e0 != current_epoch) { c0 = 0; }
        if (e1 != current_epoch) { c1 = 0; }
        if (e2 != current_epoch) { c2 = 0; }
        c0 = c0 |+| misses;
        c1 = c1 |+| misses;
        c2 = c2 |+| misses;
        sketch_count_r0.write(i0, c0);
        sketch_count_r1.write(i1, c1);
        sketch_count_r2.write(i2, c2);
        sketch_epoch_r0.write(i0, current_epoch);
        sketch_epoch_r1.write(i1, current_epoch);
        sketch_epoch_r2.write(i2, current_epoch);

        estimate = c0;
        if (c1 < estimate) { estimate = c1; }
        if (c2 < estimate) { estimate = c2; }
    }

    /* ---- report once per current_epoch ------------------------------------------ */

    /* already_reported = both Bloom cells hold this current_epoch; then set.   */
    @name(".MyIngress.bloom_test_and_set")
    action bloom_test_and_set() {
        bit<32> j0;
        bit<32> j1;
        hash(j0, HashAlgorithm.crc32, 32w0,
             { BLOOM_SALT_0, kvp.tenant, kvp.prefix_hash,
               kvp.chunk_idx },
             BLOOM_CELLS);
        hash(j1, HashAlgorithm.crc16, 32w0,
             { BLOOM_SALT_1, kvp.tenant, kvp.prefix_hash,
               kvp.chunk_idx },
             BLOOM_CELLS);
        bit<32> b0;
        bit<32> b1;
        bloom_epoch_0.read(b0, j0);
        bloom_epoch_1.read(b1, j1);
        already_reported = b0 == current_epoch && b1 == current_epoch;
        bloom_epoch_0.write(j0, current_epoch);
        bloom_epoch_1.write(j1, current_epoch);
    }

    @name(".MyIngress.report_hot_key")
    action report_hot_key() {
        digest<hot_key_digest_t>(HOT_DIGEST_RECEIVER, {
            kvp.tenant,
            kvp.prefix_hash,
            kvp.chunk_idx,
            estimate
        });
        kvp_events.count((bit<32>)(bit<8>)kvp_event_t.HOT_DIGEST);
    }

    apply {
        sketch_config.apply();
        if (current_epoch != 0) {
            if (at_reply) {
                sketch_update(0);
            } else {
                sketch_update(1);
            }
            if (at_reply && estimate >= threshold) {
                bloom_test_and_set();
                if (!already_reported) {
                    report_hot_key();
                }
            }
        }
    }
}
