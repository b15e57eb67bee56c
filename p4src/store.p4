/* -*- P4_16 -*- */
/*
 * kvswitch: the switch pool's store (included inside control MyIngress).
 *
 * One value chunk per slot, held in 16 register arrays of bit<64> (one
 * per word), with its key, version, checksum, length, a valid bit and the
 * slot's min-version (newest PUT version seen for the slot's key).
 *
 * Every operation on a slot is ONE action: BMv2 locks all register arrays
 * an action uses for the whole action, so a reader never sees a half-
 * written slot (no torn values), and check-then-write is atomic.
 *
 *   serve_slot       GET hit: checks, then copies the value into the reply
 *   fill_slot        GET_REPLY from a storage node fills an invalid slot
 *   invalidate_slot  PUT: slot invalid, min-version raised
 *   write_slot       SLOT_WRITE from the controller
 *   read_slot        SLOT_READ from the controller
 */

/* ---- slot state (index = slot, bit<32>) ---------------------------- */

/* Word i of the slot's value chunk: value bytes 8i .. 8i+7.            */
register<bit<64>>(SLOT_COUNT) slot_value_w0;
register<bit<64>>(SLOT_COUNT) slot_value_w1;
register<bit<64>>(SLOT_COUNT) slot_value_w2;
register<bit<64>>(SLOT_COUNT) slot_value_w3;
register<bit<64>>(SLOT_COUNT) slot_value_w4;
register<bit<64>>(SLOT_COUNT) slot_value_w5;
register<bit<64>>(SLOT_COUNT) slot_value_w6;
register<bit<64>>(SLOT_COUNT) slot_value_w7;
register<bit<64>>(SLOT_COUNT) slot_value_w8;
register<bit<64>>(SLOT_COUNT) slot_value_w9;
register<bit<64>>(SLOT_COUNT) slot_value_w10;
register<bit<64>>(SLOT_COUNT) slot_value_w11;
register<bit<64>>(SLOT_COUNT) slot_value_w12;
register<bit<64>>(SLOT_COUNT) slot_value_w13;
register<bit<64>>(SLOT_COUNT) slot_value_w14;
register<bit<64>>(SLOT_COUNT) slot_value_w15;

/* 1 = the value may be served.                                        */
register<bit<1>>(SLOT_COUNT) slot_valid;
/* Version of the stored value.                                         */
register<bit<32>>(SLOT_COUNT) slot_version;
/* Lowest servable version for the slot's key: newest PUT version seen, */
/* or the value's own version after a fill / SLOT_WRITE.                */
register<bit<32>>(SLOT_COUNT) slot_min_version;
/* The key the slot holds (checked on every hit and fill).              */
register<bit<16>>(SLOT_COUNT) slot_tenant;
register<bit<64>>(SLOT_COUNT) slot_prefix_hash;
register<bit<8>>(SLOT_COUNT) slot_chunk_idx;
/* CRC-32 (zlib) of the stored 128 value bytes.                         */
register<bit<32>>(SLOT_COUNT) slot_value_csum;
/* Meaningful bytes of the stored value, <= 128.                        */
register<bit<16>>(SLOT_COUNT) slot_value_len;
/* Chunks of the block the stored chunk belongs to (returned on a hit,  */
/* so a reader that asked with chunk_count 1 learns the block's size).  */
register<bit<8>>(SLOT_COUNT) slot_chunk_count;

/* GETs answered from each slot (packets, bytes of the requests).       */
counter(SLOT_COUNT, CounterType.packets_and_bytes) slot_hits;

/* ---- value checksum ------------------------------------------------- */

/* meta.csum_ok = CRC-32 of the 128 value bytes equals kvp.value_csum.   */
/* max 2^32: the hash is taken modulo max, so this keeps all 32 bits.   */
action check_value() {
    hash(meta.value_crc, HashAlgorithm.crc32, 32w0,
         {
             hdr.kvp_value.w0,
             hdr.kvp_value.w1,
             hdr.kvp_value.w2,
             hdr.kvp_value.w3,
             hdr.kvp_value.w4,
             hdr.kvp_value.w5,
             hdr.kvp_value.w6,
             hdr.kvp_value.w7,
             hdr.kvp_value.w8,
             hdr.kvp_value.w9,
             hdr.kvp_value.w10,
             hdr.kvp_value.w11,
             hdr.kvp_value.w12,
             hdr.kvp_value.w13,
             hdr.kvp_value.w14,
             hdr.kvp_value.w15
         },
         64w0x100000000);
    meta.csum_ok = meta.value_crc == hdr.kvp.value_csum;
}

/* ---- GET ------------------------------------------------------------ */

