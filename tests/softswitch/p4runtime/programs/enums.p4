// P4Info parity probe: which serializable enums p4c lists in type_info (those typing a key, an action
// parameter, a controller-header field or a digest field; not those only in metadata or plain headers),
// digest members typed with the enum, controller-header ids, used-action listing, initial default actions.
#include <core.p4>
#include <v1model.p4>

enum bit<8> role_t { HOST = 0, STORAGE = 1, FABRIC = 2 }
enum bit<16> op_t { GET = 0x10, PUT = 0x20 }
enum bit<8> key_only_t { E = 5 }
enum bit<8> param_only_t { A = 1, B = 2 }
enum bit<8> meta_only_t { D = 4 }
enum bit<8> plain_header_t { G = 7 }
enum bit<4> unused_t { U = 1 }

@controller_header("packet_in")
header packet_in_h { bit<9> ingress_port; op_t op; bit<7> pad; }
@controller_header("packet_out")
header packet_out_h { role_t role; bit<8> x; }
header eth_h { bit<48> dst; bit<48> src; bit<16> t; plain_header_t p; }
struct headers_t { packet_in_h pin; packet_out_h pout; eth_h eth; }
struct hot_t { role_t role; bit<8> v; op_t op; }
struct meta_t { role_t role; meta_only_t m; key_only_t k; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply {} }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<8>>(4) last;
    action never_called() { meta.m = meta_only_t.D; }
    action note(param_only_t x) { last.write(0, (bit<8>)x); }
    action set_role(role_t role, bit<16> weight) { meta.role = role; last.write(1, (bit<8>)weight); }
    action mark() { meta.m = meta_only_t.D; }
    table roles {
        key = { hdr.eth.t : exact; }
        actions = { set_role; NoAction; }
        default_action = set_role(role_t.FABRIC, 3);
    }
    table keyed { key = { meta.k : exact; } actions = { note; } }
    apply {
        roles.apply();
        keyed.apply();
        mark();
        if (meta.role == role_t.STORAGE) { digest<hot_t>(1, {meta.role, 1, op_t.GET}); }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply {} }
control CC(inout headers_t hdr, inout meta_t meta) { apply {} }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
