/* -*- P4_16 -*- */
/*
 * kvswitch: an in-network memory pool for LLM KV-cache blocks (v1model).
 *
 * The switch keeps hot KV-cache block chunks in register arrays and
 * answers GETs for them itself, lets readers of one chunk share one GET
 * (coalescing), spreads one pool address over several storage nodes
 * (steering), keeps the pool coherent across a fabric and marks replies
 * behind a long queue; everything else is IPv4-forwarded.
 * docs/dataplane.md explains the pipeline, docs/naming.md lists every
 * name the controller uses, docs/protocol.md the KVP wire format.
 *
 * Layout: one file per step.  Validate, PortRole, Classify, Index,
 * SteerChoice, Store, Sketch, Forward and Coalesce are controls of
 * their own (each file says what the step reads and writes),
 * instantiated in MyIngress, whose apply block orders them; small
 * structs carry what crosses steps (request_t, index_t, store_t,
 * steer_t, coalesce_t).  What follows a steering choice (steer.p4) is
 * still actions included inside MyIngress.  Every
 * table, action, register and counter keeps its P4Info name
 * MyIngress.<name> (@name), docs/naming.md.  Egress (egress.p4) turns
 * fabric clones into INVALIDATEs, makes the coalescing copies and sets
 * the congestion mark (congestion.p4).
 */

#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "validate.p4"
#include "parser.p4"
#include "checksum.p4"
#include "port_role.p4"
#include "classify.p4"
#include "index.p4"
#include "forward.p4"
#include "sketch.p4"
#include "store.p4"
#include "steer_choice.p4"
#include "coalesce.p4"

