/* -*- P4_16 -*- */
/*
 * kvswitch: the switch pool's store (docs/dataplane.md, "Store").
 *
 * One value chunk per slot (slot_value, one register of value_t), with
 * its key, the admission generation it was filled under, version,
 * checksum, length, chunk count, a valid bit and the slot's min-version
 * (the newest version a trusted PUT_ACK acknowledged for the slot's key).
 *
 * A slot is "ours" for an index entry when it holds the entry's key AND
 * the entry's generation; any other slot counts as empty for that entry:
 * a fill, PUT or ack re-binds it to the entry (key, generation) first.
 *
 * Every operation on a slot is ONE action: BMv2 locks all register arrays
 * an action uses for the whole action, so a reader never sees a half-
 * written slot (no torn values), and check-then-write is atomic.
 *
 *   serve_slot       GET hit: checks, then copies the value into the reply
 *   fill_slot        GET_REPLY from a trusted port fills an empty slot
 *   invalidate_slot  PUT: slot invalid (min-version unchanged)
 *   bound_slot       trusted PUT_ACK OK / INVALIDATE: min-version raised
 *   write_slot       SLOT_WRITE from the controller
 *   read_slot        SLOT_READ from the controller
 *   peek_slot        LOOKUP_META: is the value servable, which version
 *
 * The caller says which (`op`): POOL, the request's own (serve a GET,
 * fill from a reply, invalidate on a PUT, bound on a PUT_ACK), or BOUND
 * (a fabric INVALIDATE), SLOT_WRITE, SLOT_READ, PEEK.
 * Reads: the headers, request_t, index_t.  Writes: the slot registers,
 * the reply (a GET served, a SLOT_READ), store_t, the caller's counters.
 */

