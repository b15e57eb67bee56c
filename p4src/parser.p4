/* -*- P4_16 -*- */
/*
 * kvswitch: parser.
 *
 *   [packet_out] -> ethernet -> ipv4 (no options, not a fragment) -> udp
 *     -> kvp (port 7420 either way; magic and ver 2, read first)
 *     -> kvp_value (F_VALUE and a slot-sized chunk, 1 << KVP_SLOT_SHIFT)
 *
 * The magic and version are looked at before kvp_h is extracted, so a
 * message of another version (a v1 header is 36 bytes) is recognised as
 * BAD_VERSION instead of SHORT; chunks larger than a slot stay payload:
 * they are forwarded and coalesced, never stored.
 *
 * A parser error (a short KVP header or value) does not drop the packet on
 * BMv2: it reaches ingress with parser_error set and the headers extracted
 * so far; ingress classifies it (validate.p4) and forwards it as plain UDP.
 */

parser MyParser(packet_in packet,
                out headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t std_meta) {

    state start {
        transition select(std_meta.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* KVP only in unfragmented IPv4 without options. */
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.ihl,
                          hdr.ipv4.protocol) {
            (0, 5, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        /* Requests go to port 7420, replies come from it. */
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (KVP_UDP_PORT, _): parse_kvp;
            (_, KVP_UDP_PORT): parse_kvp;
            default: accept;
        }
    }

    state parse_kvp {
        /* 3 bytes: magic and ver (fewer: PacketTooShort, kvp_seen false) */
        bit<24> head = packet.lookahead<bit<24>>();
        meta.kvp_seen = true;
        meta.kvp_magic = head[23:8];
        meta.kvp_ver = head[7:0];
        transition select(head[23:8], head[7:0]) {
            (KVP_MAGIC, KVP_VERSION): parse_kvp_header;
            default: accept;
        }
    }

    state parse_kvp_header {
        packet.extract(hdr.kvp);
        /* The value is parsed only when it fits a slot. */
        transition select(hdr.kvp.flags, hdr.kvp.chunk_shift) {
            (F_VALUE &&& F_VALUE, KVP_SLOT_SHIFT): parse_kvp_value;
            default: accept;
        }
    }

    state parse_kvp_value {
        packet.extract(hdr.kvp_value);
        transition accept;
    }
}
