/* -*- P4_16 -*- */
/*
 * kvswitch: header and metadata types.
 *
 * Wire layouts of Ethernet, IPv4, UDP and the KVP headers (docs/protocol.md),
 * the controller headers (packet_in / packet_out), the digest struct and the
 * per-packet metadata.  Field names match kvpool/protocol.py.
 */
#ifndef KVSWITCH_HEADERS_P4
#define KVSWITCH_HEADERS_P4

#include "constants.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

/* ==================================================================== *
 *  Controller headers                                                   *
 * ==================================================================== */

/* Prepended to every packet the switch sends to CPU_PORT.              */
@controller_header("packet_in")
header packet_in_h {
    bit<16> ingress_port;   /* port the packet came in on (0..510)       */
    bit<8> reason;          /* why it was punted: punt_reason_t value    */
    bit<8> pad;             /* zero; keeps the header whole bytes        */
}

/* Prepended by the controller to every packet it injects (CPU_PORT).   */
@controller_header("packet_out")
header packet_out_h {
    bit<16> egress_port;    /* port to send the packet out of; ignored   */
                            /* for SLOT_WRITE / SLOT_READ (answered to   */
                            /* the CPU port)                             */
    bit<16> pad;            /* zero                                      */
}

/* ==================================================================== *
 *  L2 / L3 / L4                                                         *
 * ==================================================================== */

header ethernet_h {
    mac_addr_t dst_addr;    /* destination MAC                           */
    mac_addr_t src_addr;    /* source MAC                                */
    bit<16> ether_type;     /* 0x0800 = IPv4                             */
}

header ipv4_h {
    bit<4> version;         /* 4                                         */
    bit<4> ihl;             /* header length in 32-bit words; 5 = no     */
                            /* options (the only case KVP is parsed in)  */
    bit<8> diffserv;        /* DSCP + ECN                                */
    bit<16> total_len;      /* in bytes, IPv4 header + payload           */
    bit<16> identification; /* fragment group id                         */
    bit<3> flags;           /* reserved, DF, MF                          */
    bit<13> frag_offset;    /* in 8-byte units                           */
    bit<8> ttl;             /* hops left                                 */
    bit<8> protocol;        /* 17 = UDP                                  */
    bit<16> hdr_checksum;   /* ones'-complement sum of the header        */
    ipv4_addr_t src_addr;   /* source address                            */
    ipv4_addr_t dst_addr;   /* destination address                       */
}

header udp_h {
    bit<16> src_port;       /* source port                               */
    bit<16> dst_port;       /* destination port; 7420 = KVP request      */
    bit<16> len;            /* in bytes, UDP header + payload            */
    bit<16> checksum;       /* 0 = not used (in packets the switch       */
                            /* builds)                                   */
}

/* ==================================================================== *
 *  KVP (docs/protocol.md)                                               *
 * ==================================================================== */

/* The fixed KVP header, 44 bytes (protocol version 2; 4-byte aligned). */
header kvp_h {
    bit<16> magic;          /* 0x4B56 ("KV")                             */
    bit<8> ver;             /* protocol version, 2                       */
    kvp_opcode_t opcode;    /* what the message is                       */
    kvp_status_t status;    /* outcome in replies, OK in requests        */
    bit<8> flags;           /* F_VALUE | F_BYPASS | F_PIN                */
    bit<16> tenant;         /* tenant id, part of the block key          */
    bit<32> req_id;         /* echoed in the reply                       */
    bit<64> prefix_hash;    /* chained hash of the block and its prefix  */
    chunk_index_t chunk_idx;   /* chunk within the block, < chunk_count  */
    chunk_index_t chunk_count; /* chunks in the block, >= 1              */
    bit<16> value_len;      /* in bytes, meaningful bytes of the value   */
                            /* chunk (<= 1 << chunk_shift)               */
    bit<8> chunk_shift;     /* log2 of the chunk's payload bytes, 7..13  */
                            /* (128 B .. 8 KiB); the value that follows  */
                            /* is exactly 1 << chunk_shift bytes         */
    bit<8> reserved;        /* zero; keeps the next field aligned        */
    bit<32> version;        /* version of the block's value; 0 = any     */
    bit<32> value_csum;     /* CRC-32 (zlib) of the value bytes (padding */
                            /* included)                                 */
    bit<32> aux;            /* opcode-specific; slot index for SLOT_*    */
}