/* Serve iff the slot is valid, holds this key, and its version is not  */
/* older than the slot's min-version, the index entry's min-version and */
/* the version the GET asks for (0 = any).  Copies the value into the   */
/* (new) value header only then; the reply itself is build_get_reply.   */
action serve_slot() {
    bit<1> valid;
    bit<16> tenant;
    bit<64> prefix_hash;
    bit<8> chunk_idx;
    bit<32> min_version;
    slot_valid.read(valid, meta.slot);
    slot_tenant.read(tenant, meta.slot);
    slot_prefix_hash.read(prefix_hash, meta.slot);
    slot_chunk_idx.read(chunk_idx, meta.slot);
    slot_version.read(meta.slot_version, meta.slot);
    slot_min_version.read(min_version, meta.slot);
    slot_value_csum.read(meta.slot_value_csum, meta.slot);
    slot_value_len.read(meta.slot_value_len, meta.slot);
    slot_chunk_count.read(meta.slot_chunk_count, meta.slot);
    meta.served = valid == 1
        && tenant == hdr.kvp.tenant
        && prefix_hash == hdr.kvp.prefix_hash
        && chunk_idx == hdr.kvp.chunk_idx
        && meta.slot_version >= min_version
        && meta.slot_version >= meta.index_min_version
        && meta.slot_version >= hdr.kvp.version;
    if (meta.served) {
        hdr.kvp_value.setValid();
        slot_value_w0.read(hdr.kvp_value.w0, meta.slot);
        slot_value_w1.read(hdr.kvp_value.w1, meta.slot);
        slot_value_w2.read(hdr.kvp_value.w2, meta.slot);
        slot_value_w3.read(hdr.kvp_value.w3, meta.slot);
        slot_value_w4.read(hdr.kvp_value.w4, meta.slot);
        slot_value_w5.read(hdr.kvp_value.w5, meta.slot);
        slot_value_w6.read(hdr.kvp_value.w6, meta.slot);
        slot_value_w7.read(hdr.kvp_value.w7, meta.slot);
        slot_value_w8.read(hdr.kvp_value.w8, meta.slot);
        slot_value_w9.read(hdr.kvp_value.w9, meta.slot);
        slot_value_w10.read(hdr.kvp_value.w10, meta.slot);
        slot_value_w11.read(hdr.kvp_value.w11, meta.slot);
        slot_value_w12.read(hdr.kvp_value.w12, meta.slot);
        slot_value_w13.read(hdr.kvp_value.w13, meta.slot);
        slot_value_w14.read(hdr.kvp_value.w14, meta.slot);
        slot_value_w15.read(hdr.kvp_value.w15, meta.slot);
    }
}

/* Turn the GET into its GET_REPLY, back out of the ingress port.        */
action build_get_reply() {
    mac_addr_t mac = hdr.ethernet.dst_addr;
    hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
    hdr.ethernet.src_addr = mac;
    ipv4_addr_t addr = hdr.ipv4.dst_addr;
    hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
    hdr.ipv4.src_addr = addr;
    hdr.ipv4.ttl = REPLY_TTL;
    hdr.ipv4.total_len = IPV4_HEADER_LEN + UDP_HEADER_LEN
                         + KVP_HEADER_LEN + KVP_VALUE_LEN;
    bit<16> port = hdr.udp.dst_port;
    hdr.udp.dst_port = hdr.udp.src_port;
    hdr.udp.src_port = port;
    hdr.udp.len = UDP_HEADER_LEN + KVP_HEADER_LEN + KVP_VALUE_LEN;
    hdr.udp.checksum = 0;
    hdr.kvp.opcode = kvp_opcode_t.GET_REPLY;
    hdr.kvp.status = kvp_status_t.HIT_SWITCH;
    hdr.kvp.flags = (hdr.kvp.flags & ~F_BYPASS) | F_VALUE;
    hdr.kvp.version = meta.slot_version;
    hdr.kvp.value_csum = meta.slot_value_csum;
    hdr.kvp.value_len = meta.slot_value_len;
    hdr.kvp.chunk_count = meta.slot_chunk_count;
    hdr.kvp.aux = 0;
    std_meta.egress_spec = std_meta.ingress_port;
    slot_hits.count(meta.slot);
}

/* ---- GET_REPLY from a storage node: fill on reply -------------------- */

