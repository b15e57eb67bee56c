/* -*- P4_16 -*- */
/*
 * kvswitch: KVP validity rules and opcode classes (top-level functions:
 * everything they read is a parameter).
 *
 * docs/protocol.md, "Validity rules".  kvp_check names the reason a UDP
 * datagram on port 7420 is not a well-formed KVP message (the caller
 * decides which datagrams are KVP: port 7420 either way), checked in
 * kvpool.wire.check's order (length, magic, version, opcode, value,
 * chunk, value_len), so both name the same reason.  Malformed messages
 * never reach the index, store, sketch or punt: they are forwarded as
 * plain UDP.
 */

/* An opcode of docs/protocol.md (or the switches' own INVALIDATE). */
bool is_known_opcode(in kvp_opcode_t op) {
    return op == kvp_opcode_t.GET || op == kvp_opcode_t.GET_REPLY
        || op == kvp_opcode_t.PUT || op == kvp_opcode_t.PUT_ACK
        || op == kvp_opcode_t.INSERT || op == kvp_opcode_t.INSERT_ACK
        || op == kvp_opcode_t.LOOKUP_META
        || op == kvp_opcode_t.LOOKUP_META_REPLY
        || op == kvp_opcode_t.SLOT_WRITE || op == kvp_opcode_t.SLOT_WRITE_ACK
        || op == kvp_opcode_t.SLOT_READ || op == kvp_opcode_t.SLOT_READ_REPLY
        || op == kvp_opcode_t.TIER_MOVE || op == kvp_opcode_t.TIER_MOVE_ACK
        || op == kvp_opcode_t.STAT || op == kvp_opcode_t.STAT_REPLY
        || op == kvp_opcode_t.INVALIDATE;
}

/* Opcodes whose message carries a value chunk (F_VALUE required). */
bool needs_value(in kvp_opcode_t op) {
    return op == kvp_opcode_t.PUT || op == kvp_opcode_t.SLOT_WRITE;
}

/* Answers to a request: what a host could forge to plant or bound a     */
/* value.  From a HOST port they are forwarded marked F_BYPASS.           */
bool is_reply(in kvp_opcode_t op) {
    return op == kvp_opcode_t.GET_REPLY || op == kvp_opcode_t.PUT_ACK
        || op == kvp_opcode_t.INSERT_ACK
        || op == kvp_opcode_t.LOOKUP_META_REPLY
        || op == kvp_opcode_t.STAT_REPLY;
}

/* Sent only by the controller, the switch or between storage node and   */
/* controller: never legitimately by a host (dropped from HOST ports).   */
/* TIER_MOVE_ACK is here too: a forged one would mislead the controller  */
/* about where a chunk lives.                                             */
bool is_controller_only(in kvp_opcode_t op) {
    return op == kvp_opcode_t.SLOT_WRITE || op == kvp_opcode_t.SLOT_WRITE_ACK
        || op == kvp_opcode_t.SLOT_READ || op == kvp_opcode_t.SLOT_READ_REPLY
        || op == kvp_opcode_t.TIER_MOVE || op == kvp_opcode_t.TIER_MOVE_ACK
        || op == kvp_opcode_t.INVALIDATE;
}

/* May fill a slot or bound its version: a storage node or another switch. */
bool is_trusted(in port_role_t role) {
    return role == port_role_t.STORAGE || role == port_role_t.FABRIC;
}

/* Payload bytes of a chunk of 1 << shift bytes (shift in 7 .. 13).      */
bit<16> chunk_bytes(in bit<8> shift) {
    return (bit<16>)1 << shift;
}

/* Why a UDP datagram on port 7420 is not a well-formed KVP message, or  */
/* NONE when it is one.  The parameters are the fields the rules read:   */
/* `seen`, `magic`, `ver` from the parser's look at the first 3 bytes;   */
/* `kvp_valid`, `value_valid`: the parser extracted kvp_h, kvp_value_h   */
/* (the latter only for slot-sized chunks); `udp_len` the UDP length,    */
/* which tells whether a larger chunk's payload is all there.            */
drop_reason_t kvp_check(in bool seen, in bit<16> magic, in bit<8> ver,
                        in bool kvp_valid, in kvp_opcode_t opcode,
                        in bit<8> flags, in bit<8> chunk_shift,
                        in bool value_valid, in bit<16> udp_len,
                        in chunk_index_t chunk_idx,
                        in chunk_index_t chunk_count, in bit<16> value_len) {
    bool has_value = (flags & F_VALUE) != 0;
    drop_reason_t reason = drop_reason_t.NONE;
    if (!seen) {
        reason = drop_reason_t.SHORT;
    } else if (magic != KVP_MAGIC) {
        reason = drop_reason_t.BAD_MAGIC;
    } else if (ver != KVP_VERSION) {
        reason = drop_reason_t.BAD_VERSION;
    } else if (!kvp_valid) {
        reason = drop_reason_t.SHORT;
    } else if (!is_known_opcode(opcode)) {
        reason = drop_reason_t.UNKNOWN_OP;
    } else if (chunk_shift < KVP_MIN_CHUNK_SHIFT
               || chunk_shift > KVP_MAX_CHUNK_SHIFT) {
        reason = drop_reason_t.BAD_CHUNK_SIZE;
    } else if (has_value && chunk_shift == KVP_SLOT_SHIFT && !value_valid) {
        reason = drop_reason_t.NO_VALUE;
    } else if (has_value && chunk_shift != KVP_SLOT_SHIFT
               && udp_len < UDP_HEADER_LEN + KVP_HEADER_LEN
                            + chunk_bytes(chunk_shift)) {
        reason = drop_reason_t.NO_VALUE;
    } else if (needs_value(opcode) && !has_value) {
        reason = drop_reason_t.NO_VALUE;
    } else if (chunk_count == 0 || chunk_idx >= chunk_count) {
        reason = drop_reason_t.BAD_CHUNK;
    } else if (value_len > chunk_bytes(chunk_shift)) {
        reason = drop_reason_t.BAD_VALUE_LEN;
    }
    return reason;
}

/* ---- the Validate step --------------------------------------------- */
/*
 * Which UDP datagrams are KVP (port 7420 either way) and whether each is
 * well-formed.  Reads: the headers and what the parser saw of the first
 * 3 bytes (`peek_*`).  Writes: kvp_ok, the reason when not (counted in
 * `drops`).
 */
control Validate(in headers_t hdr,
                 in bool peek_seen, in bit<16> peek_magic, in bit<8> peek_ver,
                 out bool kvp_ok, out drop_reason_t reason,
                 counter drops) {
    apply {
        bool kvp_port = hdr.udp.isValid()
            && (hdr.udp.dst_port == KVP_UDP_PORT
                || hdr.udp.src_port == KVP_UDP_PORT);
        reason = drop_reason_t.NONE;
        if (kvp_port) {
            reason = kvp_check(
                peek_seen, peek_magic, peek_ver,
                hdr.kvp.isValid(), hdr.kvp.opcode, hdr.kvp.flags,
                hdr.kvp.chunk_shift, hdr.kvp_value.isValid(), hdr.udp.len,
                hdr.kvp.chunk_idx, hdr.kvp.chunk_count, hdr.kvp.value_len);
        }
        kvp_ok = kvp_port && reason == drop_reason_t.NONE;
        if (reason != drop_reason_t.NONE) {
            drops.count((bit<32>)(bit<8>)reason);
        }
    }
}