control Store(inout headers_t hdr, inout standard_metadata_t std_meta,
              in store_op_t op, in request_t req, in index_t index,
              inout store_t result, counter drops, counter events) {
    /* what an action read or computed, for the next one */
    bool csum_ok = false;       /* crc32 of the value == kvp.value_csum  */
    bit<32> value_crc = 0;      /* crc32 of the value chunk              */
    bit<32> read_version = 0;   /* version read from the slot            */
    bit<32> read_value_csum = 0; /* value checksum read from the slot    */
    bit<16> read_value_len = 0; /* value length read from the slot       */
    chunk_index_t read_chunk_count = 0; /* chunk count read from the slot */

    action count_drop(in drop_reason_t reason) {
        drops.count((bit<32>)(bit<8>)reason);
    }

    /* ---- slot state (index = slot, bit<32>) ---------------------------- */

    /* The slot's value chunk (KVP_VALUE_BYTES bytes).                      */
    @name(".MyIngress.slot_value")
    register<value_t>(SLOT_COUNT) slot_value;
    /* 1 = the value may be served.                                        */
    @name(".MyIngress.slot_valid")
    register<bit<1>>(SLOT_COUNT) slot_valid;
    /* Version of the stored value.                                         */
    @name(".MyIngress.slot_version")
    register<bit<32>>(SLOT_COUNT) slot_version;
    /* Lowest servable version for the slot's key and generation: the       */
    /* newest version acknowledged by a trusted PUT_ACK (or INVALIDATE), or */
    /* the value's own version after a fill / SLOT_WRITE.                   */
    @name(".MyIngress.slot_min_version")
    register<bit<32>>(SLOT_COUNT) slot_min_version;
    /* The key the slot holds (checked on every hit and fill).              */
    @name(".MyIngress.slot_tenant")
    register<bit<16>>(SLOT_COUNT) slot_tenant;
    @name(".MyIngress.slot_prefix_hash")
    register<bit<64>>(SLOT_COUNT) slot_prefix_hash;
    @name(".MyIngress.slot_chunk_idx")
    register<chunk_index_t>(SLOT_COUNT) slot_chunk_idx;
    /* The admission (kv_index generation) the slot is bound to; served     */
    /* only while it equals the index entry's generation.                   */
    @name(".MyIngress.slot_generation")
    register<bit<32>>(SLOT_COUNT) slot_generation;
    /* CRC-32 (zlib) of the stored value bytes.                             */
    @name(".MyIngress.slot_value_csum")
    register<bit<32>>(SLOT_COUNT) slot_value_csum;
    /* Meaningful bytes of the stored value, <= KVP_VALUE_LEN.              */
    @name(".MyIngress.slot_value_len")
    register<bit<16>>(SLOT_COUNT) slot_value_len;
    /* Chunks of the block the stored chunk belongs to (returned on a hit,  */
    /* so a reader that asked with chunk_count 1 learns the block's size).  */
    @name(".MyIngress.slot_chunk_count")
    register<chunk_index_t>(SLOT_COUNT) slot_chunk_count;

    /* GETs answered from each slot (packets, bytes of the requests).       */
    @name(".MyIngress.slot_hits")
    counter(SLOT_COUNT, CounterType.packets_and_bytes) slot_hits;

    /* ---- shared pieces -------------------------------------------------- */

    /* Bind slot index.slot to the packet's key under the entry's admission.  */
    /* Only called from inside a slot action (so it is part of that action). */
    @name(".MyIngress.bind_slot")
    action bind_slot() {
        slot_tenant.write(index.slot, hdr.kvp.tenant);
        slot_prefix_hash.write(index.slot, hdr.kvp.prefix_hash);
        slot_chunk_idx.write(index.slot, hdr.kvp.chunk_idx);
        slot_generation.write(index.slot, index.generation);
    }

    /* Store the packet's value and its header fields as the slot's valid    */
    /* contents (bound to the entry's admission).  Only inside a slot action. */
    @name(".MyIngress.store_value")
    action store_value() {
        bind_slot();
        slot_value.write(index.slot, hdr.kvp_value.value);
        slot_version.write(index.slot, hdr.kvp.version);
        slot_min_version.write(index.slot, hdr.kvp.version);
        slot_value_csum.write(index.slot, hdr.kvp.value_csum);
        slot_value_len.write(index.slot, hdr.kvp.value_len);
        slot_chunk_count.write(index.slot, hdr.kvp.chunk_count);
        slot_valid.write(index.slot, 1);
    }

    /* ---- value checksum ------------------------------------------------- */

    /* csum_ok = CRC-32 of the value bytes equals kvp.value_csum.       */
    /* max 2^32: the hash is taken modulo max, so this keeps all 32 bits.   */
    @name(".MyIngress.check_value")
    action check_value() {
        hash(value_crc, HashAlgorithm.crc32, 32w0,
             { hdr.kvp_value.value }, 64w0x100000000);
        csum_ok = value_crc == hdr.kvp.value_csum;
    }

    /* ---- GET ------------------------------------------------------------ */

    /* Serve iff the slot is valid, holds this key under the entry's         */
    /* admission, and its version is not older than the slot's min-version,  */
    /* the index entry's min-version and the version the GET asks for (0 =   */
    /* any).  Copies the value into the (new) value header only then; the    */
    /* reply itself is build_get_reply.                                      */
    @name(".MyIngress.serve_slot")
    action serve_slot() {
        bit<1> valid;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        bit<32> min_version;
        slot_valid.read(valid, index.slot);
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        slot_version.read(read_version, index.slot);
        slot_min_version.read(min_version, index.slot);
        slot_value_csum.read(read_value_csum, index.slot);
        slot_value_len.read(read_value_len, index.slot);
        slot_chunk_count.read(read_chunk_count, index.slot);
        /* ours: the slot holds this key under the entry's admission */
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        result.served = valid == 1 && ours
            && read_version >= min_version
            && read_version >= index.min_version
            && read_version >= hdr.kvp.version;
        if (result.served) {
            hdr.kvp_value.setValid();
            slot_value.read(hdr.kvp_value.value, index.slot);
        }
    }

    /* Turn the GET into its GET_REPLY, back out of the ingress port.        */
    @name(".MyIngress.build_get_reply")
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
        hdr.kvp.version = read_version;
        hdr.kvp.value_csum = read_value_csum;
        hdr.kvp.value_len = read_value_len;
        hdr.kvp.chunk_count = read_chunk_count;
        hdr.kvp.chunk_shift = KVP_SLOT_SHIFT;
        hdr.kvp.aux = 0;
        std_meta.egress_spec = std_meta.ingress_port;
        slot_hits.count(index.slot);
    }

    /* ---- GET_REPLY from a trusted port: fill on reply -------------------- */

    /* Fill iff the slot does not already hold a valid value for this key    */
    /* and admission that is at least the index entry's min-version (the     */
    /* controller raises it when it learns of a newer version, so an outdated */
    /* copy is replaced), the value's checksum verifies (check_value first)  */
    /* and its version is not older than the index entry's min-version nor,  */
    /* when the slot is already ours, the slot's min-version (last ack).     */
    @name(".MyIngress.fill_slot")
    action fill_slot() {
        bit<1> valid;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        bit<32> min_version;
        bit<32> stored_version;
        slot_valid.read(valid, index.slot);
        slot_version.read(stored_version, index.slot);
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        slot_min_version.read(min_version, index.slot);
        /* ours: the slot holds this key under the entry's admission */
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        result.filled = false;
        if (valid == 1 && ours && stored_version >= index.min_version) {
            /* already filled, and not outdated by the index entry's bound */
        } else if (!csum_ok) {
            count_drop(drop_reason_t.BAD_CHECKSUM);
        } else if (hdr.kvp.version < index.min_version
                   || (ours && hdr.kvp.version < min_version)) {
            count_drop(drop_reason_t.STALE_FILL);
        } else {
            store_value();
            result.filled = true;
        }
    }

    /* ---- PUT: invalidate ------------------------------------------------- */

    /* The slot becomes invalid.  A PUT does not raise the min-version: it   */
    /* may still be refused (or forged); only its acknowledgement bounds the */
    /* key (bound_slot).  A slot that was not ours is re-bound to the entry  */
    /* with no bound of its own (the entry's min_version still applies).     */
    @name(".MyIngress.invalidate_slot")
    action invalidate_slot() {
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        /* ours: the slot holds this key under the entry's admission */
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        if (!ours) {
            bind_slot();
            slot_min_version.write(index.slot, 0);
        }
        slot_valid.write(index.slot, 0);
    }

    /* ---- PUT_ACK OK (trusted) / INVALIDATE: bound --------------------------- */

    /* A storage node committed kvp.version: the slot's min-version rises to  */
    /* it (never falls), and a valid copy older than it is invalidated.  A    */
    /* slot that was not ours is re-bound to the entry, invalid, bounded by   */
    /* the acknowledged version.                                              */
    @name(".MyIngress.bound_slot")
    action bound_slot() {
        bit<1> valid;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        bit<32> min_version;
        bit<32> stored_version;
        slot_valid.read(valid, index.slot);
        slot_version.read(stored_version, index.slot);
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        slot_min_version.read(min_version, index.slot);
        /* ours: the slot holds this key under the entry's admission */
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        if (!ours) {
            bind_slot();
            valid = 0;
            min_version = 0;
        }
        if (hdr.kvp.version > min_version) {
            min_version = hdr.kvp.version;
        }
        if (stored_version < min_version) {
            valid = 0;
        }
        slot_min_version.write(index.slot, min_version);
        slot_valid.write(index.slot, valid);
    }

    /* ---- SLOT_WRITE / SLOT_READ from the controller ---------------------- */

    /* Write the value into slot kvp.aux for the header's key, under the     */
    /* admission of the key's kv_index entry, with the header's chunk_count, */
    /* version and value_len, and mark it valid; unless the key is not       */
    /* indexed at that slot (ERR_DENIED), the checksum fails (ERR_CHECKSUM)  */
    /* or the version is older than the entry's min-version or, when the     */
    /* slot is already ours, the slot's min-version (ERR_STALE).             */
    @name(".MyIngress.write_slot")
    action write_slot() {
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        bit<32> min_version;
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        slot_min_version.read(min_version, index.slot);
        /* ours: the slot holds this key under the entry's admission */
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        if (!index.hit || index.slot != hdr.kvp.aux) {
            result.slot_status = kvp_status_t.ERR_DENIED;
            count_drop(drop_reason_t.SLOT_NOT_INDEXED);
        } else if (!csum_ok) {
            result.slot_status = kvp_status_t.ERR_CHECKSUM;
            count_drop(drop_reason_t.BAD_CHECKSUM);
        } else if (hdr.kvp.version < index.min_version
                   || (ours && hdr.kvp.version < min_version)) {
            result.slot_status = kvp_status_t.ERR_STALE;
            count_drop(drop_reason_t.STALE_FILL);
        } else {
            store_value();
            result.slot_status = kvp_status_t.OK;
        }
    }

    /* Copy slot kvp.aux (key, version, checksum, length, value) into the    */
    /* header; status OK when the slot is valid, MISS when not.              */
    @name(".MyIngress.read_slot")
    action read_slot() {
        bit<1> valid;
        slot_valid.read(valid, index.slot);
        slot_tenant.read(hdr.kvp.tenant, index.slot);
        slot_prefix_hash.read(hdr.kvp.prefix_hash, index.slot);
        slot_chunk_idx.read(hdr.kvp.chunk_idx, index.slot);
        slot_version.read(hdr.kvp.version, index.slot);
        slot_value_csum.read(hdr.kvp.value_csum, index.slot);
        slot_value_len.read(hdr.kvp.value_len, index.slot);
        slot_chunk_count.read(hdr.kvp.chunk_count, index.slot);
        hdr.kvp.chunk_shift = KVP_SLOT_SHIFT;
        hdr.kvp_value.setValid();
        slot_value.read(hdr.kvp_value.value, index.slot);
        if (valid == 1) {
            result.slot_status = kvp_status_t.OK;
        } else {
            result.slot_status = kvp_status_t.MISS;
        }
    }

    /* ---- LOOKUP_META: what the slot says about the key ------------------- */

    /* result.servable = the slot holds a servable value of this admission   */
    /* (serve_slot's checks, without a GET's own version), its version in    */
    /* result.version.  One action: the slot is read as one.                 */
    @name(".MyIngress.peek_slot")
    action peek_slot() {
        bit<1> valid;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> generation;
        bit<32> min_version;
        slot_valid.read(valid, index.slot);
        slot_tenant.read(tenant, index.slot);
        slot_prefix_hash.read(prefix_hash, index.slot);
        slot_chunk_idx.read(chunk_idx, index.slot);
        slot_generation.read(generation, index.slot);
        slot_version.read(result.version, index.slot);
        slot_min_version.read(min_version, index.slot);
        bool ours = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && generation == index.generation;
        result.servable = valid == 1 && ours && result.version >= min_version
                          && result.version >= index.min_version;
    }

    apply {
        if (op == store_op_t.SLOT_WRITE) {
            /* the generation comes from the key's index entry */
            check_value();
            write_slot();
            events.count((bit<32>)(bit<8>)kvp_event_t.SLOT_WRITE);
        } else if (op == store_op_t.SLOT_READ) {
            read_slot();
            events.count((bit<32>)(bit<8>)kvp_event_t.SLOT_READ);
        } else if (op == store_op_t.BOUND) {
            bound_slot();
        } else if (op == store_op_t.PEEK) {
            peek_slot();
        } else {
            /* a span (aux > 1) asks for several chunks: only its       */
            /* storage node answers it (the pool holds 128-byte chunks,  */
            /* a reader asks spans only of larger ones)                  */
            if (req.get && index.hit && hdr.kvp.aux <= 1) {
                serve_slot();
            }
            if (result.served) {
                build_get_reply();
                events.count((bit<32>)(bit<8>)kvp_event_t.GET_HIT);
            } else if (req.get) {
                events.count((bit<32>)(bit<8>)kvp_event_t.GET_MISS);
            }
            if (req.fill && index.hit) {
                check_value();
                fill_slot();
                if (result.filled) {
                    events.count((bit<32>)(bit<8>)kvp_event_t.FILL);
                }
            }
            if (req.put && index.hit) {
                invalidate_slot();
                events.count((bit<32>)(bit<8>)kvp_event_t.PUT_INVALIDATE);
            }
            if (req.ack && index.hit) {
                bound_slot();
                events.count((bit<32>)(bit<8>)kvp_event_t.PUT_ACK_BOUND);
            }
        }
    }
}