/* ==================================================================== *
 *  Ingress                                                              *
 * ==================================================================== */

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {

#include "counters.p4"
#include "punt.p4"
#include "steer.p4"               /* one pool address, several storage nodes */

    Validate() validate;
    PortRole() port_role;
    Classify() classify;
    Index() index;
    Store() store;
    Sketch() sketch;
    Forward() forward;
    SteerChoice() steer_choice;
    Coalesce() coalesce;

    apply {
        /* ---- request coalescing (coalesce.p4): a reply recirculated to   */
        /* serve its next batch of waiters; nothing else applies to it      */
        if (meta.coal.carry) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.CARRY, meta.coal);
            return;
        }

        /* ---- what it is, who sent it, what it asks ---- */
        validate.apply(hdr, meta.kvp_seen, meta.kvp_magic, meta.kvp_ver,
                       meta.kvp_ok, meta.drop_reason, drop_reason);
        if (!hdr.packet_out.isValid()) {
            port_role.apply(std_meta.ingress_port, meta.port_role);
        }
        classify.apply(hdr, meta.kvp_ok, meta.port_role, meta.req,
                       drop_reason);
        kvp_opcode_t op = hdr.kvp.opcode;

        /* ---- index (once on every path: BMv2 needs one successor) ---- */
        meta.index.slot = hdr.kvp.aux;
        if (meta.req.slot_write || meta.req.get || meta.req.fill
            || meta.req.put || meta.req.ack || meta.req.invalidate
            || meta.req.lookup) {
            index.apply(hdr.kvp, meta.index);
        }
        /* ---- request coalescing's configuration (coalesce.p4), applied */
        /* once: the INVALIDATE branch and the call site below use it, and */
        /* both need a well-formed KVP message (no cost for other traffic) */
        if (meta.kvp_ok) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.CONFIG, meta.coal);
        }

        /* ---- steering (steer_choice.p4): which node, whose name ---- */
        steer_choice.apply(hdr, meta.req, meta.kvp_ok, meta.port_role,
                           meta.steer);

        if (meta.req.from_cpu) {
            /* ---- from the controller ---- */
            if (!meta.req.slot_op) {
                send_packet_out();
            } else {
                meta.store.slot_status = kvp_status_t.ERR_MALFORMED;
                if (meta.kvp_ok && hdr.kvp.aux >= SLOT_COUNT) {
                    count_drop(drop_reason_t.BAD_SLOT);
                } else if (meta.req.slot_write) {
                    store.apply(hdr, std_meta, store_op_t.SLOT_WRITE, meta.req,
                                meta.index, meta.store, drop_reason, kvp_events);
                } else if (meta.kvp_ok && op == kvp_opcode_t.SLOT_READ) {
                    store.apply(hdr, std_meta, store_op_t.SLOT_READ, meta.req,
                                meta.index, meta.store, drop_reason, kvp_events);
                }
                if (op == kvp_opcode_t.SLOT_WRITE) {
                    slot_reply(kvp_opcode_t.SLOT_WRITE_ACK);
                } else {
                    slot_reply(kvp_opcode_t.SLOT_READ_REPLY);
                }
            }
        } else if (!hdr.ipv4.isValid()) {
            drop_packet(drop_reason_t.NOT_IPV4);
        } else if (meta.kvp_ok && meta.req.slot_op) {
            /* only the controller may touch slots */
            drop_packet(drop_reason_t.SLOT_OP_NOT_FROM_CPU);
        } else if (meta.req.refused) {
            drop_packet(drop_reason_t.CONTROL_OP_FROM_HOST);
        } else if (meta.req.lookup && meta.index.hit) {
            /* ---- steering (steer.p4): answered here ---- */
            store.apply(hdr, std_meta, store_op_t.PEEK, meta.req,
                        meta.index, meta.store, drop_reason, kvp_events);
            answer_lookup_meta();
        } else if (meta.req.punt) {
            /* ---- for the controller ---- */
            punt(punt_reason_t.CLIENT_OP);
            count_event(kvp_event_t.PUNT);
        } else if (meta.req.invalidate) {
            /* ---- from another switch (trusted: checked above) ---- */
            if (meta.index.hit) {
                store.apply(hdr, std_meta, store_op_t.BOUND, meta.req,
                            meta.index, meta.store, drop_reason, kvp_events);
            }
            /* a GET pending here may be answered with the value before   */
            /* the write: nobody may join it any more (coalesce.p4)       */
            coalesce.apply(hdr, std_meta, coalesce_op_t.INVALIDATE, meta.coal);
            count_event(kvp_event_t.FABRIC_INVALIDATE);
            /* relayed while aux > 0; cloned always, so egress's stream */
            /* join sees it (egress drops the copies of an aux-0 one)    */
            meta.clone_ingress_port = std_meta.ingress_port;
            clone_preserving_field_list(CloneType.I2E,
                FABRIC_INVALIDATE_SESSION, FABRIC_CLONE_FIELDS);
            mark_to_drop(std_meta);
        } else {
            meta.forward = true;
            /* ---- store: serve, fill, invalidate, bound ---- */
            store.apply(hdr, std_meta, store_op_t.POOL, meta.req,
                        meta.index, meta.store, drop_reason, kvp_events);
            if (meta.store.served) {
                meta.forward = false;
            }
            if (meta.req.ack && meta.port_role == port_role_t.STORAGE) {
                /* the ack's first switch tells the rest of the fabric */
                meta.clone_ingress_port = std_meta.ingress_port;
                clone_preserving_field_list(CloneType.I2E,
                    FABRIC_INVALIDATE_SESSION, FABRIC_CLONE_FIELDS);
            }

            /* ---- steering (steer.p4): the bucket's node is down:   */
            /* answered here (a switch hit above still served)        */
            if (meta.forward && meta.steer.unavailable) {
                answer_unavailable();
                meta.forward = false;
            }

            /* ---- hot-key detection on misses of chunks a slot can  */
            /* serve (a larger chunk is never admitted: not counted)  */
            if (meta.req.get && !meta.store.served
                && hdr.kvp.chunk_shift == KVP_SLOT_SHIFT) {
                sketch.apply(hdr.kvp, kvp_events);
            }
        }

        /* ---- plain IPv4 forwarding ---- */
        if (meta.forward) {
            if (hdr.ipv4.ttl <= 1) {
                drop_packet(drop_reason_t.TTL_EXPIRED);
            } else {
                /* the sender's MAC, before routing rewrites it */
                coalesce.apply(hdr, std_meta, coalesce_op_t.NOTE_SENDER,
                               meta.coal);
                if (meta.steer.steered) {
                    steer_forward();     /* steer.p4: to its node */
                } else {
                    forward.apply(hdr.ethernet, hdr.ipv4, std_meta, drop_reason);
                }
                steer_name();        /* steer.p4: the pool's name */
            }
        }

        /* ---- request coalescing (coalesce.p4): after routing, so a GET  */
        /* knows its port towards the storage node and a reply its reader's */
        if (meta.kvp_ok && meta.forward
            && std_meta.egress_spec != BMV2_DROP_PORT) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.ROUTED, meta.coal);
        }
        /* ---- steering (steer.p4): the node's address, after     */
        /* coalescing keyed the request by the pool's               */
        if (meta.forward) {
            steer_finish();
        }
    }
}

#include "egress.p4"
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
