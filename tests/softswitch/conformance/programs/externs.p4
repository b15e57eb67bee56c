/* Registers (read-modify-write across packets), indirect counters, and v1model hash() with BMv2's algorithms. */
#include <core.p4>
#include <v1model.p4>

header req_h { bit<8> op; bit<8> idx; bit<32> val; }
header res_h {
    bit<32> old;       // register value before this packet added val
    bit<16> h_crc16;   // crc16 over {op, idx, val}
    bit<32> h_crc32;   // crc32 over {op, idx, val}
    bit<16> h_csum16;  // csum16 over {op, idx, val}
    bit<16> h_ident;   // identity over {idx, op}
    bit<16> h_mod;     // 100 + crc16({val}) % 7
    bit<16> h_nibble;  // crc16 over {op[3:0], idx}: 12 bits, padded to 2 bytes
    bit<16> h_max0;    // max 0 is treated as 1: always the base (5)
}

struct headers_t { req_h req; res_h res; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.req); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) store;
    counter(16, CounterType.packets_and_bytes) ctr;

    apply {
        hdr.res.setValid();
        store.read(hdr.res.old, (bit<32>)hdr.req.idx);
        store.write((bit<32>)hdr.req.idx, hdr.res.old + hdr.req.val);
        ctr.count((bit<32>)hdr.req.idx);
        hash(hdr.res.h_crc16, HashAlgorithm.crc16, 16w0, { hdr.req.op, hdr.req.idx, hdr.req.val }, 32w65536);
        hash(hdr.res.h_crc32, HashAlgorithm.crc32, 32w0, { hdr.req.op, hdr.req.idx, hdr.req.val }, 64w4294967296);
        hash(hdr.res.h_csum16, HashAlgorithm.csum16, 16w0, { hdr.req.op, hdr.req.idx, hdr.req.val }, 32w65536);
        hash(hdr.res.h_ident, HashAlgorithm.identity, 16w0, { hdr.req.idx, hdr.req.op }, 32w65536);
        hash(hdr.res.h_mod, HashAlgorithm.crc16, 16w100, { hdr.req.val }, 16w7);
        hash(hdr.res.h_nibble, HashAlgorithm.crc16, 16w0, { hdr.req.op[3:0], hdr.req.idx }, 32w65536);
        hash(hdr.res.h_max0, HashAlgorithm.crc32, 16w5, { hdr.req.val }, 16w0);
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.req); pkt.emit(hdr.res); } }

V1Switch(P(), V(), MyIngress(), E(), C(), D()) main;
