/* -*- P4_16 -*- */
/*
 * kvswitch: one pool address in front of several storage nodes, and
 * block metadata answered in the data plane (docs/dataplane.md,
 * "Steering").  Which node serves a request is the SteerChoice step
 * (steer_choice.p4); what follows from that choice (forward towards
 * the node, rename, answer) is here, included inside control MyIngress.
 *
 * Clients address ONE pool address (steer_config).  A request to it
 * (GET, PUT, STAT; LOOKUP_META for the node id) is placed by the block's
 * bucket, crc32(STEER_SALT, tenant, prefix_hash) mod STEER_BUCKETS, and
 * steer_bucket (filled by the controller) names the storage node that
 * holds the bucket: the request leaves towards it (MACs, port and TTL as
 * ipv4_forward; its destination address is rewritten after coalescing,
 * so the coalescing key names the pool, never the node).  A bucket whose
 * node is down (and has no replica) is answered by the switch: MISS, or
 * ERR_FULL for a PUT -- never a value from another node.
 *
 * A reply from a storage node (pool_member) arriving on a STORAGE port
 * leaves in the pool's name (source address := the pool address), so
 * clients see one server.  A reply from a HOST port is never renamed: a
 * host cannot speak for the pool.  A request already steered by an
 * upstream switch (its destination is a member's own address) is seen as
 * the pool's while coalescing, then leaves unchanged.
 *
 * LOOKUP_META of an indexed key is answered here at line rate: tier
 * bitmap (SWITCH when the slot holds a servable value of this admission),
 * version, and the node id in aux bits 31..24.  Unknown keys are punted
 * to the controller as before.
 */

/* What steering did, by steer_event_t.                                 */
counter(STEER_EVENT_COUNT, CounterType.packets_and_bytes) steer_events;

action count_steer(in steer_event_t event) {
    steer_events.count((bit<32>)(bit<8>)event);
}

/* ---- forwarding --------------------------------------------------------- */

/* A steered request: towards its node, as ipv4_forward would route the  */
/* node's address.  The destination address stays the pool's until       */
/* steer_finish (after coalescing).                                     */
action steer_forward() {
    std_meta.egress_spec = meta.steer.node_port;
    hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
    hdr.ethernet.dst_addr = meta.steer.node_mac;
    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    count_steer(steer_event_t.STEERED);
}

/* Before coalescing: a member's reply takes the pool's name (for good); */
/* a request already steered upstream is the pool's while coalescing.   */
action steer_name() {
    if (meta.steer.member_reply) {
        hdr.ipv4.src_addr = meta.steer.pool_addr;
        hdr.udp.checksum = 0;
        count_steer(steer_event_t.REPLY_REWRITTEN);
    }
    if (meta.steer.member_request) {
        hdr.ipv4.dst_addr = meta.steer.pool_addr;
        count_steer(steer_event_t.MEMBER_REQUEST);
    }
}

/* After coalescing: the request's destination becomes its node's       */
/* address (or, already steered upstream, stays it); UDP checksum 0,     */
/* since the pseudo-header changed.                                      */
action steer_finish() {
    if (meta.steer.steered) {
        hdr.ipv4.dst_addr = meta.steer.node_addr;
        hdr.udp.checksum = 0;
    } else if (meta.steer.member_request) {
        hdr.ipv4.dst_addr = meta.steer.peer;
    }
}

/* ---- answers built by the switch ---------------------------------------- */

/* Turn the request into its reply (opcode + 1: GET_REPLY, PUT_ACK,       */
/* STAT_REPLY, LOOKUP_META_REPLY), without value, back out of the ingress */
/* port, in the name the request was sent to.                           */
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
action answer_lookup_meta() {
    bit<8> node = 0;
    if (meta.steer.steered) {
        node = meta.steer.node;
    }
    reply_in_place(kvp_status_t.OK);
    if (meta.store.servable) {
        hdr.kvp.aux = ((bit<32>)node << META_NODE_SHIFT) | TIER_BIT_SWITCH;
        hdr.kvp.version = meta.store.version;
    } else {
        hdr.kvp.aux = (bit<32>)node << META_NODE_SHIFT;
        hdr.kvp.version = meta.index.min_version;
    }
    count_steer(steer_event_t.META_ANSWERED);
}
