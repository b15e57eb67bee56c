/* -*- P4_16 -*- */
/*
 * kvswitch: one pool address in front of several storage nodes: what
 * follows a steering choice on the way out (docs/dataplane.md,
 * "Steering").  Which node serves a request is the SteerChoice step
 * (steer_choice.p4); the answers the switch gives for the pool (a node
 * down, LOOKUP_META) are SteerAnswer's (steer_answer.p4).
 *
 * Clients address ONE pool address (steer_config).  A request to it
 * (GET, PUT, STAT) is placed by the block's bucket, and steer_bucket
 * (filled by the controller) names the storage node that holds the
 * bucket: the request leaves towards it (TOWARDS_NODE: MACs, port and
 * TTL as ipv4_forward; its destination address is rewritten after
 * coalescing, NODE_ADDRESS, so the coalescing key names the pool, never
 * the node).
 *
 * A reply from a storage node (pool_member) arriving on a STORAGE port
 * leaves in the pool's name (POOL_NAME: source address := the pool
 * address), so clients see one server.  A reply from a HOST port is never
 * renamed: a host cannot speak for the pool.  A request already steered
 * by an upstream switch (its destination is a member's own address) is
 * seen as the pool's while coalescing (POOL_NAME), then leaves unchanged
 * (NODE_ADDRESS puts the member's address back).
 *
 * Route applies it (route.p4): out towards the node and in the pool's
 * name before coalescing, the node's address after.
 *
 * Reads: steer_t, `op`.  Writes: the MACs, TTL, IPv4 addresses, UDP
 * checksum, egress_spec; counts in `steer_events`.
 */

/* Which part of steering the caller asks for (internal: the controller */
/* never sees these values).                                            */
enum bit<8> steer_op_t {
    TOWARDS_NODE = 0,   /* a steered request: out of the port to its node */
    POOL_NAME    = 1,   /* before coalescing: in the pool's name          */
    NODE_ADDRESS = 2    /* after coalescing: to the node's own address    */
}

control Steer(inout headers_t hdr, inout standard_metadata_t std_meta,
              in steer_op_t op, in steer_t steer, counter steer_events) {

    action count_steer(in steer_event_t event) {
        steer_events.count((bit<32>)(bit<8>)event);
    }

    /* A steered request: towards its node, as ipv4_forward would route the  */
    /* node's address.  The destination address stays the pool's until       */
    /* steer_finish (after coalescing).                                     */
    @name(".MyIngress.steer_forward")
    action steer_forward() {
        std_meta.egress_spec = steer.node_port;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = steer.node_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        count_steer(steer_event_t.STEERED);
    }

    /* Before coalescing: a member's reply takes the pool's name (for good); */
    /* a request already steered upstream is the pool's while coalescing.   */
    @name(".MyIngress.steer_name")
    action steer_name() {
        if (steer.member_reply) {
            hdr.ipv4.src_addr = steer.pool_addr;
            hdr.udp.checksum = 0;
            count_steer(steer_event_t.REPLY_REWRITTEN);
        }
        if (steer.member_request) {
            hdr.ipv4.dst_addr = steer.pool_addr;
            count_steer(steer_event_t.MEMBER_REQUEST);
        }
    }

    /* After coalescing: the request's destination becomes its node's       */
    /* address (or, already steered upstream, stays it); UDP checksum 0,     */
    /* since the pseudo-header changed.                                      */
    @name(".MyIngress.steer_finish")
    action steer_finish() {
        if (steer.steered) {
            hdr.ipv4.dst_addr = steer.node_addr;
            hdr.udp.checksum = 0;
        } else if (steer.member_request) {
            hdr.ipv4.dst_addr = steer.peer;
        }
    }

    apply {
        if (op == steer_op_t.TOWARDS_NODE) {
            steer_forward();
        } else if (op == steer_op_t.POOL_NAME) {
            steer_name();
        } else {
            steer_finish();
        }
    }
}
