/* Match kinds and table results: exact, lpm, ternary (priorities), range, optional (const entries),
 * default actions (settable, const), .hit / .miss, switch on action_run. */
#include <core.p4>
#include <v1model.p4>

header keys_h { bit<8> e; bit<16> l; bit<8> t; bit<8> r; bit<8> o; }
header res_h {
    bit<8> exact_r;
    bit<8> lpm_r;
    bit<8> tern_r;
    bit<8> range_r;
    bit<8> opt_r;
    bit<8> flags;   // 0x80 exact hit, 0x40 lpm hit, 0x20 ternary miss, 0x10 range ran r_set, 0x08 range ran NoAction
}

struct headers_t { keys_h k; res_h res; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action e_set(bit<8> v) { hdr.res.exact_r = v; }
    action l_set(bit<8> v) { hdr.res.lpm_r = v; }
    action t_set(bit<8> v) { hdr.res.tern_r = v; }
    action r_set(bit<8> v) { hdr.res.range_r = v; }
    action o_set(bit<8> v) { hdr.res.opt_r = v; }

    table te {
        key = { hdr.k.e : exact; }
        actions = { e_set; }
        default_action = e_set(0xEE);
    }
    table tl {
        key = { hdr.k.l : lpm; }
        actions = { l_set; NoAction; }
        default_action = NoAction();
    }
    table tt {
        key = { hdr.k.t : ternary; }
        actions = { t_set; }
        const default_action = t_set(0xDD);
    }
    table tr {
        key = { hdr.k.r : range; }
        actions = { r_set; NoAction; }
        default_action = NoAction();
    }
    table to {
        key = { hdr.k.o : optional; }
        actions = { o_set; }
        const entries = {
            5 : o_set(0x55);
            _ : o_set(0x99);
        }
    }

    apply {
        hdr.res.setValid();
        hdr.res.flags = 0;
        if (te.apply().hit) {
            hdr.res.flags = hdr.res.flags | 0x80;
        }
        if (tl.apply().hit) {
            hdr.res.flags = hdr.res.flags | 0x40;
        }
        if (tt.apply().miss) {
            hdr.res.flags = hdr.res.flags | 0x20;
        }
        switch (tr.apply().action_run) {
            r_set: { hdr.res.flags = hdr.res.flags | 0x10; }
            NoAction: { hdr.res.flags = hdr.res.flags | 0x08; }
        }
        to.apply();
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.k); pkt.emit(hdr.res); } }

V1Switch(P(), V(), MyIngress(), E(), C(), D()) main;
