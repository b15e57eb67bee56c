/* -*- P4_16 -*- */
/*
 * kvswitch: the CPU port (included inside control MyIngress).
 *
 * Packet-in: INSERT / LOOKUP_META go to the controller, which answers in
 * the storage node's name; SLOT_WRITE / SLOT_READ are answered to it.
 * Packet-out: the controller's packets leave unchanged through the port
 * packet_out.egress_port names (SLOT_* ones are executed instead).
 */

/* Send to CPU_PORT with a packet_in header. */
action punt(in punt_reason_t reason) {
    hdr.packet_in.setValid();
    hdr.packet_in.ingress_port = (bit<16>)std_meta.ingress_port;
    hdr.packet_in.reason = (bit<8>)reason;
    hdr.packet_in.pad = 0;
    hdr.packet_out.setInvalid();
    std_meta.egress_spec = CPU_PORT;
}

/* A packet-out leaves unchanged, minus its packet_out header. */
action send_packet_out() {
    std_meta.egress_spec = (bit<9>)hdr.packet_out.egress_port;
    hdr.packet_out.setInvalid();
    count_event(kvp_event_t.PACKET_OUT);
}

/* Turn a SLOT_WRITE / SLOT_READ into its reply: opcode, status, value   */
/* header present iff F_VALUE, IPv4/UDP lengths to match; to the CPU.    */
action slot_reply(in kvp_opcode_t opcode) {
    hdr.kvp.opcode = opcode;
    hdr.kvp.status = meta.store.slot_status;
    if (opcode == kvp_opcode_t.SLOT_READ_REPLY
        && meta.store.slot_status != kvp_status_t.ERR_MALFORMED) {
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
    punt(punt_reason_t.SLOT_REPLY);
}
