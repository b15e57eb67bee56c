/* -*- P4_16 -*- */
/*
 * kvswitch: a packet that came in on a port -- from a host, a storage
 * node or another switch (docs/dataplane.md, "Pipeline").  The store has
 * already acted on it (dispatch.p4 chose the operation); this step does
 * the rest of its path:
 *
 *   DROP        dropped, counted by the refusal's reason
 *   LOOKUP      answered from the index and the store's peek (SteerAnswer)
 *   PUNT        counted PUNT (Punt, next, sends it to the controller)
 *   INVALIDATE  counted, relayed to the other switches while its aux
 *               (relays left) is > 0 (an ingress-to-egress clone that
 *               egress.p4 turns into INVALIDATEs), then dropped
 *   POOL        forwarded unless the store served it; a storage node's
 *               PUT_ACK OK tells the rest of the fabric (the same clone);
 *               a request whose node is down is answered (SteerAnswer);
 *               a GET miss of a slot-sized chunk feeds hot-key detection
 *               (Sketch: a larger chunk is never admitted, not counted),
 *               which reports a hot key only at a trusted slot-sized
 *               reply of it (a chunk no slot can hold never has one);
 *               a trusted reply of an indexed key whose chunk is larger
 *               than a slot is reported to the controller (OverSlot)
 *
 * Reads: dispatch_t, request_t, the sender's role, index_t, store_t,
 * steer_t.  Writes: the headers (answers), egress_spec, `forward` (the
 * packet leaves by Route), `clone_ingress_port` (kept by fabric clones:
 * egress never sends an INVALIDATE back where it came from); counts in
 * `drops`, `events`, `steer_events`.
 */

control FromPort(inout headers_t hdr, inout standard_metadata_t std_meta,
                 in dispatch_t dispatch, in request_t req,
                 in port_role_t sender, in index_t index, in store_t store,
                 in steer_t steer, out bool forward,
                 inout bit<9> clone_ingress_port,
                 counter drops, counter events, counter steer_events) {
    SteerAnswer() steer_answer;
    Sketch() sketch;
    OverSlot() over_slot;

    @name(".MyIngress.count_event")
    action count_event(in kvp_event_t event) {
        events.count((bit<32>)(bit<8>)event);
    }

    /* Drop the packet, counting why. */
    @name(".MyIngress.drop_packet")
    action drop_packet(in drop_reason_t reason) {
        mark_to_drop(std_meta);
        drops.count((bit<32>)(bit<8>)reason);
    }

    apply {
        forward = false;
        if (dispatch.path == path_t.DROP) {
            drop_packet(dispatch.refusal);
        } else if (dispatch.path == path_t.LOOKUP) {
            steer_answer.apply(hdr, std_meta, steer, index, store, steer_events);
        } else if (dispatch.path == path_t.PUNT) {
            /* Punt sends it to the controller */
            count_event(kvp_event_t.PUNT);
        } else if (dispatch.path == path_t.INVALIDATE) {
            count_event(kvp_event_t.FABRIC_INVALIDATE);
            /* a copy for every other switch (clone session              */
            /* FABRIC_INVALIDATE_SESSION; egress.p4 makes each an        */
            /* INVALIDATE while aux > 0), cloned always so egress's      */
            /* stream join (stream.p4) sees even the last hop's; egress  */
            /* drops the copies of an aux-0 one                          */
            clone_ingress_port = std_meta.ingress_port;
            clone_preserving_field_list(CloneType.I2E,
                FABRIC_INVALIDATE_SESSION, FABRIC_CLONE_FIELDS);
            mark_to_drop(std_meta);
        } else if (dispatch.path == path_t.POOL) {
            forward = !store.served;
            if (req.ack && sender == port_role_t.STORAGE) {
                /* the ack's first switch tells the rest of the fabric */
                clone_ingress_port = std_meta.ingress_port;
                clone_preserving_field_list(CloneType.I2E,
                    FABRIC_INVALIDATE_SESSION, FABRIC_CLONE_FIELDS);
            }
            if (forward && steer.unavailable) {
                /* the bucket's node is down: answered here (a switch */
                /* hit above still served)                             */
                steer_answer.apply(hdr, std_meta, steer, index, store,
                                   steer_events);
                forward = false;
            }
            /* a GET miss of a slot-sized chunk counts; the key is */
            /* reported at a trusted slot-sized reply (applied once: */
            /* a control's tables may not be applied twice)          */
            bool counted_miss = req.get && !store.served
                && hdr.kvp.chunk_shift == KVP_SLOT_SHIFT;
            if (counted_miss || req.fill) {
                sketch.apply(hdr.kvp, req.fill, events);
            }
            if (req.over_slot && index.hit) {
                /* an admitted key whose chunks no slot can hold */
                over_slot.apply(hdr.kvp, index, events);
            }
        }
    }
}
