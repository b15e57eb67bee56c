/* -*- P4_16 -*- */
/*
 * kvswitch: constants and codes shared by every part of the pipeline.
 *
 * Sizes derive from one width constant each (resizing is a one-line change).
 * Codes the controller reads are serializable enums; docs/naming.md lists
 * their values and docs/protocol.md the wire meaning of the KVP ones.
 */
#ifndef KVSWITCH_CONSTANTS_P4
#define KVSWITCH_CONSTANTS_P4

/* ==================================================================== *
 *  Sizes                                                                *
 * ==================================================================== */

/* Slots in the switch pool = 1 << SLOT_INDEX_WIDTH (1,024: fast on the */
/* Python target; BMv2 takes 4,096 × 16 × bit<64> as well).            */
#define SLOT_INDEX_WIDTH 10
const bit<32> SLOT_COUNT = 32w1 << SLOT_INDEX_WIDTH;
typedef bit<SLOT_INDEX_WIDTH> slot_index_t;

/* Width of kvp_h.chunk_idx and chunk_count (protocol v2): a 256 MiB  */
/* block at 1 KiB per packet is 262,144 chunks.                         */
#define CHUNK_INDEX_WIDTH 32
typedef bit<CHUNK_INDEX_WIDTH> chunk_index_t;

/* Cells per count-min row = 1 << SKETCH_INDEX_WIDTH.                   */
#define SKETCH_INDEX_WIDTH 10
const bit<32> SKETCH_CELLS = 32w1 << SKETCH_INDEX_WIDTH;

/* Cells of the hot-key Bloom filter = 1 << BLOOM_INDEX_WIDTH.          */
#define BLOOM_INDEX_WIDTH 12
const bit<32> BLOOM_CELLS = 32w1 << BLOOM_INDEX_WIDTH;

/* Bytes of one value chunk (kvp_value_h, one slot): the one constant  */
/* the value's width, the wire length and the IPv4/UDP lengths of       */
/* replies derive from.                                                 */
#define KVP_VALUE_BYTES 128
typedef bit<(KVP_VALUE_BYTES * 8)> value_t;

/* Size of the drop_reason and kvp_events counters (≥ largest code+1). */
const bit<32> DROP_REASON_COUNT = 32;
const bit<32> KVP_EVENT_COUNT = 32;

/* ==================================================================== *
 *  Ports, protocol numbers                                              *
 * ==================================================================== */

/* CPU port: BMv2 is started with --cpu-port 255; the softswitch uses   */
/* the same number.  255 is the p4lang tutorials' choice, nothing magic. */
const bit<9> CPU_PORT = 255;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IP_PROTO_UDP = 17;
/* TTL of the replies the switch builds itself (Linux's default).       */
const bit<8> REPLY_TTL = 64;

/* ==================================================================== *
 *  KVP wire protocol (docs/protocol.md)                                 *
 * ==================================================================== */

/* UDP port of requests (source port of replies): outside Linux's       */
/* ephemeral range 32768-60999, so it never collides with a client port. */
const bit<16> KVP_UDP_PORT = 7420;
const bit<16> KVP_MAGIC = 0x4B56;      /* "KV" */
const bit<8> KVP_VERSION = 2;

/* Bytes of kvp_h and of kvp_value_h (one slot's value).                */
const bit<16> KVP_HEADER_LEN = 44;
const bit<16> KVP_VALUE_LEN = KVP_VALUE_BYTES;
/* Payload bytes per packet of a block = 1 << kvp_h.chunk_shift, one of */
/* 128 B .. 8 KiB (7 .. 13).  Only chunks of the slot's size            */
/* (KVP_SLOT_SHIFT: 1 << 7 = KVP_VALUE_BYTES) are parsed as a            */
/* kvp_value_h and may be stored; larger ones are forwarded (and        */
/* coalesced) with their payload unparsed.                              */
const bit<8> KVP_MIN_CHUNK_SHIFT = 7;
const bit<8> KVP_MAX_CHUNK_SHIFT = 13;
const bit<8> KVP_SLOT_SHIFT = 7;
/* Most chunks one GET may ask for (its aux, the span; 0 and 1: one).   */
/* The switch never answers a GET of span > 1 from its pool.             */
const bit<32> KVP_MAX_GET_SPAN = 16;
/* Header bytes in front of KVP: IPv4 without options, UDP.             */
const bit<16> IPV4_HEADER_LEN = 20;
const bit<16> UDP_HEADER_LEN = 8;

