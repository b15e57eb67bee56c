/* Less common constructs: lookahead/advance, header unions, value_set, serializable enums, slice assignment,
 * header and struct copies, push_front, functions with out parameters, table keys on slices and isValid(),
 * int<W> registers. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> kind_t { SMALL = 1, LARGE = 2, SKIP = 3 }

header tag_h { kind_t kind; bit<8> x; }
header small_h { bit<8> v; }
header large_h { bit<16> v; }
header_union body_u { small_h small; large_h large; }
header out_h {
    bit<8> peek;      // first byte, read with lookahead before extracting
    bit<8> which;     // 1 small, 2 large valid in the union, 0 none
    bit<8> x_sliced;  // tag.x with bits [3:0] replaced by 0xA
    bit<8> lo;        // from a function's out parameter: x & 0x0F
    bit<8> hi;        // and x >> 4
    bit<8> hit;       // 1 if the slice/isValid table hit
    bit<8> reg_old;   // int<8> register read (pattern), then the register adds -1
    bit<8> vs;        // 1 if tag.x was in the parser value_set
}

struct headers_t { tag_h tag; body_u body; out_h out; tag_h copy; small_h[2] extra; }
struct pair_t { bit<8> a; bit<8> b; }
struct meta_t { bit<8> peek; bit<8> vs; pair_t p1; pair_t p2; }

void split(in bit<8> x, out bit<8> lo, out bit<8> hi) {
    lo = x & 0x0F;
    hi = x >> 4;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<8>>(4) special;
    state start {
        meta.peek = pkt.lookahead<bit<8>>();
        transition select(meta.peek) {
            3: skip_one;
            default: parse_tag;
        }
    }
    state skip_one {
        pkt.advance(8);
        transition parse_tag;
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        transition select(hdr.tag.x) {
            special: mark_vs;
            default: parse_body;
        }
    }
    state mark_vs { meta.vs = 1; transition parse_body; }
    state parse_body {
        transition select(hdr.tag.kind) {
            kind_t.SMALL: parse_small;
            kind_t.LARGE: parse_large;
            default: accept;
        }
    }
    state parse_small { pkt.extract(hdr.body.small); transition accept; }
    state parse_large { pkt.extract(hdr.body.large); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<int<8>>(2) acc;

    action mark_hit() { hdr.out.hit = 1; }
    table by_slice {
        key = { hdr.tag.x[7:4] : exact; hdr.body.small.isValid() : exact; }
        actions = { mark_hit; NoAction; }
        default_action = NoAction();
    }

    apply {
        hdr.out.setValid();
        hdr.out.peek = meta.peek;
        if (hdr.body.small.isValid()) {
            hdr.out.which = 1;
        } else if (hdr.body.large.isValid()) {
            hdr.out.which = 2;
        }
        hdr.out.x_sliced = hdr.tag.x;
        hdr.out.x_sliced[3:0] = 0xA;
        split(hdr.tag.x, hdr.out.lo, hdr.out.hi);
        by_slice.apply();
        int<8> old;
        acc.read(old, 0);
        hdr.out.reg_old = (bit<8>)old;
        acc.write(0, old - 1);
        hdr.out.vs = meta.vs;
        hdr.copy = hdr.tag;                   // header copy: valid with the same fields
        meta.p1.a = 5;
        meta.p2 = meta.p1;                    // struct copy
        hdr.extra.push_front(1);
        hdr.extra[0].setValid();
        hdr.extra[0].v = meta.p2.a;
        if (hdr.tag.kind == kind_t.LARGE) {
            hdr.body.small.setValid();        // setting one union member invalidates the other
            hdr.body.small.v = 0x5A;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.tag); pkt.emit(hdr.body); pkt.emit(hdr.out); pkt.emit(hdr.copy); pkt.emit(hdr.extra); }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