/* The value chunk of a slot-sized chunk (chunk_shift = KVP_SLOT_SHIFT), */
/* KVP_VALUE_BYTES (128) bytes; parsed iff flags & F_VALUE and the chunk */
/* is slot-sized.  One field: the store keeps it in one register.        */
header kvp_value_h {
    value_t value;  /* the chunk's bytes, big-endian (byte 0 first)     */
}

struct headers_t {
    packet_out_h packet_out;  /* only on packets from CPU_PORT           */
    packet_in_h packet_in;    /* only on packets to CPU_PORT             */
    ethernet_h ethernet;
    ipv4_h ipv4;
    udp_h udp;
    kvp_h kvp;
    kvp_value_h kvp_value;
}

/* ==================================================================== *
 *  Digest                                                               *
 * ==================================================================== */

/* Sent once per epoch for a key whose estimated GET-miss count reached */
/* the controller's threshold (P4Info digest name "hot_key_digest_t"). */
struct hot_key_digest_t {
    bit<16> tenant;         /* block key: tenant                         */
    bit<64> prefix_hash;    /* block key: prefix hash                    */
    chunk_index_t chunk_idx; /* block key: chunk                         */
    bit<32> estimate;       /* count-min estimate of GET misses this     */
                            /* epoch, in packets                         */
}

/* ==================================================================== *
 *  Coalescing                                                           *
 * ==================================================================== */

/* One reader parked on a pending GET (coalesce.p4): where its copy of  */
/* the reply goes and what it must carry.                                */
struct coalesce_waiter_t {
    ipv4_addr_t ip;         /* the reader's address (its GET's source)   */
    bit<16> udp_port;       /* its GET's UDP source port                 */
    bit<32> req_id;         /* its GET's request id                      */
    mac_addr_t mac;         /* its GET's source MAC (next hop back)      */
    bit<16> port;           /* switch port its GET came in on            */
}

/* ==================================================================== *
 *  Per-packet metadata                                                  *
 * ==================================================================== */

/* What the pool index (index.p4) says about the packet's key: crosses  */
/* from Index to Store and Steer.                                       */
struct index_t {
    bool hit;                   /* kv_index has the key                  */
    bit<32> slot;               /* slot of the key, as a register index  */
                                /* (a SLOT_* op's kvp.aux before lookup) */
    bit<32> min_version;        /* lowest servable version (entry param) */
    bit<32> generation;         /* admission of the key to the slot      */
                                /* (entry param); a slot filled under    */
                                /* another one is empty for this entry   */
}

/* What the packet asks of the switch (classify.p4): crosses from      */
/* Classify to every later step.                                        */
struct request_t {
    bool from_cpu;    /* a packet-out from the controller              */
    bool slot_op;     /* SLOT_WRITE / SLOT_READ (even malformed)       */
    bool trusted;     /* from a STORAGE or FABRIC port                 */
    bool routable;    /* IPv4 from a port (not the CPU)                */
    bool refused;     /* a controller-only opcode from a host or port  */
    bool punt;        /* INSERT / LOOKUP_META: the controller's        */
    bool invalidate;  /* another switch's INVALIDATE                   */
    bool pool_op;     /* what the pool may act on (neither of those)   */
    bool slot_write;  /* the controller's SLOT_WRITE of a valid slot   */
    bool get;         /* a GET the pool may answer (no F_BYPASS)       */
    bool fill;        /* a trusted GET_REPLY with a value: may fill    */
    bool put;         /* a PUT: invalidates (even with F_BYPASS)       */
    bool ack;         /* a trusted PUT_ACK OK: bounds versions         */
    bool lookup;      /* LOOKUP_META: answered here when indexed       */
    bool over_slot;   /* a trusted GET_REPLY hit whose value chunk is  */
                      /* larger than a slot: it can never fill one     */
                      /* (over_slot.p4)                                */
}