/* Fill iff the slot does not already hold a valid value for this key    */
/* that is at least the index entry's min-version (the controller raises */
/* it when it learns of a newer version, so an outdated copy is replaced), */
/* the value's checksum verifies (check_value first) and its version is  */
/* not older than the index entry's min-version nor, when the slot       */
/* already belongs to this key, the slot's min-version (last PUT seen).  */
action fill_slot() {
    bit<1> valid;
    bit<16> tenant;
    bit<64> prefix_hash;
    bit<8> chunk_idx;
    bit<32> min_version;
    bit<32> stored_version;
    slot_valid.read(valid, meta.slot);
    slot_version.read(stored_version, meta.slot);
    slot_tenant.read(tenant, meta.slot);
    slot_prefix_hash.read(prefix_hash, meta.slot);
    slot_chunk_idx.read(chunk_idx, meta.slot);
    slot_min_version.read(min_version, meta.slot);
    bool same_key = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx;
    meta.filled = false;
    if (valid == 1 && same_key
        && stored_version >= meta.index_min_version) {
        /* already filled, and not outdated by the index entry's bound */
    } else if (!meta.csum_ok) {
        count_drop(drop_reason_t.BAD_CHECKSUM);
    } else if (hdr.kvp.version < meta.index_min_version
               || (same_key && hdr.kvp.version < min_version)) {
        count_drop(drop_reason_t.STALE_FILL);
    } else {
        slot_value_w0.write(meta.slot, hdr.kvp_value.w0);
        slot_value_w1.write(meta.slot, hdr.kvp_value.w1);
        slot_value_w2.write(meta.slot, hdr.kvp_value.w2);
        slot_value_w3.write(meta.slot, hdr.kvp_value.w3);
        slot_value_w4.write(meta.slot, hdr.kvp_value.w4);
        slot_value_w5.write(meta.slot, hdr.kvp_value.w5);
        slot_value_w6.write(meta.slot, hdr.kvp_value.w6);
        slot_value_w7.write(meta.slot, hdr.kvp_value.w7);
        slot_value_w8.write(meta.slot, hdr.kvp_value.w8);
        slot_value_w9.write(meta.slot, hdr.kvp_value.w9);
        slot_value_w10.write(meta.slot, hdr.kvp_value.w10);
        slot_value_w11.write(meta.slot, hdr.kvp_value.w11);
        slot_value_w12.write(meta.slot, hdr.kvp_value.w12);
        slot_value_w13.write(meta.slot, hdr.kvp_value.w13);
        slot_value_w14.write(meta.slot, hdr.kvp_value.w14);
        slot_value_w15.write(meta.slot, hdr.kvp_value.w15);
        slot_tenant.write(meta.slot, hdr.kvp.tenant);
        slot_prefix_hash.write(meta.slot, hdr.kvp.prefix_hash);
        slot_chunk_idx.write(meta.slot, hdr.kvp.chunk_idx);
        slot_version.write(meta.slot, hdr.kvp.version);
        slot_min_version.write(meta.slot, hdr.kvp.version);
        slot_value_csum.write(meta.slot, hdr.kvp.value_csum);
        slot_value_len.write(meta.slot, hdr.kvp.value_len);
        slot_chunk_count.write(meta.slot, hdr.kvp.chunk_count);
        slot_valid.write(meta.slot, 1);
        meta.filled = true;
    }
}

/* ---- PUT: invalidate ------------------------------------------------- */

/* The slot becomes invalid and bound to the PUT's key; its min-version  */
/* becomes the PUT's version (or stays, if this key's was newer), so no  */
/* older value is ever served or filled again.                           */
action invalidate_slot() {
    bit<16> tenant;
    bit<64> prefix_hash;
    bit<8> chunk_idx;
    bit<32> min_version;
    slot_tenant.read(tenant, meta.slot);
    slot_prefix_hash.read(prefix_hash, meta.slot);
    slot_chunk_idx.read(chunk_idx, meta.slot);
    slot_min_version.read(min_version, meta.slot);
    bool same_key = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx;
    if (!same_key || hdr.kvp.version > min_version) {
        min_version = hdr.kvp.version;
    }
    slot_valid.write(meta.slot, 0);
    slot_tenant.write(meta.slot, hdr.kvp.tenant);
    slot_prefix_hash.write(meta.slot, hdr.kvp.prefix_hash);
    slot_chunk_idx.write(meta.slot, hdr.kvp.chunk_idx);
    slot_min_version.write(meta.slot, min_version);
}

/* ---- SLOT_WRITE / SLOT_READ from the controller ---------------------- */

