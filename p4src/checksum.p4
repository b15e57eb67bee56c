/* -*- P4_16 -*- */
/*
 * kvswitch: checksum controls.
 *
 * IPv4 header checksums are not verified on the way in (a bad one would be
 * the end host's business) and are recomputed on the way out, since
 * forwarding changes the TTL and replies change addresses and lengths.
 * UDP checksums are 0 in packets the switch builds (docs/protocol.md).
 */

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            {
                hdr.ipv4.version,
                hdr.ipv4.ihl,
                hdr.ipv4.diffserv,
                hdr.ipv4.total_len,
                hdr.ipv4.identification,
                hdr.ipv4.flags,
                hdr.ipv4.frag_offset,
                hdr.ipv4.ttl,
                hdr.ipv4.protocol,
                hdr.ipv4.src_addr,
                hdr.ipv4.dst_addr
            },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}
