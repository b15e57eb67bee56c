/* -*- P4_16 -*- */
/*
 * kvswitch: parser.
 *
 *   [packet_out] -> ethernet -> ipv4 (no options, not a fragment) -> udp
 *     -> kvp (port 7420 either way) -> kvp_value (magic ok and F_VALUE)
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
        packet.extract(hdr.kvp);
        /* The value follows only in real KVP messages that say so. */
        transition select(hdr.kvp.magic, hdr.kvp.flags) {
            (KVP_MAGIC, F_VALUE &&& F_VALUE): parse_kvp_value;
            default: accept;
        }
    }

    state parse_kvp_value {
        packet.extract(hdr.kvp_value);
        transition accept;
    }
}
