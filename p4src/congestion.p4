/* -*- P4_16 -*- */
/*
 * kvswitch: the congestion mark (docs/dataplane.md, "Congestion mark").
 *
 * A KVP reply that finds CONGESTED_QDEPTH or more packets queued ahead
 * of it on its egress port (enq_qdepth: the traffic manager's queue
 * towards its receiver, in packets) leaves with F_CONGESTED set, as a
 * DCTCP switch sets CE; the reader cuts its window (docs/protocol.md).
 * The threshold is a keyless table's default action parameter, so the
 * controller may tune it per switch without a new program; nobody has
 * to: the default is the constant.
 *
 * Reads: the KVP header, standard_metadata.enq_qdepth.
 * Writes: hdr.kvp.flags (F_CONGESTED), hdr.udp.checksum (0: not used,
 * the header changed).
 */

control CongestionMark(inout kvp_h kvp,
                       inout udp_h udp,
                       in bit<19> enq_qdepth) {
    bit<19> threshold = CONGESTED_QDEPTH;

    @name(".MyEgress.set_congestion_threshold")
    action set_congestion_threshold(bit<19> qdepth) {
        threshold = qdepth;
    }

    @name(".MyEgress.congestion_config")
    table congestion_config {
        actions = { set_congestion_threshold; }
        default_action = set_congestion_threshold(CONGESTED_QDEPTH);
        size = 1;
    }

    apply {
        if (kvp.isValid() && is_reply(kvp.opcode)) {
            congestion_config.apply();
            if (enq_qdepth >= threshold) {
                kvp.flags = kvp.flags | F_CONGESTED;
                udp.checksum = 0;
            }
        }
    }
}
