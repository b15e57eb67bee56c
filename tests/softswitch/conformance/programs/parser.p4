/* Parser semantics: select on two keys with masks, ranges and `_`; verify(); a select with no matching case and
 * no default (BMv2 accepts); a too-short packet (parser_error reaches ingress, unparsed bytes stay payload). */
#include <core.p4>
#include <v1model.p4>

error { BadSub }

header h1_h { bit<8> kind; bit<8> sub; }
header h2_h { bit<16> v; }
header h3_h { bit<8> x; }
header res_h {
    bit<8> path;   // which parser path ran (0: none of the numbered ones)
    bit<8> err;    // 0 NoError, 1 PacketTooShort, 2 BadSub, 3 other
}

struct headers_t { h1_h h1; h2_h h2; h3_h h3; res_h res; }
struct meta_t { bit<8> path; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h1);
        transition select(hdr.h1.kind, hdr.h1.sub) {
            (0x10 &&& 0xF0, _): s_mask;
            (0x20 .. 0x2F, 0x01): s_range;
            (0x30, _): s_h2;
            (0x40, _): s_verify;
            (0x50, _): s_nomatch;
            default: accept;
        }
    }
    state s_mask { meta.path = 1; transition accept; }
    state s_range { meta.path = 2; transition accept; }
    state s_h2 { pkt.extract(hdr.h2); meta.path = 3; transition accept; }
    state s_verify {
        meta.path = 4;
        verify(hdr.h1.sub == 0, error.BadSub);
        transition accept;
    }
    state s_nomatch {
        meta.path = 6;
        transition select(hdr.h1.sub) {
            1: s_h3;
        }
    }
    state s_h3 { pkt.extract(hdr.h3); meta.path = 5; transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.path = meta.path;
        if (sm.parser_error == error.NoError) {
            hdr.res.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.res.err = 1;
        } else if (sm.parser_error == error.BadSub) {
            hdr.res.err = 2;
        } else {
            hdr.res.err = 3;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h1); pkt.emit(hdr.h2); pkt.emit(hdr.h3); pkt.emit(hdr.res); }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
