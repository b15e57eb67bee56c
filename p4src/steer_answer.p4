/* -*- P4_16 -*- */
/*
 * kvswitch: the answers the switch gives in the pool's name
 * (docs/dataplane.md, "Steering").
 *
 * LOOKUP_META of an indexed key is answered here at line rate: tier
 * bitmap (SWITCH when the slot holds a servable value of this admission),
 * version, and the node id in aux bits 31..24 (unknown keys are punted
 * to the controller).  A request to the pool whose bucket has no live
 * node (and no replica) is answered too: MISS, or ERR_FULL for a PUT --
 * never a value from another node.
 *
 * Which answer: LOOKUP_META gets its metadata, any other request the
 * node-down answer (FromPort applies this step only for those two).
 * Reads: the request, steer_t, index_t, store_t (the store's PEEK of the
 * slot).  Writes: the headers (the reply, back out of the ingress port);
 * counts in `steer_events`.
 */

control SteerAnswer(inout headers_t hdr, inout standard_metadata_t std_meta,
                    in steer_t steer, in index_t index, in store_t store,
                    counter steer_events) {

    action count_steer(in steer_event_t event) {
        steer_events.count((bit<32>)(bit<8>)event);
    }

    /* Turn the request into its reply (opcode + 1: GET_REPLY, PUT_ACK,       */
    /* STAT_REPLY, LOOKUP_META_REPLY), without value, back out of the ingress */
    /* port, in the name the request was sent to.                           */
    @name(".MyIngress.reply_in_place")
    action reply_in_place(in kvp_status_t status) {
        mac_addr_t mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        ipv4_addr_t addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = addr;
        hdr.ipv4.ttl = REPLY_TTL;
        hdr.ipv4.total_len = IPV4_HEADER_LEN + UDP_HEADER_LEN + KVP_HEADER_LEN;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        hdr.udp.len = UDP_HEADER_LEN + KVP_HEADER_LEN;
        hdr.udp.checksum = 0;
        hdr.kvp.opcode = (kvp_opcode_t)((bit<8>)hdr.kvp.opcode + 1);
        hdr.kvp.status = status;
        hdr.kvp.flags = hdr.kvp.flags & ~(F_VALUE | F_BYPASS);
        hdr.kvp.value_len = 0;
        hdr.kvp.value_csum = 0;
        hdr.kvp.aux = 0;
        hdr.kvp_value.setInvalid();
        std_meta.egress_spec = std_meta.ingress_port;
    }

    /* The bucket's node is down and nothing else holds its blocks: MISS     */
    /* (a PUT: ERR_FULL, not stored).  A reader gets MISS, never a value     */
    /* another node holds for the key.                                       */
    @name(".MyIngress.answer_unavailable")
    action answer_unavailable() {
        if (hdr.kvp.opcode == kvp_opcode_t.PUT) {
            reply_in_place(kvp_status_t.ERR_FULL);
        } else {
            reply_in_place(kvp_status_t.MISS);
        }
        count_steer(steer_event_t.UNAVAILABLE);
    }

    /* LOOKUP_META of an indexed key: tier bitmap (SWITCH when the slot holds */
    /* a servable value of this admission), the version (the slot's when    */
    /* servable, else the newest the controller gave the entry), and the     */
    /* node id of the block's bucket in aux bits 31..24 (0: not steered).    */
    /* The store read the slot just before (store.p4: peek_slot).            */
    @name(".MyIngress.answer_lookup_meta")
    action answer_lookup_meta() {
        bit<8> node = 0;
        if (steer.steered) {
            node = steer.node;
        }
        reply_in_place(kvp_status_t.OK);
        if (store.servable) {
            hdr.kvp.aux = ((bit<32>)node << META_NODE_SHIFT) | TIER_BIT_SWITCH;
            hdr.kvp.version = store.version;
        } else {
            hdr.kvp.aux = (bit<32>)node << META_NODE_SHIFT;
            hdr.kvp.version = index.min_version;
        }
        count_steer(steer_event_t.META_ANSWERED);
    }

    apply {
        if (hdr.kvp.opcode == kvp_opcode_t.LOOKUP_META) {
            answer_lookup_meta();
        } else {
            answer_unavailable();
        }
    }
}