/* flags bits the switch acts on (0x04, F_PIN, is the controller's:     */
/* an INSERT's pin request, punted unchanged; docs/protocol.md).        */
const bit<8> F_VALUE = 0x01;   /* a kvp_value_h follows                 */
const bit<8> F_BYPASS = 0x02;  /* the switch must not answer or fill    */
const bit<8> F_CONGESTED = 0x08; /* egress queue over threshold (CE)    */
const bit<8> F_STREAM = 0x10;  /* GET: the reader takes pushed chunks   */
const bit<8> F_PUSHED = 0x20;  /* GET_REPLY: a stream copy, not asked   */

/* What the ingress asks of the store (store.p4): the request's own     */
/* operation (POOL), or a fabric INVALIDATE's bound, the controller's   */
/* SLOT_WRITE / SLOT_READ, a LOOKUP_META's look at the slot (PEEK).      */
/* Internal: the controller never sees these values.                   */
/* What the ingress asks of request coalescing (coalesce.p4): serve a   */
/* carried pass's next batch, read the configuration, release the key   */
/* for a fabric INVALIDATE, note the sender's MAC before routing, or    */
/* act on a routed GET / GET_REPLY / PUT / PUT_ACK.  Internal.           */
enum bit<8> coalesce_op_t {
    CARRY       = 0,
    CONFIG      = 1,
    INVALIDATE  = 2,
    NOTE_SENDER = 3,
    ROUTED      = 4
}

enum bit<8> store_op_t {
    POOL       = 0,
    BOUND      = 1,
    SLOT_WRITE = 2,
    SLOT_READ  = 3,
    PEEK       = 4
}

/* The congestion mark (congestion.p4; docs/dataplane.md, "Congestion  */
/* mark"): a KVP reply that finds at least this many packets queued    */
/* ahead of it on its egress port (standard_metadata.enq_qdepth, in    */
/* packets) leaves with F_CONGESTED.  32 packets: about DCTCP's K for  */
/* a 1-10 Gb/s port (0.17 x the bandwidth-delay product), and half of  */
/* BMv2's default 64-packet egress queue, so the mark comes before     */
/* tail drop.  The controller may set another value in                */
/* MyEgress.congestion_config.                                          */
const bit<19> CONGESTED_QDEPTH = 32;

/* Fabric invalidation (docs/dataplane.md, "Fabric coherence").  The    */
/* clone session the controller configures with the switch's FABRIC    */
/* ports; without it (one switch, no fabric) the clone is a no-op.     */
/* 1: the first session id; the program uses no other.                 */
const bit<32> FABRIC_INVALIDATE_SESSION = 1;
/* Relays an INVALIDATE may still take when a switch originates it     */
/* (its `aux`): 1 = leaf -> spine -> every other leaf in a two-tier    */
/* leaf-spine; a switch relays only while aux > 0, so copies are       */
/* bounded and loop-free whatever the wiring.                          */
const bit<32> FABRIC_INVALIDATE_HOPS = 1;
/* Field list of the metadata fabric clones keep (@field_list(1) in    */
/* headers.p4 must name the same number).                              */
const bit<8> FABRIC_CLONE_FIELDS = 1;
/* standard_metadata.instance_type of an ingress-to-egress clone       */
/* (BMv2 simple_switch's numbering).                                    */
const bit<32> PKT_INSTANCE_TYPE_INGRESS_CLONE = 1;

/* Receiver id of digests (v1model's first argument; BMv2 ignores it).  */
const bit<32> HOT_DIGEST_RECEIVER = 1;

