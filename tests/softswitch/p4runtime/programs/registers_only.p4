// A program without tables (so its P4Info has no tables and one action): counts frames in a register and
// sends each frame out of port 1. BMv2 loads it; so must the softswitch.
#include <core.p4>
#include <v1model.p4>

header eth_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { eth_h eth; }
struct meta_t { bit<32> frames; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply {} }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(1) frames_seen;  // frames that reached ingress
    apply {
        frames_seen.read(meta.frames, 0);
        frames_seen.write(0, meta.frames + 1);
        sm.egress_spec = 1;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply {} }
control CC(inout headers_t hdr, inout meta_t meta) { apply {} }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
