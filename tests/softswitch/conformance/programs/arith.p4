/* Arithmetic on bit<W> and int<W>: wrap-around, saturation, shifts, slices, concatenation, casts.
 * The packet carries the operands (operands_h); ingress appends one results_h header with every result. */
#include <core.p4>
#include <v1model.p4>

header operands_h {
    bit<8>  a;
    bit<8>  b;
    int<8>  sa;
    int<8>  sb;
    bit<16> w;
}

header results_h {
    bit<8>  add;          // a + b, wraps mod 256
    bit<8>  sub;          // a - b
    bit<8>  mul;          // a * b
    bit<8>  sat_add;      // a |+| b
    bit<8>  sat_sub;      // a |-| b
    int<8>  s_add;        // sa + sb, two's complement wrap
    int<8>  s_sub;
    int<8>  s_sat_add;    // clamps to [-128, 127]
    int<8>  s_sat_sub;
    int<8>  s_shr;        // sa >> 2, arithmetic
    bit<8>  shl;          // a << 3
    bit<8>  shr;          // a >> 3
    bit<4>  hi_nib;       // a[7:4]
    bit<4>  lo_nib;       // a[3:0]
    bit<24> cat;          // a ++ w
    bit<16> widen_signed; // (bit<16>)(int<16>)sa, sign-extended
    bit<8>  narrow;       // (bit<8>)w, truncated
    bit<8>  neg;          // -a
    bit<8>  inv;          // ~a
    bit<1>  lt_signed;    // sa < sb
    bit<1>  lt_unsigned;  // a < b
    bit<6>  pad;
}

struct headers_t { operands_h ops; results_h res; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ops); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.add = hdr.ops.a + hdr.ops.b;
        hdr.res.sub = hdr.ops.a - hdr.ops.b;
        hdr.res.mul = hdr.ops.a * hdr.ops.b;
        hdr.res.sat_add = hdr.ops.a |+| hdr.ops.b;
        hdr.res.sat_sub = hdr.ops.a |-| hdr.ops.b;
        hdr.res.s_add = hdr.ops.sa + hdr.ops.sb;
        hdr.res.s_sub = hdr.ops.sa - hdr.ops.sb;
        hdr.res.s_sat_add = hdr.ops.sa |+| hdr.ops.sb;
        hdr.res.s_sat_sub = hdr.ops.sa |-| hdr.ops.sb;
        hdr.res.s_shr = hdr.ops.sa >> 2;
        hdr.res.shl = hdr.ops.a << 3;
        hdr.res.shr = hdr.ops.a >> 3;
        hdr.res.hi_nib = hdr.ops.a[7:4];
        hdr.res.lo_nib = hdr.ops.a[3:0];
        hdr.res.cat = hdr.ops.a ++ hdr.ops.w;
        hdr.res.widen_signed = (bit<16>)(int<16>)hdr.ops.sa;
        hdr.res.narrow = (bit<8>)hdr.ops.w;
        hdr.res.neg = -hdr.ops.a;
        hdr.res.inv = ~hdr.ops.a;
        hdr.res.lt_signed = (hdr.ops.sa < hdr.ops.sb) ? 1w1 : 1w0;
        hdr.res.lt_unsigned = (hdr.ops.a < hdr.ops.b) ? 1w1 : 1w0;
        hdr.res.pad = 0;
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ops); pkt.emit(hdr.res); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
