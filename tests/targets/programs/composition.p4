/* -*- P4_16 -*- */
/*
 * Control composition as p4c and BMv2 accept it, for the cross-target
 * test (tests/targets/test_composition.py): controls instantiated inside
 * controls, constructor parameters, `apply` of an instance, directionless
 * parameters, an `in` argument that overlaps an `inout` one (copy-in,
 * copy-out), `return` inside an instance, nested instances, `@name`,
 * an extern passed to an instance and handed on by it to one of its own,
 * one instance applied at two places.
 *
 * Frame: Ethernet (ether_type 0x88B5, a local experimental type) and
 * probe_h.  The output port comes from MyIngress.ports by probe.port.
 */

#include <core.p4>
#include <v1model.p4>

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header probe_h {
    bit<8> a;     /* an operand; Add writes it */
    bit<8> b;     /* Add's table writes it */
    bit<8> c;     /* Mark writes it */
    bit<8> port;  /* the egress port */
}

struct headers_t {
    ethernet_h ethernet;
    probe_h    probe;
}

/* Mark's own metadata: what a step keeps to itself */
struct mark_meta_t {
    bit<8> seen;
}

struct metadata_t {
    bit<8>      key;
    mark_meta_t mark;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t std_meta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x88B5: probe;
            default: accept;
        }
    }
    state probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* Counts packets into its own counter; `step` is directionless. */
control Mark(inout probe_h p, inout mark_meta_t m, bit<8> step) {
    counter(4, CounterType.packets) marks;
    apply {
        m.seen = m.seen + step;
        p.c = p.c + m.seen;
        marks.count((bit<32>)step);
    }
}

/* p.a += add unless p.a is 0 (then returns early); `k` keys a table. */
control Add(inout probe_h p, in bit<8> k, inout mark_meta_t m)(bit<8> add) {
    Mark() mark;
    action set_b(bit<8> v) {
        p.b = v + add;
    }
    table by_key {
        key = { k: exact; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }
    apply {
        /* k is a copy: p.a changes below, k does not */
        p.a = p.a + add;
        by_key.apply();
        if (k == 0) {
            return;
        }
        mark.apply(p, m, 2);
    }
}

/* Counts one packet at `index` of a counter it is given by a caller     */
/* that was given it too (an extern handed on through two controls).    */
control Tally(counter c, in bit<32> index) {
    apply {
        c.count(index);
    }
}

/* The output port from a table named as if it were MyIngress's own;   */
/* counts routed packets in a counter its caller owns (an extern given  */
/* as a directionless argument), and every packet it sees at index 3   */
/* through Tally.                                                       */
control Route(in probe_h p, inout standard_metadata_t std_meta,
              counter routed) {
    Tally() tally;
    action to_port(bit<9> port) {
        std_meta.egress_spec = port;
        routed.count((bit<32>)port);
    }
    action drop() {
        mark_to_drop(std_meta);
    }
    @name(".MyIngress.ports") table port_of {
        key = { p.port: exact; }
        actions = { to_port; drop; }
        default_action = drop();
    }
    apply {
        port_of.apply();
        tally.apply(routed, 3);
    }
}

/* Applied at two places with different constants. */
control Stamp(inout probe_h p, in bit<8> v) {
    apply {
        p.c = p.c + v;
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t std_meta) {
    Add(8w1) first;
    @name("second_add") Add(8w16) second;
    counter(4, CounterType.packets) routed;
    Route() route;
    Stamp() stamp;
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(std_meta);
            return;
        }
        meta.key = hdr.probe.a;
        first.apply(hdr.probe, hdr.probe.a, meta.mark);
        second.apply(hdr.probe, meta.key, meta.mark);
        if (hdr.probe.port == 1) {
            stamp.apply(hdr.probe, 1);
        } else {
            stamp.apply(hdr.probe, 2);
        }
        route.apply(hdr.probe, std_meta, routed);
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t std_meta) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
