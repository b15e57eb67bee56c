"""Small v1model programs for the front-end tests: a skeleton with slots for the parts a test varies.

`$E` marks where a test expects an error: `locate()` removes the marker and returns its (line, col).
"""

from __future__ import annotations

from string import Template

SKELETON = Template("""\
#include <core.p4>
#include <v1model.p4>
header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}
$types
struct headers_t {
    ethernet_h eth;
$headers
}
struct metadata_t {
    bit<8> a;
    bit<16> b;
    bit<32> c;
$meta
}
parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
$parser_locals
    state start {
        packet.extract(hdr.eth);
$start
    }
$states
}
control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
$ingress
    apply {
$apply
    }
}
control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
$egress
    apply {
$egress_apply
    }
}
control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.eth);
$deparser
    }
}
$top
V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
""")

DEFAULTS = {
    "types": "", "headers": "", "meta": "", "parser_locals": "", "start": "        transition accept;",
    "states": "", "ingress": "", "apply": "", "egress": "", "egress_apply": "", "deparser": "", "top": "",
}


def program(**parts: str) -> str:
    """The skeleton with some parts replaced (keys of DEFAULTS)."""
    unknown = set(parts) - set(DEFAULTS)
    assert not unknown, unknown
    return SKELETON.substitute({**DEFAULTS, **parts})


def locate(text: str, marker: str = "$E") -> tuple[str, int, int]:
    """Remove `marker` from `text`; return the text and the marker's 1-based (line, col)."""
    pos = text.index(marker)
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return text.replace(marker, "", 1), line, col
