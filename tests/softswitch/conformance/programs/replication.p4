/* The traffic manager: multicast (instance_type 5, egress_rid), I2E clone (the packet as it entered: ingress
 * changes are not in it, instance_type 1), E2E clone (instance_type 2), resubmit and recirculate with preserved
 * field lists (instance_type 6 and 4 seen in ingress). Egress appends info_h describing each copy. */
#include <core.p4>
#include <v1model.p4>

header cmd_h {
    bit<8> op;     // 1 multicast to group 1, 2 I2E clone to session 5, 3 resubmit once, 4 recirculate once,
                   // 5 E2E clone to session 6
    bit<8> pass;   // written by the pipeline (see each op)
}
header info_h {
    bit<8> instance_type;
    bit<8> egress_rid;       // low 8 bits
    bit<8> egress_port;      // low 8 bits
    bit<8> ingress_port;     // low 8 bits
}

struct headers_t { cmd_h cmd; info_h info; }
struct meta_t {
    @field_list(1)
    bit<8> passes;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.cmd); transition accept; }
}

control V(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.cmd.op == 1) {
            sm.mcast_grp = 1;
        } else if (hdr.cmd.op == 2) {
            clone(CloneType.I2E, 32w5);
            hdr.cmd.pass = 0x77;
            sm.egress_spec = 1;
        } else if (hdr.cmd.op == 3) {
            if (sm.instance_type == 0) {
                meta.passes = 9;
                resubmit_preserving_field_list(1);
            } else {
                hdr.cmd.pass = meta.passes;
                sm.egress_spec = 2;
            }
        } else if (hdr.cmd.op == 4) {
            sm.egress_spec = 3;
            if (sm.instance_type == 4) {
                hdr.cmd.pass = meta.passes;
            }
        } else if (hdr.cmd.op == 5) {
            sm.egress_spec = 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.cmd.op == 4 && hdr.cmd.pass == 0 && sm.instance_type == 0) {
            hdr.cmd.pass = 1;
            meta.passes = 0x42;
            recirculate_preserving_field_list(1);
        }
        if (hdr.cmd.op == 5 && sm.instance_type == 0) {
            clone(CloneType.E2E, 32w6);
        }
        hdr.info.setValid();
        hdr.info.instance_type = (bit<8>)sm.instance_type;
        hdr.info.egress_rid = (bit<8>)sm.egress_rid;
        hdr.info.egress_port = (bit<8>)sm.egress_port;
        hdr.info.ingress_port = (bit<8>)sm.ingress_port;
    }
}

control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.cmd); pkt.emit(hdr.info); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