/* Salts make the crc32 rows of the sketch and the Bloom filter         */
/* independent hash functions; any distinct constants do.               */
const bit<32> SKETCH_SALT_ROW2 = 0x5bd1e995;
const bit<32> BLOOM_SALT_0 = 0x9e3779b9;
const bit<32> BLOOM_SALT_1 = 0x85ebca6b;

/* ==================================================================== *
 *  Codes (serializable enums)                                           *
 * ==================================================================== */

/* KVP opcodes (docs/protocol.md, "Opcodes").                           */
enum bit<8> kvp_opcode_t {
    GET               = 0x01,
    GET_REPLY         = 0x02,
    PUT               = 0x03,
    PUT_ACK           = 0x04,
    INSERT            = 0x05,
    INSERT_ACK        = 0x06,
    LOOKUP_META       = 0x07,
    LOOKUP_META_REPLY = 0x08,
    SLOT_WRITE        = 0x10,
    SLOT_WRITE_ACK    = 0x11,
    SLOT_READ         = 0x12,
    SLOT_READ_REPLY   = 0x13,
    TIER_MOVE         = 0x20,
    TIER_MOVE_ACK     = 0x21,
    STAT              = 0x22,
    STAT_REPLY        = 0x23,
    /* switch -> switch only (docs/dataplane.md, "Fabric coherence"):   */
    /* a storage node acknowledged `version` of the key; raise the      */
    /* slot's min-version.  0x30: a new range for switch-to-switch      */
    /* messages, after the controller's 0x1x and 0x2x.                  */
    INVALIDATE        = 0x30
}

/* KVP status codes (docs/protocol.md, "Status codes").                 */
enum bit<8> kvp_status_t {
    OK             = 0x00,
    HIT_SWITCH     = 0x01,
    HIT_SERVER     = 0x02,
    MISS           = 0x03,
    STAGED         = 0x04,   /* PUT_ACK: chunk staged, block not yet    */
                             /* committed (progress; OK = committed)    */
    ERR_MALFORMED  = 0x10,
    ERR_FULL       = 0x11,
    ERR_CHECKSUM   = 0x12,
    ERR_STALE      = 0x13,
    ERR_UNKNOWN_OP = 0x14,
    ERR_DENIED     = 0x15,
    ERR_CONFLICT   = 0x16,   /* same version, different bytes (storage) */
    BUSY           = 0x17    /* storage node shed the request: back off */
}

/* Storage tiers (docs/protocol.md, "Tiers"); the data plane is SWITCH. */
enum bit<8> kvp_tier_t {
    ABSENT       = 0,
    SWITCH       = 1,
    STORAGE_DRAM = 2,
    STORAGE_DISK = 3,
    NODE_HBM     = 4,
    NODE_DRAM    = 5
}

/* What the device behind an ingress port is (table port_role); decides */
/* whose messages may fill or bound a slot.  HOST (the default) is     */
/* untrusted: its replies never fill, its acks never raise.            */
enum bit<8> port_role_t {
    HOST    = 0,   /* a client host, or anything unknown                */
    STORAGE = 1,   /* a storage node                                    */
    FABRIC  = 2    /* a link to another switch of the fabric            */
}

/* Why the switch sent a packet to the CPU port (packet_in.reason).     */
enum bit<8> punt_reason_t {
    CLIENT_OP  = 1,   /* INSERT or LOOKUP_META for the controller        */
    SLOT_REPLY = 2    /* SLOT_WRITE_ACK or SLOT_READ_REPLY               */
}

