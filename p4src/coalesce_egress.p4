/* -*- P4_16 -*- */
/*
 * kvswitch: request coalescing, egress side (included inside control
 * MyEgress; the ingress side and the design are in coalesce.p4).
 *
 * A replicated reply reaches egress once per (port, rid) of the
 * coalescing multicast group: every port, rid 0..COALESCE_BATCH, and one
 * copy rid COALESCE_CARRY_RID.  Each copy keeps itself only where it is
 * wanted:
 *   rid 0      the reply itself, on the port its own route chose (first
 *              batch only: a carried pass already served it);
 *   rid i > 0  the batch's waiter i-1's copy, on the port that waiter's
 *              GET came in on, rewritten to that reader (MAC, IPv4
 *              address, UDP port, request id + the reply's aux, its
 *              offset in a span GET; UDP checksum 0, as in every
 *              packet the switch rewrites past its IPv4 header);
 *   carry      when the entry has waiters past this batch: recirculated
 *              (never sent) with the next batch's first waiter, so the
 *              next ingress pass serves the next batch (coalesce_carry).
 * Everything the copies need came with them in metadata (read in the
 * same ingress action that freed the entry), so a new pending entry in
 * the same cell can never leak into an old reply's copies.
 */

/* Copies of replies sent to parked waiters (packets, bytes). */
counter(1, CounterType.packets_and_bytes) coalesce_replicated;

/* Waiter copy: keep it only on the waiter's port, addressed to it.     */
/* (The fields one by one: the softswitch takes no struct parameters.)  */
action coalesce_copy_to(in ipv4_addr_t ip, in bit<16> udp_port, in bit<32> req_id,
                        in mac_addr_t mac, in bit<16> port) {
    if (port != (bit<16>)std_meta.egress_port) {
        mark_to_drop(std_meta);
    } else {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
        hdr.udp.checksum = 0;
        hdr.kvp.req_id = req_id + hdr.kvp.aux;  /* a span's reply aux */
        coalesce_replicated.count(0);
    }
}

/* One multicast copy of a replicated reply: which reader is it for?    */
action coalesce_copy() {
    bit<16> rid = std_meta.egress_rid;
    if (rid == COALESCE_CARRY_RID) {
        if (meta.coal.more) {
            meta.coal.carry = true;
            meta.coal.next = meta.coal.next + (bit<8>)COALESCE_BATCH;
            recirculate_preserving_field_list(COALESCE_CARRY_FIELDS);
        } else {
            mark_to_drop(std_meta);
        }
    } else if (rid == 0) {
        if (meta.coal.carry || std_meta.egress_port != meta.coal.origin_port) {
            mark_to_drop(std_meta);
        }
    } else if (rid > (bit<16>)meta.coal.waiters) {
        mark_to_drop(std_meta);
    } else if (rid == 1) {
        coalesce_copy_to(meta.coal.w0.ip, meta.coal.w0.udp_port,
                         meta.coal.w0.req_id, meta.coal.w0.mac,
                         meta.coal.w0.port);
    } else if (rid == 2) {
        coalesce_copy_to(meta.coal.w1.ip, meta.coal.w1.udp_port,
                         meta.coal.w1.req_id, meta.coal.w1.mac,
                         meta.coal.w1.port);
    } else if (rid == 3) {
        coalesce_copy_to(meta.coal.w2.ip, meta.coal.w2.udp_port,
                         meta.coal.w2.req_id, meta.coal.w2.mac,
                         meta.coal.w2.port);
    } else if (rid == 4) {
        coalesce_copy_to(meta.coal.w3.ip, meta.coal.w3.udp_port,
                         meta.coal.w3.req_id, meta.coal.w3.mac,
                         meta.coal.w3.port);
    } else if (rid == 5) {
        coalesce_copy_to(meta.coal.w4.ip, meta.coal.w4.udp_port,
                         meta.coal.w4.req_id, meta.coal.w4.mac,
                         meta.coal.w4.port);
    } else if (rid == 6) {
        coalesce_copy_to(meta.coal.w5.ip, meta.coal.w5.udp_port,
                         meta.coal.w5.req_id, meta.coal.w5.mac,
                         meta.coal.w5.port);
    } else if (rid == 7) {
        coalesce_copy_to(meta.coal.w6.ip, meta.coal.w6.udp_port,
                         meta.coal.w6.req_id, meta.coal.w6.mac,
                         meta.coal.w6.port);
    } else if (rid == 8) {
        coalesce_copy_to(meta.coal.w7.ip, meta.coal.w7.udp_port,
                         meta.coal.w7.req_id, meta.coal.w7.mac,
                         meta.coal.w7.port);
    } else {
        mark_to_drop(std_meta);
    }
}
