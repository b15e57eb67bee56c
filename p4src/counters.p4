/* -*- P4_16 -*- */
/*
 * kvswitch: pipeline-wide counters (included inside control MyIngress).
 *
 * Both are indirect counters the controller reads over P4Runtime; their
 * indices are the values of drop_reason_t and kvp_event_t.
 */

/* Packets refused, dropped or passed on as plain UDP, by reason.        */
counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) drop_reason;

/* What the KVP pipeline did, by kvp_event_t.                            */
counter(KVP_EVENT_COUNT, CounterType.packets_and_bytes) kvp_events;

action count_drop(in drop_reason_t reason) {
    drop_reason.count((bit<32>)(bit<8>)reason);
}

action count_event(in kvp_event_t event) {
    kvp_events.count((bit<32>)(bit<8>)event);
}

/* Drop the packet, counting why. */
action drop_packet(in drop_reason_t reason) {
    mark_to_drop(std_meta);
    count_drop(reason);
}