/* Write the value into slot kvp.aux for the header's key and mark it    */
/* valid, unless the checksum fails (ERR_CHECKSUM) or the slot already   */
/* belongs to this key with a newer min-version (ERR_STALE).             */
action write_slot() {
    bit<16> tenant;
    bit<64> prefix_hash;
    bit<8> chunk_idx;
    bit<32> min_version;
    slot_tenant.read(tenant, meta.slot);
    slot_prefix_hash.read(prefix_hash, meta.slot);
    slot_chunk_idx.read(chunk_idx, meta.slot);
    slot_min_version.read(min_version, meta.slot);
    bool same_key = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx;
    if (!meta.csum_ok) {
        meta.slot_status = kvp_status_t.ERR_CHECKSUM;
        count_drop(drop_reason_t.BAD_CHECKSUM);
    } else if (same_key && hdr.kvp.version < min_version) {
        meta.slot_status = kvp_status_t.ERR_STALE;
        count_drop(drop_reason_t.STALE_FILL);
    } else {
        slot_value_w0.write(meta.slot, hdr.kvp_value.w0);
        slot_value_w1.write(meta.slot, hdr.kvp_value.w1);
        slot_value_w2.write(meta.slot, hdr.kvp_value.w2);
        slot_value_w3.write(meta.slot, hdr.kvp_value.w3);
        slot_value_w4.write(meta.slot, hdr.kvp_value.w4);
        slot_value_w5.write(meta.slot, hdr.kvp_value.w5);
        slot_value_w6.write(meta.slot, hdr.kvp_value.w6);
        slot_value_w7.write(meta.slot, hdr.kvp_value.w7);
        slot_value_w8.write(meta.slot, hdr.kvp_value.w8);
        slot_value_w9.write(meta.slot, hdr.kvp_value.w9);
        slot_value_w10.write(meta.slot, hdr.kvp_value.w10);
        slot_value_w11.write(meta.slot, hdr.kvp_value.w11);
        slot_value_w12.write(meta.slot, hdr.kvp_value.w12);
        slot_value_w13.write(meta.slot, hdr.kvp_value.w13);
        slot_value_w14.write(meta.slot, hdr.kvp_value.w14);
        slot_value_w15.write(meta.slot, hdr.kvp_value.w15);
        slot_tenant.write(meta.slot, hdr.kvp.tenant);
        slot_prefix_hash.write(meta.slot, hdr.kvp.prefix_hash);
        slot_chunk_idx.write(meta.slot, hdr.kvp.chunk_idx);
        slot_version.write(meta.slot, hdr.kvp.version);
        slot_min_version.write(meta.slot, hdr.kvp.version);
        slot_value_csum.write(meta.slot, hdr.kvp.value_csum);
        slot_value_len.write(meta.slot, hdr.kvp.value_len);
        slot_chunk_count.write(meta.slot, hdr.kvp.chunk_count);
        slot_valid.write(meta.slot, 1);
        meta.slot_status = kvp_status_t.OK;
    }
}

/* Copy slot kvp.aux (key, version, checksum, length, value) into the    */
/* header; status OK when the slot is valid, MISS when not.              */
action read_slot() {
    bit<1> valid;
    slot_valid.read(valid, meta.slot);
    slot_tenant.read(hdr.kvp.tenant, meta.slot);
    slot_prefix_hash.read(hdr.kvp.prefix_hash, meta.slot);
    slot_chunk_idx.read(hdr.kvp.chunk_idx, meta.slot);
    slot_version.read(hdr.kvp.version, meta.slot);
    slot_value_csum.read(hdr.kvp.value_csum, meta.slot);
    slot_value_len.read(hdr.kvp.value_len, meta.slot);
    slot_chunk_count.read(hdr.kvp.chunk_count, meta.slot);
    hdr.kvp_value.setValid();
    slot_value_w0.read(hdr.kvp_value.w0, meta.slot);
    slot_value_w1.read(hdr.kvp_value.w1, meta.slot);
    slot_value_w2.read(hdr.kvp_value.w2, meta.slot);
    slot_value_w3.read(hdr.kvp_value.w3, meta.slot);
    slot_value_w4.read(hdr.kvp_value.w4, meta.slot);
    slot_value_w5.read(hdr.kvp_value.w5, meta.slot);
    slot_value_w6.read(hdr.kvp_value.w6, meta.slot);
    slot_value_w7.read(hdr.kvp_value.w7, meta.slot);
    slot_value_w8.read(hdr.kvp_value.w8, meta.slot);
    slot_value_w9.read(hdr.kvp_value.w9, meta.slot);
    slot_value_w10.read(hdr.kvp_value.w10, meta.slot);
    slot_value_w11.read(hdr.kvp_value.w11, meta.slot);
    slot_value_w12.read(hdr.kvp_value.w12, meta.slot);
    slot_value_w13.read(hdr.kvp_value.w13, meta.slot);
    slot_value_w14.read(hdr.kvp_value.w14, meta.slot);
    slot_value_w15.read(hdr.kvp_value.w15, meta.slot);
    if (valid == 1) {
        meta.slot_status = kvp_status_t.OK;
    } else {
        meta.slot_status = kvp_status_t.MISS;
    }
}