/* Index of the drop_reason counter: packets the pipeline refused,      */
/* dropped or passed on as plain UDP instead of handling them as KVP.   */
enum bit<8> drop_reason_t {
    NONE          = 0,   /* not counted                                 */
    SHORT         = 1,   /* UDP payload on port 7420 < 3 bytes, or      */
                         /* magic and version good but < 44 bytes       */
    BAD_MAGIC     = 2,   /* magic != 0x4B56 on port 7420                */
    BAD_VERSION   = 3,   /* ver != 2 (e.g. a v1 message)                */
    NO_VALUE      = 4,   /* F_VALUE but < 1 << chunk_shift bytes follow,*/
                         /* or F_VALUE clear on PUT / SLOT_WRITE        */
    BAD_CHUNK     = 5,   /* chunk_count = 0 or chunk_idx >= chunk_count */
    BAD_VALUE_LEN = 6,   /* value_len > 1 << chunk_shift                */
    UNKNOWN_OP    = 7,   /* good magic, unknown opcode                  */
    BAD_SLOT      = 8,   /* SLOT_WRITE/SLOT_READ slot >= SLOT_COUNT     */
    BAD_CHECKSUM  = 9,   /* fill or SLOT_WRITE: value_csum mismatch     */
    STALE_FILL    = 10,  /* fill or SLOT_WRITE older than last PUT      */
    NO_ROUTE      = 11,  /* no ipv4_lpm entry: dropped                  */
    TTL_EXPIRED   = 12,  /* IPv4 TTL <= 1: dropped                      */
    NOT_IPV4      = 13,  /* not IPv4: dropped (the switch is L3 only)   */
    SLOT_OP_NOT_FROM_CPU = 14, /* SLOT_WRITE/SLOT_READ not from the CPU */
                               /* port: dropped                         */
    CONTROL_OP_FROM_HOST = 15, /* TIER_MOVE, TIER_MOVE_ACK, SLOT_WRITE_ */
                               /* ACK, SLOT_READ_REPLY or INVALIDATE    */
                               /* from a HOST port: dropped             */
    REPLY_FROM_HOST = 16,      /* a reply from a HOST port: forwarded   */
                               /* with F_BYPASS, never stored           */
    SLOT_NOT_INDEXED = 17,     /* SLOT_WRITE for a key not indexed at   */
                               /* slot aux: answered ERR_DENIED         */
    BAD_CHUNK_SIZE = 18        /* chunk_shift outside 7 .. 13           */
}

/* Index of the kvp_events counter: what the KVP pipeline did.          */
enum bit<8> kvp_event_t {
    GET_HIT        = 1,   /* GET answered by the switch                 */
    GET_MISS       = 2,   /* GET forwarded to the storage node          */
    FILL           = 3,   /* a GET_REPLY filled a slot                  */
    PUT_INVALIDATE = 4,   /* a PUT invalidated an indexed slot          */
    PUNT           = 5,   /* INSERT / LOOKUP_META sent to the CPU port  */
    HOT_DIGEST     = 6,   /* a hot-key digest was sent                  */
    SLOT_WRITE     = 7,   /* SLOT_WRITE applied                         */
    SLOT_READ      = 8,   /* SLOT_READ answered                         */
    PACKET_OUT     = 9,   /* packet-out sent out of its egress port     */
    PUT_ACK_BOUND  = 10,  /* a trusted PUT_ACK OK bounded an indexed slot */
    FABRIC_INVALIDATE = 11, /* an INVALIDATE from the fabric was applied */
    OVER_SLOT_REPLY = 12  /* an over_slot_digest_t was sent (over_slot.p4) */
}

/* ==================================================================== *
 *  Request coalescing (coalesce.p4; docs/dataplane.md, "Coalescing")   *
 * ==================================================================== */

