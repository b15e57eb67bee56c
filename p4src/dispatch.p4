/* -*- P4_16 -*- */
/*
 * kvswitch: what the switch does with a packet, decided once
 * (docs/dataplane.md, "Pipeline").
 *
 * From what the packet asks (Classify) and what the index says of its
 * key (Index), the packet takes ONE path, and the store at most one
 * operation; the steps after this one act on the path:
 *
 *   PACKET_OUT  the controller's packet-out: out of the port it names
 *   SLOT_OP     the controller's SLOT_WRITE / SLOT_READ: the store
 *               executes it (a slot out of range: BAD_SLOT, not
 *               executed) and the reply goes back to the controller
 *   DROP        not IPv4, a SLOT_* from a port, a controller-only
 *               opcode from a host: dropped, counted by `refusal`
 *   LOOKUP      LOOKUP_META of an indexed key: the store peeks at the
 *               slot and the switch answers (steer_answer.p4)
 *   PUNT        INSERT, LOOKUP_META of another key: for the controller
 *   INVALIDATE  another switch's INVALIDATE: bounds the slot (if
 *               indexed), relayed on through the fabric, dropped
 *   POOL        everything else: the store serves, fills, invalidates or
 *               bounds; what it does not answer is forwarded
 *
 * Reads: the KVP header (opcode, aux), kvp_ok, request_t, index_t.
 * Writes: dispatch_t.
 */

control Dispatch(in kvp_h kvp, in bool kvp_ok, in request_t req,
                 in index_t index, out dispatch_t dispatch) {
    apply {
        dispatch.store = false;
        dispatch.store_op = store_op_t.POOL;
        dispatch.refusal = drop_reason_t.NONE;
        if (req.from_cpu && !req.slot_op) {
            dispatch.path = path_t.PACKET_OUT;
        } else if (req.from_cpu) {
            dispatch.path = path_t.SLOT_OP;
            if (kvp_ok && kvp.aux >= SLOT_COUNT) {
                dispatch.refusal = drop_reason_t.BAD_SLOT;
            } else if (req.slot_write) {
                dispatch.store = true;
                dispatch.store_op = store_op_t.SLOT_WRITE;
            } else if (kvp_ok && kvp.opcode == kvp_opcode_t.SLOT_READ) {
                dispatch.store = true;
                dispatch.store_op = store_op_t.SLOT_READ;
            }
        } else if (!req.routable) {
            dispatch.path = path_t.DROP;
            dispatch.refusal = drop_reason_t.NOT_IPV4;
        } else if (kvp_ok && req.slot_op) {
            /* only the controller may touch slots */
            dispatch.path = path_t.DROP;
            dispatch.refusal = drop_reason_t.SLOT_OP_NOT_FROM_CPU;
        } else if (req.refused) {
            dispatch.path = path_t.DROP;
            dispatch.refusal = drop_reason_t.CONTROL_OP_FROM_HOST;
        } else if (req.lookup && index.hit) {
            dispatch.path = path_t.LOOKUP;
            dispatch.store = true;
            dispatch.store_op = store_op_t.PEEK;
        } else if (req.punt) {
            dispatch.path = path_t.PUNT;
        } else if (req.invalidate) {
            dispatch.path = path_t.INVALIDATE;
            dispatch.store = index.hit;
            dispatch.store_op = store_op_t.BOUND;
        } else {
            dispatch.path = path_t.POOL;
            dispatch.store = true;
            dispatch.store_op = store_op_t.POOL;
        }
    }
}
