/* -*- P4_16 -*- */
/*
 * kvswitch: where a forwarded packet goes (docs/dataplane.md,
 * "Forwarding", "Steering").  Two steps, because request coalescing
 * (coalesce.p4) runs between them: it needs the port routing chose, and
 * keys a steered request by the pool's address, not its node's.
 *
 * OUT: a packet whose TTL is spent is dropped (TTL_EXPIRED); a request
 * the SteerChoice step placed on a storage node leaves towards that node
 * (Steer, TOWARDS_NODE), everything else by ipv4_lpm (Forward); then a
 * pool member's reply takes the pool's name, and a request steered
 * upstream is seen as the pool's while coalescing (Steer, POOL_NAME).
 * NODE_ADDRESS: after coalescing, a steered request's destination becomes
 * its node's address (Steer, NODE_ADDRESS).
 *
 * Reads: the headers, steer_t, `step`.  Writes: egress_spec, the MACs,
 * TTL and IPv4 addresses; counts in `drops` and `steer_events`.
 */

/* Which of Route's steps the caller asks for (internal: the controller */
/* never sees these values).                                            */
enum bit<8> route_step_t {
    OUT          = 0,   /* out of which port, with which MACs            */
    NODE_ADDRESS = 1    /* after coalescing: a steered request's address */
}

control Route(inout headers_t hdr, inout standard_metadata_t std_meta,
              in route_step_t step, in steer_t steer,
              counter drops, counter steer_events) {
    Forward() forward;
    Steer() steering;

    apply {
        if (step == route_step_t.NODE_ADDRESS) {
            steering.apply(hdr, std_meta, steer_op_t.NODE_ADDRESS, steer,
                           steer_events);
        } else if (hdr.ipv4.ttl <= 1) {
            mark_to_drop(std_meta);
            drops.count((bit<32>)(bit<8>)drop_reason_t.TTL_EXPIRED);
        } else {
            if (steer.steered) {
                steering.apply(hdr, std_meta, steer_op_t.TOWARDS_NODE, steer,
                               steer_events);
            } else {
                forward.apply(hdr.ethernet, hdr.ipv4, std_meta, drops);
            }
            steering.apply(hdr, std_meta, steer_op_t.POOL_NAME, steer,
                           steer_events);
        }
    }
}