/* Pending entries = 1 << COALESCE_INDEX_WIDTH (4,096), direct-mapped   */
/* by a salted crc32 of the block key.                                  */
#define COALESCE_INDEX_WIDTH 12
const bit<32> COALESCE_ENTRIES = 32w1 << COALESCE_INDEX_WIDTH;
/* Readers parked per pending entry beside the one whose GET was        */
/* forwarded = 1 << COALESCE_WAITER_WIDTH (64); a further reader is     */
/* forwarded (OVERFLOW).  Waiter i of entry e is register cell          */
/* (e << COALESCE_WAITER_WIDTH) + i.                                     */
#define COALESCE_WAITER_WIDTH 6
const bit<32> COALESCE_WAITERS = 32w1 << COALESCE_WAITER_WIDTH;
const bit<32> COALESCE_WAITER_CELLS = 32w1 << (COALESCE_INDEX_WIDTH + COALESCE_WAITER_WIDTH);
/* Waiters served per pipeline pass (a BATCH): copies rid 1..8 of one   */
/* multicast.  A reply with more waiters carries the rest on in a copy  */
/* with rid COALESCE_CARRY_RID that egress recirculates, one batch per  */
/* pass.  The metadata fields coal_w0..coal_w7, coalesce_load_batch and */
/* coalesce_copy's chain list the batch's waiters one by one: change    */
/* those places together.                                                */
const bit<32> COALESCE_BATCH = 8;
const bit<16> COALESCE_CARRY_RID = 255;
/* A waiter slot that is not to be served (past the entry's waiters, or */
/* reused by a newer entry): no egress port equals it.                   */
const bit<16> COALESCE_NO_PORT = 0xffff;
/* Groups sized to a batch (set_coalesce_config's port_group_base):      */
/* base + (k - 1) << COALESCE_GROUP_SHIFT + (port, or COALESCE_ALL_PORTS) */
const bit<8> COALESCE_GROUP_SHIFT = 9;
const bit<16> COALESCE_ALL_PORTS = 511;
/* Field list the recirculated carry copy keeps (@field_list(2) in      */
/* headers.p4 must name the same number).                               */
const bit<8> COALESCE_CARRY_FIELDS = 2;
/* Parked requests, by a hash of (reader IPv4, UDP port, req_id) mod    */
/* COALESCE_PARKED_CELLS: the generation of the entry the request is    */
/* parked in.  A GET that finds its own hash cell stamped with the      */
/* live entry's generation is a waiter's retransmission (RETRY).        */
#define COALESCE_PARKED_WIDTH 12
const bit<32> COALESCE_PARKED_CELLS = 32w1 << COALESCE_PARKED_WIDTH;
const bit<32> COALESCE_PARKED_SALT = 0x5a17c0de;
/* Salt: makes the pending-entry hash independent of the sketch's row 0 */
/* (also crc32 of the key); any constant other than the sketch's does.  */
const bit<32> COALESCE_SALT = 0x2545f491;
/* v1model's drop port for a 9-bit egress_spec (BMv2's default): what   */
/* mark_to_drop writes, so "egress_spec != it" means "routed".          */
const bit<9> BMV2_DROP_PORT = 511;
/* standard_metadata.instance_type of a multicast copy (BMv2            */
/* simple_switch's numbering).                                          */
const bit<32> PKT_INSTANCE_TYPE_REPLICATION = 5;
/* Size of the coalesce_events counter (>= largest code + 1).          */
const bit<32> COALESCE_EVENT_COUNT = 16;

/* Index of the coalesce_events counter: what coalescing did.           */
enum bit<8> coalesce_event_t {
    PENDING       = 1,  /* a GET miss opened a pending entry (forwarded) */
    COALESCED     = 2,  /* a GET miss parked as a waiter (not forwarded) */
    REPLIED       = 3,  /* the reply to a pending GET arrived in time    */
    EXPIRED       = 4,  /* a pending entry was found past its timeout    */
    OVERFLOW      = 5,  /* a GET forwarded: its entry's waiters are full */
    COLLISION     = 6,  /* a GET forwarded: its cell is pending for      */
                        /* another key, storage node or version          */
    RELEASED      = 7,  /* a PUT or an OK PUT_ACK released a pending key */
    FOREIGN_REPLY = 8,  /* a reply for a pending GET came in on another  */
                        /* port than the GET left through: not          */
                        /* replicated                                    */
    RETRY         = 9,  /* a parked waiter resent its GET: forwarded     */
    CARRIED       = 10, /* a recirculated reply served its next batch    */
                        /* of up to COALESCE_BATCH waiters               */
    STALE         = 11, /* a carried batch skipped a waiter slot a newer */
                        /* entry of the cell reused (that waiter retries)*/
    LATE          = 12  /* a GET forwarded: its span entry's replies     */
                        /* began (a new waiter would miss some)          */
}

/* ==================================================================== *
 *  Stream join (stream.p4; docs/dataplane.md, "Stream join")           *
 * ==================================================================== */

