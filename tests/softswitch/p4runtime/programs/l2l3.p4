/* l2l3.p4: the P4Runtime interop tests' program (softswitch tests only; the project's P4 is in p4src/).
 *
 * L2 forwarding by destination MAC with learning digests for unknown source MACs, L3 forwarding by
 * longest-prefix match on the IPv4 destination, multicast by MAC, and a CPU port for packet-in/out.
 */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;      // the switch's --cpu-port; nothing magic, BMv2 examples use 255 too
const bit<16> ETHERTYPE_IPV4 = 0x0800;

// ---- headers ---------------------------------------------------------------------------------------------

@controller_header("packet_out")
header packet_out_h {
    bit<9> egress_port;           // port the controller wants the frame sent from
    bit<7> _pad;                  // to a whole byte
}

@controller_header("packet_in")
header packet_in_h {
    bit<9> ingress_port;          // port the frame arrived on
    bit<7> _pad;
}

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;                  // in 32-bit words
    bit<8>  diffserv;
    bit<16> total_len;            // in bytes, including this header
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

struct learn_t {
    bit<48> src_mac;              // the unknown source MAC
    bit<9>  ingress_port;         // where it was seen
}

struct headers_t {
    packet_out_h packet_out;
    packet_in_h  packet_in;
    ethernet_h   ethernet;
    ipv4_h       ipv4;
}

struct metadata_t {
    learn_t learn;
}

// ---- parser ----------------------------------------------------------------------------------------------

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
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
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

// ---- ingress ---------------------------------------------------------------------------------------------

control MyIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;      // indexed by ingress port
    direct_counter(CounterType.packets_and_bytes) route_hits;
    register<bit<8>>(512) last_ttl;                           // last IPv4 TTL seen per ingress port

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action learn() {
        meta.learn.src_mac = hdr.ethernet.src_addr;
        meta.learn.ingress_port = standard_metadata.ingress_port;
        digest<learn_t>(1, meta.learn);
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }
    action route(bit<48> dmac, bit<9> port) {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        standard_metadata.egress_spec = port;
    }

    table smac {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        size = 1024;
    }
    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; to_cpu; drop; }
        default_action = drop();
        size = 1024;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { route; drop; NoAction; }
        default_action = NoAction();
        counters = route_hits;
        size = 65536;
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        smac.apply();
        if (hdr.ipv4.isValid()) {
            last_ttl.write((bit<32>)standard_metadata.ingress_port, hdr.ipv4.ttl);
            if (ipv4_lpm.apply().hit) {
                return;
            }
        }
        dmac.apply();
    }
}

// ---- egress ----------------------------------------------------------------------------------------------

control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

// ---- deparser --------------------------------------------------------------------------------------------

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
