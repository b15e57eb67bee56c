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
 * Layout: one file per step, each a control that declares what it reads
 * and writes.  MyIngress (below) instantiates them and applies them in
 * order:
 *
 *   Validate       validate.p4        is it KVP, is it well-formed
 *   PortRole       port_role.p4       who sent it (the trust boundary)
 *   Classify       classify.p4        what it asks (request_t)
 *   Index          index.p4           the chunk key's slot (index_t)
 *   Coalesce       coalesce.p4        readers of one chunk share one GET
 *   SteerChoice    steer_choice.p4    which storage node (steer_t)
 *   Dispatch       dispatch.p4        which path, which store operation
 *   Store          store.p4           serve, fill, invalidate, bound
 *   FromController from_controller.p4 packet-out, SLOT_* replies
 *   FromPort       from_port.p4       drop, answer, relay, forward or not
 *                                     (SteerAnswer, Sketch, OverSlot
 *                                     inside)
 *   Punt           punt.p4            to the controller
 *   Route          route.p4           towards the node or by ipv4_lpm,
 *                                     and after coalescing the node's
 *                                     address (Forward, Steer inside)
 *
 * Small structs carry what crosses steps (request_t, index_t, dispatch_t,
 * store_t, steer_t, coalesce_t; include/headers.p4).  Every table,
 * action, register and counter keeps its P4Info name MyIngress.<name>
 * (@name), docs/naming.md.  Egress (egress.p4) turns fabric clones into
 * INVALIDATEs, makes the coalescing copies and sets the congestion mark
 * (congestion.p4).
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
#include "over_slot.p4"
#include "store.p4"
#include "steer_choice.p4"
#include "steer.p4"
#include "steer_answer.p4"
#include "coalesce.p4"
#include "punt.p4"
#include "dispatch.p4"
#include "from_controller.p4"
#include "from_port.p4"
#include "route.p4"

/* ==================================================================== *
 *  Ingress                                                              *
 * ==================================================================== */

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t std_meta) {

    /* Packets refused, dropped or passed on as plain UDP, by drop_reason_t. */
    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) drop_reason;
    /* What the KVP pipeline did, by kvp_event_t.                           */
    counter(KVP_EVENT_COUNT, CounterType.packets_and_bytes) kvp_events;
    /* What steering did, by steer_event_t.                                 */
    counter(STEER_EVENT_COUNT, CounterType.packets_and_bytes) steer_events;

    Validate() validate;
    PortRole() port_role;
    Classify() classify;
    Index() index;
    Store() store;
    SteerChoice() steer_choice;
    Coalesce() coalesce;
    Dispatch() dispatch;
    FromController() from_controller;
    FromPort() from_port;
    Punt() punt;
    Route() route;

    apply {
        /* a reply recirculated to serve its next batch of waiters        */
        /* (coalesce.p4): routed and counted on its first pass already    */
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

        /* ---- what the switch knows: the key's slot, coalescing's */
        /* configuration (a well-formed KVP message), the key's node */
        index.apply(hdr.kvp, meta.req, meta.index);
        if (meta.kvp_ok) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.CONFIG, meta.coal);
        }
        steer_choice.apply(hdr, meta.req, meta.kvp_ok, meta.port_role,
                           meta.steer);

        /* ---- what the switch does with it ---- */
        dispatch.apply(hdr.kvp, meta.kvp_ok, meta.req, meta.index,
                       meta.dispatch);
        if (meta.dispatch.store) {
            store.apply(hdr, std_meta, meta.dispatch.store_op, meta.req,
                        meta.index, meta.store, drop_reason, kvp_events);
        }
        if (meta.dispatch.path == path_t.INVALIDATE) {
            /* a GET pending here may be answered with the value before */
            /* the write: nobody may join it any more                    */
            coalesce.apply(hdr, std_meta, coalesce_op_t.INVALIDATE, meta.coal);
        }
        if (meta.req.from_cpu) {
            from_controller.apply(hdr, std_meta, meta.dispatch,
                                  meta.store.slot_status, drop_reason,
                                  kvp_events);
        } else {
            from_port.apply(hdr, std_meta, meta.dispatch, meta.req,
                            meta.port_role, meta.index, meta.store, meta.steer,
                            meta.forward, meta.clone_ingress_port,
                            drop_reason, kvp_events, steer_events);
        }
        punt.apply(hdr, std_meta, meta.dispatch.path);

        /* ---- where it goes: coalescing needs the sender's MAC before */
        /* routing rewrites it, and the port routing chose after; the   */
        /* node's address goes in once coalescing keyed the request by  */
        /* the pool's                                                   */
        if (meta.forward) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.NOTE_SENDER, meta.coal);
            route.apply(hdr, std_meta, route_step_t.OUT, meta.steer,
                        drop_reason, steer_events);
        }
        if (meta.kvp_ok && meta.forward
            && std_meta.egress_spec != BMV2_DROP_PORT) {
            coalesce.apply(hdr, std_meta, coalesce_op_t.ROUTED, meta.coal);
        }
        if (meta.forward) {
            route.apply(hdr, std_meta, route_step_t.NODE_ADDRESS, meta.steer,
                        drop_reason, steer_events);
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