/* Streams = 1 << STREAM_INDEX_WIDTH (1,024), direct-mapped by a salted */
/* crc32 of the block (tenant, prefix_hash): one stream per block.      */
#define STREAM_INDEX_WIDTH 10
const bit<32> STREAM_ENTRIES = 32w1 << STREAM_INDEX_WIDTH;
const bit<32> STREAM_SALT = 0x53e7a11d;
/* Members of a stream: its origin (cell 0) and up to STREAM_SUBSCRIBERS */
/* (64) subscribers; a further reader is plain-forwarded (FULL).  Member */
/* cell i of stream s is register cell (s << STREAM_SUBSCRIBER_WIDTH) + i */
/* (1 << STREAM_SUBSCRIBER_WIDTH = 128 cells per stream, 65 used).      */
#define STREAM_SUBSCRIBER_WIDTH 7
const bit<32> STREAM_SUBSCRIBERS = 64;
const bit<32> STREAM_SUBSCRIBER_CELLS = 32w1 << (STREAM_INDEX_WIDTH + STREAM_SUBSCRIBER_WIDTH);
/* Membership: by a salted crc32 of (reader IPv4, UDP port, tenant,    */
/* prefix_hash) mod STREAM_MEMBER_CELLS, the generation of the stream   */
/* the reader subscribed to and who it is (IPv4 ++ UDP port).  A reader */
/* whose cell holds the live stream's generation is a subscriber        */
/* already (its patch GETs do nothing); a cell another subscriber of    */
/* the same stream holds makes the reader plain-forwarded              */
/* (MEMBER_COLLISION): never two subscriptions of one reader.          */
#define STREAM_MEMBER_WIDTH 16
const bit<32> STREAM_MEMBER_CELLS = 32w1 << STREAM_MEMBER_WIDTH;
const bit<32> STREAM_MEMBER_SALT = 0x3e4b3e55;
/* Clone sessions of the push chain: session STREAM_SESSION_BASE + p    */
/* sends the copy out of port p (controller/streaming.py installs one   */
/* per front-panel port).  Above FABRIC_INVALIDATE_SESSION, below       */
/* 32,768 (BMv2 keeps clone sessions' groups in the upper half).        */
const bit<32> STREAM_SESSION_BASE = 1024;
/* Field list the push chain's egress clones keep (@field_list(3) in    */
/* headers.p4 must name the same number).                               */
const bit<8> STREAM_CHAIN_FIELDS = 3;
/* standard_metadata.instance_type of a normal packet and of an         */
/* egress-to-egress clone (BMv2 simple_switch's numbering).             */
const bit<32> PKT_INSTANCE_TYPE_NORMAL = 0;
const bit<32> PKT_INSTANCE_TYPE_EGRESS_CLONE = 2;
/* The pass a stream is in (MyEgress.stream_pass): its first pass over  */
/* the block, or its patch pass over the chunks below the highest join  */
/* point (docs/dataplane.md, "Stream join", "The patch pass").          */
const bit<8> STREAM_MAIN_PASS = 0;
const bit<8> STREAM_PATCH_PASS = 1;
/* Chunks just below a stream's front whose first reply is still pushed */
/* when the front has skipped it (replies out of order): the width of   */
/* MyEgress.stream_recent, one bit per chunk.                           */
const bit<32> STREAM_RECENT = 64;
/* Size of the stream_events counter (>= largest code + 1).            */
const bit<32> STREAM_EVENT_COUNT = 17;

