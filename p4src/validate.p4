/* -*- P4_16 -*- */
/*
 * kvswitch: KVP validity rules (included inside control MyIngress).
 *
 * docs/protocol.md, "Validity rules".  Sets meta.kvp_ok for a well-formed
 * KVP message, otherwise meta.drop_reason for UDP on port 7420 that is not
 * one.  The rules are checked in kvpool.wire.check's order (length,
 * magic, version, opcode, value, chunk, value_len), so both name the
 * same reason.  Malformed messages never reach the index, store, sketch
 * or punt: they are forwarded as plain UDP.
 */

action validate_kvp() {
    meta.kvp_ok = false;
    meta.drop_reason = drop_reason_t.NONE;
    bool kvp_port = false;
    if (hdr.udp.isValid()) {
        kvp_port = hdr.udp.dst_port == KVP_UDP_PORT
                   || hdr.udp.src_port == KVP_UDP_PORT;
    }
    bit<8> op = (bit<8>)hdr.kvp.opcode;
    bool has_value = (hdr.kvp.flags & F_VALUE) != 0;
    bool known_op = op == 0x01 || op == 0x02 || op == 0x03 || op == 0x04
                    || op == 0x05 || op == 0x06 || op == 0x07 || op == 0x08
                    || op == 0x10 || op == 0x11 || op == 0x12 || op == 0x13
                    || op == 0x20 || op == 0x21 || op == 0x22 || op == 0x23;
    bool needs_value = hdr.kvp.opcode == kvp_opcode_t.PUT
                       || hdr.kvp.opcode == kvp_opcode_t.SLOT_WRITE;
    if (!kvp_port) {
        /* not KVP at all */
    } else if (!hdr.kvp.isValid()) {
        meta.drop_reason = drop_reason_t.SHORT;
    } else if (hdr.kvp.magic != KVP_MAGIC) {
        meta.drop_reason = drop_reason_t.BAD_MAGIC;
    } else if (hdr.kvp.ver != KVP_VERSION) {
        meta.drop_reason = drop_reason_t.BAD_VERSION;
    } else if (!known_op) {
        meta.drop_reason = drop_reason_t.UNKNOWN_OP;
    } else if (has_value && !hdr.kvp_value.isValid()) {
        meta.drop_reason = drop_reason_t.NO_VALUE;
    } else if (needs_value && !has_value) {
        meta.drop_reason = drop_reason_t.NO_VALUE;
    } else if (hdr.kvp.chunk_count == 0
               || hdr.kvp.chunk_idx >= hdr.kvp.chunk_count) {
        meta.drop_reason = drop_reason_t.BAD_CHUNK;
    } else if (hdr.kvp.value_len > KVP_VALUE_LEN) {
        meta.drop_reason = drop_reason_t.BAD_VALUE_LEN;
    } else {
        meta.kvp_ok = true;
    }
}
