/* -*- P4_16 -*- */
/*
 * kvswitch: an in-network memory pool for LLM KV-cache blocks (v1model).
 *
 * The switch keeps hot KV-cache block chunks in register arrays and
 * answers GETs for them itself; everything else is IPv4-forwarded.
 * docs/dataplane.md explains the pipeline, docs/naming.md lists every
 * name the controller uses, docs/protocol.md the KVP wire format.
 *
 * Layout: one file per pipeline feature.  The ingress features (counters,
 * validate, forward, index, store, sketch, punt) declare their state,
 * actions and tables inside control MyIngress, so that P4Info names them
 * MyIngress.<name>; the apply block below sequences them.
 */

#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "parser.p4"
#include "checksum.p4"

/* ==================================================================== *
 *  Ingress                                                              *
 * ==================================================================== */

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {

#include "counters.p4"
#include "validate.p4"
#include "forward.p4"
#include "index.p4"
#include "store.p4"
#include "sketch.p4"
#include "punt.p4"
#include "coalesce.p4"            /* request coalescing (docs/dataplane.md) */

    apply {
        validate_kvp();
        if (meta.drop_reason != drop_reason_t.NONE) {
            count_drop(meta.drop_reason);
        }
        bool is_slot_op = hdr.kvp.isValid()
            && hdr.kvp.magic == KVP_MAGIC
            && (hdr.kvp.opcode == kvp_opcode_t.SLOT_WRITE
                || hdr.kvp.opcode == kvp_opcode_t.SLOT_READ);
        bool bypass = (hdr.kvp.flags & F_BYPASS) != 0;

        if (hdr.packet_out.isValid()) {
            /* ---- from the controller ---- */
            if (!is_slot_op) {
                send_packet_out();
            } else {
                meta.slot = hdr.kvp.aux;
                meta.slot_status = kvp_status_t.ERR_MALFORMED;
                if (meta.kvp_ok && hdr.kvp.aux >= SLOT_COUNT) {
                    count_drop(drop_reason_t.BAD_SLOT);
                } else if (meta.kvp_ok
                           && hdr.kvp.opcode == kvp_opcode_t.SLOT_WRITE) {
                    check_value();
                    write_slot();
                    count_event(kvp_event_t.SLOT_WRITE);
                } else if (meta.kvp_ok) {
                    read_slot();
                    count_event(kvp_event_t.SLOT_READ);
                }
                if (hdr.kvp.opcode == kvp_opcode_t.SLOT_WRITE) {
                    slot_reply(kvp_opcode_t.SLOT_WRITE_ACK);
                } else {
                    slot_reply(kvp_opcode_t.SLOT_READ_REPLY);
                }
            }
        } else if (!hdr.ipv4.isValid()) {
            drop_packet(drop_reason_t.NOT_IPV4);
        } else if (meta.kvp_ok && is_slot_op) {
            /* only the controller may touch slots */
            drop_packet(drop_reason_t.SLOT_OP_NOT_FROM_CPU);
        } else if (meta.kvp_ok
                   && (hdr.kvp.opcode == kvp_opcode_t.INSERT
                       || hdr.kvp.opcode == kvp_opcode_t.LOOKUP_META)) {
            /* ---- for the controller ---- */
            punt(punt_reason_t.CLIENT_OP);
            count_event(kvp_event_t.PUNT);
        } else {
            meta.forward = true;
            bool is_get = meta.kvp_ok && !bypass
                && hdr.kvp.opcode == kvp_opcode_t.GET;
            /* Fill from any reply that carries a value: a storage node's, or  */
            /* an upstream switch's (so in a fabric the readers' own leaf can   */
            /* cache the block, not only the storage node's leaf).  The CRC and */
            /* version checks of check_value / fill_slot apply to both.         */
            bool is_fill = meta.kvp_ok && !bypass
                && hdr.kvp.opcode == kvp_opcode_t.GET_REPLY
                && (hdr.kvp.status == kvp_status_t.HIT_SERVER
                    || hdr.kvp.status == kvp_status_t.HIT_SWITCH)
                && hdr.kvp_value.isValid();
            bool is_put = meta.kvp_ok
                && hdr.kvp.opcode == kvp_opcode_t.PUT;

            /* ---- index and store ---- */
            if (is_get || is_fill || is_put) {
                kv_index.apply();
            }
            if (is_get && meta.indexed) {
                serve_slot();
            }
            if (meta.served) {
                build_get_reply();
                count_event(kvp_event_t.GET_HIT);
                meta.forward = false;
            } else if (is_get) {
                count_event(kvp_event_t.GET_MISS);
            }
            if (is_fill && meta.indexed) {
                check_value();
                fill_slot();
                if (meta.filled) {
                    count_event(kvp_event_t.FILL);
                }
            }
            if (is_put && meta.indexed) {
                invalidate_slot();
                count_event(kvp_event_t.PUT_INVALIDATE);
            }

            /* ---- hot-key detection on misses ---- */
            if (is_get && !meta.served) {
                sketch_config.apply();
                if (meta.epoch != 0) {
                    sketch_update();
                    if (meta.estimate >= meta.hot_threshold) {
                        bloom_test_and_set();
                        if (!meta.already_reported) {
                            report_hot_key();
                        }
                    }
                }
            }
        }

        /* ---- plain IPv4 forwarding ---- */
        if (meta.forward) {
            if (hdr.ipv4.ttl <= 1) {
                drop_packet(drop_reason_t.TTL_EXPIRED);
            } else {
                coalesce_note_sender();  /* coalesce.p4: before ipv4_lpm */
                ipv4_lpm.apply();        /* rewrites the source MAC      */
            }
        }

        /* ---- request coalescing (coalesce.p4): after routing, so a GET  */
        /* knows its port towards the storage node and a reply its reader's */
        if (meta.kvp_ok && meta.forward
            && std_meta.egress_spec != BMV2_DROP_PORT) {
            coalesce_config.apply();
            coalesce();
        }
    }
}

/* ==================================================================== *
 *  Egress                                                               *
 * ==================================================================== */

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t std_meta) {

#include "coalesce_egress.p4"     /* request coalescing: per-waiter copies */

    apply {
        /* ---- request coalescing: one copy per parked reader ---- */
        if (meta.coal_replicate
            && std_meta.instance_type == PKT_INSTANCE_TYPE_REPLICATION) {
            coalesce_copy();
        }
    }
}

#include "deparser.p4"

/* ==================================================================== *
 *  Switch                                                               *
 * ==================================================================== */

V1Switch(MyParser(),
         MyVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         MyComputeChecksum(),
         MyDeparser()) main;
