/* -*- P4_16 -*- */
/*
 * kvswitch: which storage node a request to the pool goes to, and
 * whether a packet is one of the pool's own (docs/dataplane.md,
 * "Steering").
 *
 * A request to the pool address (GET, PUT, STAT; LOOKUP_META for the
 * node id) is placed by its block's bucket, crc32(STEER_SALT, tenant,
 * prefix_hash) mod STEER_BUCKETS, in steer_bucket (the controller's);
 * a reply from a STORAGE port, or a request already steered upstream,
 * is looked up in pool_member.  What follows from the choice (towards
 * the node, in the pool's name, answered here) is steer.p4's.
 *
 * Reads: the headers (IPv4 addresses, the KVP key and opcode),
 * request_t, kvp_ok, the sender's role.  Writes: steer_t.
 */

control SteerChoice(in headers_t hdr, in request_t req, in bool kvp_ok,
                    in port_role_t sender, inout steer_t steer) {
    /* ---- configuration -------------------------------------------------- */

    /* The pool address clients send to (a virtual IPv4 address no host    */
    /* owns).  steer_bucket and pool_member must be filled before.          */
    @name(".MyIngress.set_pool")
    action set_pool(ipv4_addr_t pool_addr) {
        steer.on = true;
        steer.pool_addr = pool_addr;
    }

    /* No pool (the initial state): every address is routed by ipv4_lpm.   */
    @name(".MyIngress.steer_off")
    action steer_off() {
        steer.on = false;
        steer.pool_addr = 0;
    }

    /* Keyless: the controller sets only its default action. */
    @name(".MyIngress.steer_config")
    table steer_config {
        actions = {
            set_pool;
            steer_off;
        }
        size = 1;
        default_action = steer_off();
    }

    /* ---- buckets ---------------------------------------------------------- */

    /* The block's bucket: every chunk of a block lands in the same one.     */
    @name(".MyIngress.steer_hash")
    action steer_hash() {
        hash(steer.bucket, HashAlgorithm.crc32, 32w0,
             { STEER_SALT, hdr.kvp.tenant, hdr.kvp.prefix_hash }, STEER_BUCKETS);
    }

    /* The bucket's blocks live on storage node `node` (1..255) at `addr`;  */
    /* `mac` and `port` are the next hop towards it (the controller copies   */
    /* them from the node's ipv4_lpm route).                                 */
    @name(".MyIngress.steer_to")
    action steer_to(bit<8> node, ipv4_addr_t addr, mac_addr_t mac, bit<9> port) {
        steer.steered = true;
        steer.node = node;
        steer.node_addr = addr;
        steer.node_mac = mac;
        steer.node_port = port;
    }

    /* No live node holds the bucket (memory backend, its node down): the    */
    /* switch answers its requests itself (answer_unavailable).              */
    @name(".MyIngress.bucket_unavailable")
    action bucket_unavailable() {
        steer.unavailable = true;
    }

    @name(".MyIngress.steer_bucket")
    table steer_bucket {
        key = {
            steer.bucket: exact @name("bucket");
        }
        actions = {
            steer_to;
            bucket_unavailable;
        }
        size = 1 << STEER_BUCKET_WIDTH;
        default_action = bucket_unavailable();
    }

    /* ---- members ---------------------------------------------------------- */

    /* `pool_peer` (a reply's source, a request's destination) is storage   */
    /* node `node` of the pool.                                             */
    @name(".MyIngress.set_pool_member")
    action set_pool_member(bit<8> node) {
        steer.member = true;
        steer.member_node = node;
    }

    @name(".MyIngress.pool_member")
    table pool_member {
        key = {
            steer.peer: exact @name("node_addr");
        }
        actions = {
            set_pool_member;
            @defaultonly NoAction;
        }
        size = 256;
        default_action = NoAction();
    }

    apply {
        kvp_opcode_t op = hdr.kvp.opcode;
        if (req.routable && kvp_ok && !req.refused && !req.invalidate) {
            steer_config.apply();
        }
        if (steer.on && hdr.ipv4.dst_addr == steer.pool_addr
            && (op == kvp_opcode_t.GET || op == kvp_opcode_t.PUT
                || op == kvp_opcode_t.STAT || req.lookup)) {
            steer.request = true;
            steer_hash();
            steer_bucket.apply();
        } else if (steer.on
                   && ((is_reply(op) && sender == port_role_t.STORAGE)
                       || op == kvp_opcode_t.GET || op == kvp_opcode_t.PUT
                       || op == kvp_opcode_t.STAT)) {
            if (is_reply(op)) {
                steer.peer = hdr.ipv4.src_addr;
            } else {
                steer.peer = hdr.ipv4.dst_addr;
            }
            pool_member.apply();
            steer.member_reply = steer.member && is_reply(op);
            steer.member_request = steer.member && !is_reply(op);
        }
    }
}
