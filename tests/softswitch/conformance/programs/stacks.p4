/* Header stacks: a parser loop with stack.next / stack.last, pop_front in ingress, emit of the whole stack,
 * and StackOutOfBounds when more labels arrive than the stack holds. */
#include <core.p4>
#include <v1model.p4>

header label_h {
    bit<7> value;
    bit<1> bos;     // bottom of stack
}

struct headers_t { label_h[4] labels; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { transition parse_label; }
    state parse_label {
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) {
            0: parse_label;
            1: accept;
        }
    }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.labels.pop_front(1);
        if (sm.parser_error == error.StackOutOfBounds) {
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.labels); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
