/* -*- P4_16 -*- */
/*
 * kvswitch: plain IPv4 forwarding (docs/dataplane.md, "Forwarding").
 *
 * Everything the switch does not answer itself leaves through ipv4_lpm:
 * misses, fills on their way to the client, PUTs, malformed KVP and all
 * non-KVP traffic.  The controller installs one entry per host route.
 *
 * Reads: the IPv4 destination.  Writes: egress_spec, the MACs, the TTL;
 * a packet without a route is dropped and counted NO_ROUTE in `drops`.
 */

control Forward(inout ethernet_h ethernet, inout ipv4_h ipv4,
                inout standard_metadata_t std_meta, counter drops) {

    @name(".MyIngress.ipv4_forward")
    action ipv4_forward(mac_addr_t dst_mac, bit<9> port) {
        std_meta.egress_spec = port;
        ethernet.src_addr = ethernet.dst_addr;
        ethernet.dst_addr = dst_mac;
        ipv4.ttl = ipv4.ttl - 1;
    }

    @name(".MyIngress.drop_no_route")
    action drop_no_route() {
        mark_to_drop(std_meta);
        drops.count((bit<32>)(bit<8>)drop_reason_t.NO_ROUTE);
    }

    /* IPv4 destination -> next hop. */
    @name(".MyIngress.ipv4_lpm")
    table ipv4_lpm {
        key = {
            ipv4.dst_addr: lpm @name("hdr.ipv4.dst_addr");
        }
        actions = {
            ipv4_forward;
            drop_no_route;
        }
        size = 1024;
        default_action = drop_no_route();
    }

    apply {
        ipv4_lpm.apply();
    }
}