/* Index of MyEgress.stream_events: what the stream join did.          */
enum bit<8> stream_event_t {
    OPENED         = 1,  /* an F_STREAM GET to a storage node opened a   */
                         /* stream: its reader is the origin            */
    JOINED         = 2,  /* a later reader's F_STREAM GET subscribed     */
    PUSHED         = 3,  /* a copy of a member's reply sent to another   */
                         /* member (F_PUSHED, req_id 0)                 */
    ENDED_BY_WRITE = 4,  /* a PUT, OK PUT_ACK or INVALIDATE of the block */
                         /* ended its stream                            */
    ENDED_LAST     = 5,  /* a member's reply for chunk_count - 1 was     */
                         /* pushed: the stream ended                    */
    EXPIRED        = 6,  /* a stream was found idle past its lifetime    */
    COLLISION      = 7,  /* a GET forwarded plainly: its cell streams    */
                         /* another block, node, version or size        */
    FULL           = 8,  /* a GET forwarded plainly: the stream has      */
                         /* STREAM_SUBSCRIBERS subscribers              */
    MEMBER_COLLISION = 9,/* a GET forwarded plainly: its membership cell */
                         /* holds another subscriber of the stream      */
    STALE          = 10, /* a push chain met a subscriber cell a newer   */
                         /* stream reused: the chain stopped            */
    WRONG_PORT     = 11, /* a chain copy came out of another port than   */
                         /* its member's (a misconfigured session):     */
                         /* dropped                                     */
    PATCH          = 12, /* a member's reply for a chunk below the       */
                         /* stream's front (a chunk it missed), or in   */
                         /* the patch pass at or above the join point   */
                         /* max: not pushed                             */
    PATCH_PASS     = 13, /* the last chunk was pushed with a join point  */
                         /* max above 0: the patch pass began           */
    PATCH_PUSHED   = 14, /* a member's reply pushed in the patch pass    */
                         /* (once per reply; PUSHED counts the copies)  */
    ENDED_PATCHED  = 15, /* the patch front reached the join point max:  */
                         /* the stream ended                            */
    REORDERED      = 16  /* a member's reply within STREAM_RECENT below  */
                         /* the (patch) front of a chunk the front had  */
                         /* skipped (no reply of it pushed yet): pushed */
}

/* ==================================================================== *
 *  Steering: one pool address, several storage nodes (steer.p4;        *
 *  docs/dataplane.md, "Steering")                                      *
 * ==================================================================== */

/* Buckets of the placement = 1 << STEER_BUCKET_WIDTH (256): a block    */
/* (tenant, prefix_hash) lands in bucket crc32(STEER_SALT, tenant,      */
/* prefix_hash) mod STEER_BUCKETS; the controller maps buckets to       */
/* storage nodes (table steer_bucket).  Every chunk of a block lands in */
/* one bucket, so a block's chunks are committed on one node.           */
#define STEER_BUCKET_WIDTH 8
const bit<32> STEER_BUCKETS = 32w1 << STEER_BUCKET_WIDTH;
/* Salt: makes the bucket hash independent of the sketch's and the     */
/* coalescing cells' crc32 of the key; any other constant does.         */
const bit<32> STEER_SALT = 0x6b43a9b5;
/* LOOKUP_META_REPLY built by the switch: bits 31..24 of `aux` carry the */
/* storage node id that holds the block (0 = not said; the tier bitmap  */
/* stays in the low bits, docs/protocol.md).                            */
const bit<8> META_NODE_SHIFT = 24;
/* The tier bit of the switch pool in a tier bitmap (1 << SWITCH).      */
const bit<32> TIER_BIT_SWITCH = 32w1 << 1;

/* Index of the steer_events counter: what steering did.               */
enum bit<8> steer_event_t {
    STEERED        = 1,  /* a request to the pool address sent to its node */
    UNAVAILABLE    = 2,  /* its bucket has no live node: answered MISS  */
                         /* (PUT: ERR_FULL) by the switch               */
    REPLY_REWRITTEN = 3, /* a storage node's reply sent in the pool's name */
    META_ANSWERED  = 4,  /* LOOKUP_META of an indexed key answered here  */
    MEMBER_REQUEST = 5   /* a request already steered upstream (to a     */
                         /* member's own address) seen as the pool's for */
                         /* coalescing                                   */
}
const bit<32> STEER_EVENT_COUNT = 8;

/* ==================================================================== *
 *  Over-slot replies (over_slot.p4; docs/dataplane.md, "Over-slot      *
 *  replies")                                                            *
 * ==================================================================== */

/* Receiver id of over_slot_digest_t (v1model's first argument; BMv2    */
/* ignores it): the hot-key digest's, one controller takes both.         */
const bit<32> OVER_SLOT_DIGEST_RECEIVER = HOT_DIGEST_RECEIVER;

#endif  /* KVSWITCH_CONSTANTS_P4 */
