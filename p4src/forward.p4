/* -*- P4_16 -*- */
/*
 * kvswitch: plain IPv4 forwarding (included inside control MyIngress).
 *
 * Everything the switch does not answer itself leaves through ipv4_lpm:
 * misses, fills on their way to the client, PUTs, malformed KVP and all
 * non-KVP traffic.  The controller installs one entry per host route.
 */

action ipv4_forward(mac_addr_t dst_mac, bit<9> port) {
    std_meta.egress_spec = port;
    hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
    hdr.ethernet.dst_addr = dst_mac;
    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
}

action drop_no_route() {
    mark_to_drop(std_meta);
    count_drop(drop_reason_t.NO_ROUTE);
}

/* IPv4 destination -> next hop. */
table ipv4_lpm {
    key = {
        hdr.ipv4.dst_addr: lpm;
    }
    actions = {
        ipv4_forward;
        drop_no_route;
    }
    size = 1024;
    default_action = drop_no_route();
}

action drop_packet(in drop_reason_t reason) {
    mark_to_drop(std_meta);
    count_drop(reason);
}