/* Request coalescing's own per-packet state (coalesce.p4,            */
/* coalesce_egress.p4), with what a carried pass keeps.                 */
struct coalesce_t {
    bit<32> epoch;              /* coalesce_config: current epoch; 0 = off */
    bit<48> timeout;            /* coalesce_config: entry lifetime, in us */
    bit<16> mcast_group;        /* coalesce_config: group of the copies  */
    mac_addr_t sender_mac;      /* source MAC as received (before lpm)   */
    bool replicate;             /* this reply is multicast to waiters    */
    bit<8> waiters;             /* waiters in this batch (copies rid 1..n) */
    bool more;                  /* waiters beyond this batch: carry on   */
    bool parked;                /* this GET resends a parked waiter's    */
    bit<9> origin_port;         /* the reply's own route (copy rid 0)    */
    bit<32> parked_cell;        /* coalesce_parked cell of this GET      */
    coalesce_waiter_t w0;       /* waiter i = copy with egress_rid i+1   */
    coalesce_waiter_t w1;
    coalesce_waiter_t w2;
    coalesce_waiter_t w3;
    coalesce_waiter_t w4;
    coalesce_waiter_t w5;
    coalesce_waiter_t w6;
    coalesce_waiter_t w7;
    /* Kept by the recirculated carry copy (COALESCE_CARRY_FIELDS): which */
    /* entry's waiters it serves next.                                    */
    @field_list(2)
    bool carry;                 /* a carried pass: serve the next batch  */
    @field_list(2)
    bit<32> index;              /* pending entry of the key              */
    @field_list(2)
    bit<32> gen;                /* generation of the entry replied to    */
    @field_list(2)
    bit<8> total;               /* waiters of that entry                 */
    @field_list(2)
    bit<8> next;                /* first waiter of this batch            */
    @field_list(2)
    bit<16> carry_group;        /* multicast group of the copies         */
    @field_list(2)
    bit<16> port_group_base;    /* coalesce_config: per-port groups      */
                                /* at base + port; 0 = none              */
}

/* The stream join's own per-packet state (stream.p4, in egress), with  */
/* what a push chain's egress clone keeps (STREAM_CHAIN_FIELDS): the     */
/* member this copy is for and where the chain goes on.                 */
struct stream_t {
    bit<32> epoch;              /* stream_config: current epoch; 0 = off */
    bit<48> idle;               /* stream_config: idle lifetime, in us   */
    bool towards_storage;       /* stream_storage_port: the GET leaves   */
                                /* towards a storage node               */
    bit<32> index;              /* the block's stream cell               */
    ipv4_addr_t reply_node;     /* a reply's storage node: its source, or */
                                /* the steered member's own address     */
    @field_list(3)
    bool chain;                 /* a push copy (egress clone of a reply) */
    @field_list(3)
    bit<32> cell;               /* stream the chain serves               */
    @field_list(3)
    bit<32> gen;                /* ... and its generation                */
    @field_list(3)
    bit<8> next;                /* member cell after this copy's         */
    @field_list(3)
    bit<8> total;               /* members when the reply passed         */
    @field_list(3)
    bit<8> flags;               /* the reply's flags, F_PUSHED set       */
    @field_list(3)
    ipv4_addr_t ip;             /* this copy's subscriber: IPv4 address, */
    @field_list(3)
    bit<16> udp_port;           /* UDP port,                             */
    @field_list(3)
    mac_addr_t mac;             /* MAC (its GET's source MAC),           */
    @field_list(3)
    bit<16> port;               /* switch port its GET came in on        */
    @field_list(3)
    bit<48> skip;               /* the reply's addressee (IPv4 ++ UDP    */
                                /* port): the chain steps over its cell  */
}

/* Steering's own per-packet state: one pool address, several storage */
/* nodes (steer_choice.p4 writes it; steer.p4, steer_answer.p4 read it). */
struct steer_t {
    bool on;                    /* steer_config: a pool is configured    */
    ipv4_addr_t pool_addr;      /* steer_config: the pool address        */
    bool request;               /* a request to the pool: steered        */
    bit<32> bucket;             /* its bucket (hash of tenant, prefix)   */
    bool steered;               /* steer_bucket chose a live node        */
    bool unavailable;           /* ... or the bucket has none            */
    bit<8> node;                /* the node id steer_bucket chose        */
    ipv4_addr_t node_addr;      /* that node's data address              */
    mac_addr_t node_mac;        /* its MAC (next hop: the node itself)   */
    bit<9> node_port;           /* the port towards it                   */
    ipv4_addr_t peer;           /* pool_member key: a reply's source or  */
                                /* a request's destination               */
    bool member;                /* peer is one of the pool's nodes       */
    bit<8> member_node;         /* ... with this node id                 */
    bool member_request;        /* request already steered upstream      */
    bool member_reply;          /* a member's reply: leaves in the pool's name */
}

