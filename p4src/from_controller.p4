/* -*- P4_16 -*- */
/*
 * kvswitch: what the controller sends through CPU_PORT (docs/dataplane.md,
 * "Pipeline").
 *
 * A packet-out leaves unchanged, minus its packet_out header, through the
 * port packet_out.egress_port names.  A SLOT_WRITE / SLOT_READ is executed
 * instead (by the store, before this step: dispatch.p4 chose the
 * operation) and turned into its reply to the controller: SLOT_WRITE_ACK
 * or SLOT_READ_REPLY with the store's status, ERR_MALFORMED when the
 * store did not act (a malformed message, a slot out of range: counted
 * BAD_SLOT); Punt then sends it to the controller.
 *
 * Reads: dispatch_t (PACKET_OUT or SLOT_OP; any other path is not this
 * step's), the store's slot status.  Writes: the headers (the reply),
 * egress_spec; counts PACKET_OUT in `events`, BAD_SLOT in `drops`.
 */

control FromController(inout headers_t hdr, inout standard_metadata_t std_meta,
                       in dispatch_t dispatch, in kvp_status_t slot_status,
                       counter drops, counter events) {
    @name(".MyIngress.count_drop")
    action count_drop(in drop_reason_t reason) {
        drops.count((bit<32>)(bit<8>)reason);
    }

    /* A packet-out leaves unchanged, minus its packet_out header. */
    @name(".MyIngress.send_packet_out")
    action send_packet_out() {
        std_meta.egress_spec = (bit<9>)hdr.packet_out.egress_port;
        hdr.packet_out.setInvalid();
        events.count((bit<32>)(bit<8>)kvp_event_t.PACKET_OUT);
    }

    /* Turn a SLOT_WRITE / SLOT_READ into its reply: opcode, status, value   */
    /* header present iff F_VALUE, IPv4/UDP lengths to match (Punt sends it  */
    /* to the controller).                                                   */
    @name(".MyIngress.slot_reply")
    action slot_reply(in kvp_opcode_t opcode, in kvp_status_t status) {
        hdr.kvp.opcode = opcode;
        hdr.kvp.status = status;
        if (opcode == kvp_opcode_t.SLOT_READ_REPLY
            && status != kvp_status_t.ERR_MALFORMED) {
            hdr.kvp.flags = hdr.kvp.flags | F_VALUE;
        } else {
            hdr.kvp.flags = hdr.kvp.flags & ~F_VALUE;
            hdr.kvp_value.setInvalid();
        }
        bit<16> kvp_len = KVP_HEADER_LEN;
        if (hdr.kvp_value.isValid()) {
            kvp_len = KVP_HEADER_LEN + KVP_VALUE_LEN;
        }
        hdr.ipv4.total_len = IPV4_HEADER_LEN + UDP_HEADER_LEN + kvp_len;
        hdr.udp.len = UDP_HEADER_LEN + kvp_len;
        hdr.udp.checksum = 0;
    }

    apply {
        if (dispatch.path == path_t.PACKET_OUT) {
            send_packet_out();
        } else if (dispatch.path == path_t.SLOT_OP) {
            kvp_status_t status = kvp_status_t.ERR_MALFORMED;
            if (dispatch.store) {
                status = slot_status;
            }
            if (dispatch.refusal != drop_reason_t.NONE) {
                count_drop(dispatch.refusal);
            }
            if (hdr.kvp.opcode == kvp_opcode_t.SLOT_WRITE) {
                slot_reply(kvp_opcode_t.SLOT_WRITE_ACK, status);
            } else {
                slot_reply(kvp_opcode_t.SLOT_READ_REPLY, status);
            }
        }
    }
}
