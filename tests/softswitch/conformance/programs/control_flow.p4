/* exit and return in apply blocks and actions, functions, local variables, if/else, conditional expressions. */
#include <core.p4>
#include <v1model.p4>

header h_h { bit<8> a; bit<8> b; bit<8> c; }
struct headers_t { h_h h; }
struct meta_t { }

bit<8> larger(in bit<8> x, in bit<8> y) {
    return x > y ? x : y;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action stop_here() {
        hdr.h.b = 0xAA;
        exit;
    }
    apply {
        sm.egress_spec = 1;
        bit<8> tmp = hdr.h.a + 1;
        hdr.h.c = larger(hdr.h.a, hdr.h.b);
        if (hdr.h.a == 1) {
            hdr.h.b = 1;
            exit;
        }
        if (hdr.h.a == 2) {
            hdr.h.b = 2;
            return;
        }
        if (hdr.h.a == 3) {
            stop_here();
            hdr.h.b = 0xFF;   // never runs
        }
        hdr.h.b = tmp;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        // egress still runs after an ingress exit
        hdr.h.a = hdr.h.a | 0x80;
    }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
