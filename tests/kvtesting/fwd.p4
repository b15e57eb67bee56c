// A port-to-port forwarder: table `fwd` maps the ingress port to an egress port; no entry: drop.
#include <core.p4>
#include <v1model.p4>

header ethernet_h {
    bit<48> dst;   // destination MAC
    bit<48> src;   // source MAC
    bit<16> type;  // EtherType
}
struct headers_t { ethernet_h eth; }
struct meta_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action drop() { mark_to_drop(std); }
    action to_port(bit<9> port) { std.egress_spec = port; }
    table fwd {
        key = { std.ingress_port: exact; }
        actions = { to_port; drop; }
        default_action = drop();
    }
    apply { fwd.apply(); }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply { } }
control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