/* What the store (store.p4) tells later steps. */
struct store_t {
    bool served;                /* GET answered from the slot            */
    bool filled;                /* GET_REPLY written into the slot       */
    kvp_status_t slot_status;   /* outcome of a SLOT_* operation         */
    bool servable;              /* PEEK: the slot's value may be served  */
    bit<32> version;            /* PEEK: the slot's version              */
}

/* Which path a packet takes through the ingress (dispatch.p4).        */
/* Internal: the controller never sees these values.                   */
enum bit<8> path_t {
    PACKET_OUT = 0,   /* the controller's packet-out                    */
    SLOT_OP    = 1,   /* the controller's SLOT_WRITE / SLOT_READ        */
    DROP       = 2,   /* refused: dropped, counted by `refusal`         */
    LOOKUP     = 3,   /* LOOKUP_META of an indexed key: answered here   */
    PUNT       = 4,   /* for the controller                             */
    INVALIDATE = 5,   /* another switch's INVALIDATE                    */
    POOL       = 6    /* served, filled, bounded or forwarded           */
}

/* What the switch does with the packet (dispatch.p4): crosses from    */
/* Dispatch to Store and to the step that acts on the path             */
/* (FromController or FromPort).                                        */
struct dispatch_t {
    path_t path;                /* which path                            */
    bool store;                 /* the store acts on the packet ...      */
    store_op_t store_op;        /* ... with this operation               */
    drop_reason_t refusal;      /* DROP, or a SLOT_OP's bad slot: why    */
}

struct metadata_t {
    /* validation */
    bool kvp_seen;              /* parser read magic and ver (>= 3 bytes) */
    bit<16> kvp_magic;          /* the first 16 bits of the UDP payload  */
    bit<8> kvp_ver;             /* its `ver` byte (kvp_h is extracted    */
                                /* only when magic and ver are ours)     */
    bool kvp_ok;                /* KVP header valid and well-formed      */
    drop_reason_t drop_reason;  /* why not (NONE when kvp_ok)            */
    request_t req;              /* what it asks (classify.p4)            */
    dispatch_t dispatch;        /* what the switch does (dispatch.p4)    */
    bool forward;               /* leaves by Route (route.p4)            */

    /* trust */
    port_role_t port_role;      /* of the ingress port (table port_role) */
    /* Kept in fabric clones (field list FABRIC_CLONE_FIELDS, the only one */
    /* a clone needs; v1model resets standard_metadata in a clone): the    */
    /* port an INVALIDATE came in on, so egress never sends it back.       */
    @field_list(1)
    bit<9> clone_ingress_port;

    /* index (index.p4 writes it; store, steering read it) */
    index_t index;

    store_t store;              /* the store's answer (store.p4)         */

    coalesce_t coal;            /* request coalescing (coalesce.p4)      */
    steer_t steer;              /* steering (steer_choice.p4)            */
    stream_t stream;            /* the stream join (stream.p4, egress)   */
}

/* ==================================================================== *
 *  Over-slot replies (over_slot.p4)                                     *
 * ==================================================================== */

/* Sent for every trusted reply of an indexed key whose chunk is larger */
/* than a slot (P4Info digest name "over_slot_digest_t"): the slot can  */
/* never be filled, the controller drops the admission.                 */
struct over_slot_digest_t {
    bit<16> tenant;         /* block key: tenant                         */
    bit<64> prefix_hash;    /* block key: prefix hash                    */
    chunk_index_t chunk_idx; /* block key: chunk                         */
    bit<8> chunk_shift;     /* log2 of the reply's chunk size in bytes   */
                            /* (!= KVP_SLOT_SHIFT)                       */
    bit<32> generation;     /* the admission of the key's index entry    */
}

#endif  /* KVSWITCH_HEADERS_P4 */
