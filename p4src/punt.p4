/* -*- P4_16 -*- */
/*
 * kvswitch: a packet for the controller (docs/dataplane.md, "Pipeline").
 *
 * The packet leaves through CPU_PORT with a packet_in header saying where
 * it came in and why (punt_reason_t): an INSERT or a LOOKUP_META the data
 * plane does not answer (path PUNT: CLIENT_OP), or the reply to the
 * controller's own SLOT_WRITE / SLOT_READ (path SLOT_OP: SLOT_REPLY,
 * built by FromController).  Other paths are not this step's.
 *
 * Reads: the ingress port, the path (dispatch.p4).  Writes: packet_in
 * (valid), packet_out (invalid), egress_spec.
 */

control Punt(inout headers_t hdr, inout standard_metadata_t std_meta,
             in path_t path) {

    /* Send to CPU_PORT with a packet_in header. */
    @name(".MyIngress.punt")
    action punt(in punt_reason_t reason) {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)std_meta.ingress_port;
        hdr.packet_in.reason = (bit<8>)reason;
        hdr.packet_in.pad = 0;
        hdr.packet_out.setInvalid();
        std_meta.egress_spec = CPU_PORT;
    }

    apply {
        if (path == path_t.PUNT) {
            punt(punt_reason_t.CLIENT_OP);
        } else if (path == path_t.SLOT_OP) {
            punt(punt_reason_t.SLOT_REPLY);
        }
    }
}
