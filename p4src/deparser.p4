/* -*- P4_16 -*- */
/*
 * kvswitch: deparser.  Emits only valid headers, in wire order; whatever
 * the parser did not extract follows unchanged.
 */

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.kvp);
        packet.emit(hdr.kvp_value);
    }
}
