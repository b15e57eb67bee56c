/* -*- P4_16 -*- */
/*
 * kvswitch: egress -- coalescing copies, stream pushes, fabric
 * invalidations, the congestion mark.
 *
 * Request coalescing's multicast copies become their waiters' replies
 * (coalesce_egress.p4).  The stream join (stream.p4; docs/dataplane.md,
 * "Stream join") sees every routed GET on its way to a storage node and
 * every reply on its way to its reader: it opens and joins streams and
 * pushes the origin's replies to the subscribers, one egress-to-egress
 * clone per subscriber.
 *
 * The only egress work is on ingress-to-egress clones to
 * FABRIC_INVALIDATE_SESSION (the switch's FABRIC ports).  Such a clone
 * carries the packet as it entered ingress: either a storage node's
 * PUT_ACK OK (this switch originates the invalidation) or an INVALIDATE
 * from the fabric (this switch relays it).  Each copy becomes an
 * INVALIDATE with one relay fewer; the copy back out of the port the
 * packet came in on is dropped.  Then every KVP reply gets the
 * congestion mark if its port's queue is long (congestion.p4).
 */

#include "congestion.p4"
#include "stream.p4"

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t std_meta) {

#include "coalesce_egress.p4"     /* request coalescing: per-waiter copies */

    CongestionMark() congestion;
    Stream() stream;

    /* PUT_ACK -> INVALIDATE with FABRIC_INVALIDATE_HOPS relays left;    */
    /* INVALIDATE -> one relay fewer.  The key and version stay; the UDP */
    /* checksum is 0 (not used) since the header changed.                */
    action make_invalidate() {
        if (hdr.kvp.opcode == kvp_opcode_t.INVALIDATE) {
            hdr.kvp.aux = hdr.kvp.aux - 1;
        } else {
            hdr.kvp.opcode = kvp_opcode_t.INVALIDATE;
            hdr.kvp.aux = FABRIC_INVALIDATE_HOPS;
        }
        hdr.udp.checksum = 0;
    }

    apply {
        /* ---- request coalescing: one copy per parked reader ---- */
        if (meta.coal.replicate
            && std_meta.instance_type == PKT_INSTANCE_TYPE_REPLICATION) {
            coalesce_copy();
        }
        /* ---- the stream join: open, join, push, end (stream.p4); a    */
        /* reply's node is the steered member's own address, not the     */
        /* pool's name the reply leaves in (steer.p4)                    */
        meta.stream.reply_node = hdr.ipv4.src_addr;
        if (meta.steer.member_reply) {
            meta.stream.reply_node = meta.steer.peer;
        }
        stream.apply(hdr, std_meta, meta.coal.sender_mac, meta.stream);
        /* ---- fabric invalidations: the copy back out of its own port, */
        /* and an INVALIDATE with no relays left (cloned only so the      */
        /* stream join sees it), are dropped                              */
        if ((bit<32>)std_meta.instance_type == PKT_INSTANCE_TYPE_INGRESS_CLONE
            && hdr.kvp.isValid()) {
            if (std_meta.egress_port == meta.clone_ingress_port
                || (hdr.kvp.opcode == kvp_opcode_t.INVALIDATE
                    && hdr.kvp.aux == 0)) {
                mark_to_drop(std_meta);
            } else {
                make_invalidate();
            }
        }
        /* ---- the congestion mark, on the copy as it leaves ---- */
        congestion.apply(hdr.kvp, hdr.udp, std_meta.enq_qdepth);
    }
}
