/* digest<T>: one message per packet that calls it, with the field values at the time of the call. */
#include <core.p4>
#include <v1model.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_h eth; }
struct meta_t { }

struct learn_t {
    bit<48> src;     // the learnt MAC address
    bit<9>  port;    // the port it was seen on
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.eth.ether_type == 0x1234) {
            digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
            hdr.eth.src = 0;   // changing it after the call does not change the digest
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
