/* -*- P4_16 -*- */
/*
 * kvswitch: what a packet asks of the switch (docs/dataplane.md,
 * "Pipeline"), decided once from its opcode, its validity and who sent
 * it (the trust boundary, port_role.p4), so later steps test one flag.
 *
 * Reads: the headers, kvp_ok (Validate), the sender's role (PortRole).
 * Writes: request_t (over_slot: a trusted reply's chunk is larger than a
 * slot); a host's reply leaves marked F_BYPASS (no switch on
 * its way may store it or be bounded by it), counted REPLY_FROM_HOST;
 * F_PUSHED from anything but a FABRIC port is cleared (stream.p4).
 */

control Classify(inout headers_t hdr, in bool kvp_ok, in port_role_t sender,
                 out request_t req, counter drops) {
    apply {
        kvp_opcode_t op = hdr.kvp.opcode;
        req.from_cpu = hdr.packet_out.isValid();
        /* SLOT_WRITE / SLOT_READ (even malformed: the controller gets */
        /* its ERR_MALFORMED answer)                                    */
        req.slot_op = hdr.kvp.isValid()
            && (op == kvp_opcode_t.SLOT_WRITE || op == kvp_opcode_t.SLOT_READ);
        req.trusted = is_trusted(sender);
        req.routable = !req.from_cpu && hdr.ipv4.isValid();
        req.refused = kvp_ok
            && (req.slot_op || (!req.trusted && is_controller_only(op)));
        req.punt = kvp_ok
            && (op == kvp_opcode_t.INSERT || op == kvp_opcode_t.LOOKUP_META);
        req.invalidate = req.routable && !req.refused && kvp_ok
            && op == kvp_opcode_t.INVALIDATE;
        req.pool_op = req.routable && !req.refused && !req.punt
            && !req.invalidate;
        if (req.pool_op && kvp_ok && !req.trusted && is_reply(op)) {
            /* a host's reply: delivered, but no switch on its way may */
            /* store it or be bounded by it                             */
            hdr.kvp.flags = hdr.kvp.flags | F_BYPASS;
            hdr.udp.checksum = 0;
            drops.count((bit<32>)(bit<8>)drop_reason_t.REPLY_FROM_HOST);
        }

        if (hdr.kvp.isValid() && sender != port_role_t.FABRIC
            && (hdr.kvp.flags & F_PUSHED) != 0) {
            /* only a switch pushes (stream.p4): a host's or a storage */
            /* node's F_PUSHED is cleared, well-formed or not           */
            hdr.kvp.flags = hdr.kvp.flags & ~F_PUSHED;
            hdr.udp.checksum = 0;
        }
        bool bypass = (hdr.kvp.flags & F_BYPASS) != 0;
        /* a slot holds one slot-sized chunk: a larger one is malformed */
        req.slot_write = req.from_cpu && kvp_ok
            && op == kvp_opcode_t.SLOT_WRITE && hdr.kvp.aux < SLOT_COUNT
            && hdr.kvp_value.isValid();
        req.get = req.pool_op && kvp_ok && !bypass && op == kvp_opcode_t.GET;
        /* A value from a storage node's reply or an upstream switch's   */
        /* (so in a fabric the readers' own leaf can cache the block too) */
        bool trusted_hit = req.pool_op && kvp_ok && !bypass && req.trusted
            && op == kvp_opcode_t.GET_REPLY
            && (hdr.kvp.status == kvp_status_t.HIT_SERVER
                || hdr.kvp.status == kvp_status_t.HIT_SWITCH)
            && (hdr.kvp.flags & F_VALUE) != 0;
        /* fills when slot-sized (parsed as kvp_value); check_value /    */
        /* fill_slot check CRC and version                               */
        req.fill = trusted_hit && hdr.kvp_value.isValid();
        /* a larger chunk never fills: the controller hears of it when   */
        /* the key is indexed (over_slot.p4)                             */
        req.over_slot = trusted_hit && hdr.kvp.chunk_shift != KVP_SLOT_SHIFT;
        /* A PUT invalidates even with F_BYPASS: bypass means "do not    */
        /* answer or fill", never "skip coherence".                      */
        req.put = req.pool_op && kvp_ok && op == kvp_opcode_t.PUT;
        /* A commit acknowledged by a storage node (or relayed by an     */
        /* upstream switch) bounds the key's versions.                   */
        req.ack = req.pool_op && kvp_ok && !bypass && req.trusted
            && op == kvp_opcode_t.PUT_ACK
            && hdr.kvp.status == kvp_status_t.OK;
        /* LOOKUP_META of an indexed key is answered by the data plane   */
        /* (steer.p4), so it is looked up too                            */
        req.lookup = req.punt && op == kvp_opcode_t.LOOKUP_META;
    }
}
