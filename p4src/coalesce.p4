/* -*- P4_16 -*- */

control Coalesce(inout headers_t hdr, inout standard_metadata_t std_meta,
                 in coalesce_op_t op, inout coalesce_t coal) {
    /*
     * kvswitch: request coalescing, ingress side (included inside control
     * MyIngress; the egress side is coalesce_egress.p4).
     *
     * N readers GETting the same chunk at once must not cost the storage node
     * N GETs.  The first GET miss for a key opens a PENDING ENTRY and is
     * forwarded as usual; a later GET miss for the same key (same storage
     * node, same version asked) is PARKED in the entry as a waiter instead of
     * being forwarded.  When the storage node's reply to the first GET comes
     * back, it is multicast (group from coalesce_config) and egress turns copy
     * `egress_rid = i + 1` into waiter i's reply: its MAC, IPv4 address, UDP
     * port and request id.  Copy rid 0 is the reply itself, kept on the port
     * its own route chose.  One multicast serves a BATCH of 8 waiters; an
     * entry parks up to 64, and a reply with more than 8 carries the rest on:
     * its copy rid COALESCE_CARRY_RID is recirculated by egress with the
     * entry, its generation and the next batch's first waiter, and the next
     * ingress pass multicasts the next 8 (coalesce_carry).  docs/dataplane.md,
     * "Coalescing", has the design.
     *
     * A SPAN GET (aux = k, 1 < k <= KVP_MAX_GET_SPAN: chunks chunk_idx ..
     * chunk_idx + k - 1) is keyed by its first chunk and joins only a GET of
     * the same span; the storage node answers it with up to k replies, reply
     * i with aux = i and req_id = the GET's + i.  Reply i is matched to the
     * entry of chunk_idx - aux by req_id - aux and replicated like a single
     * reply, each waiter's copy with its req_id + aux.  Once the first reply
     * passed the entry takes no new waiter (it could not give it the offsets
     * already gone); the reply of its last offset (aux = k - 1, or the
     * block's last chunk when the span is clipped) frees it, as does any
     * reply that is not a hit (MISS, BUSY, ...).  A wider aux, or a reply
     * whose aux exceeds its chunk_idx, never opens or matches an entry.
     *
     * Bounded and fail-safe: a pending entry lives `timeout_us` (by
     * ingress_global_timestamp); a GET that finds its cell taken by another
     * key, its waiters full, or anything else it cannot join is FORWARDED as
     * without coalescing, never dropped.  Only the reply that answers the
     * forwarded GET (same key, storage node, reader address, port, request
     * id) and comes in on the port that GET left through replicates.  A PUT
     * or an OK PUT_ACK for a pending key releases its entry (waiters retry).
     *
     * Every operation is ONE action (coalesce), so BMv2 locks all of its
     * registers for the whole check-then-write.
     */

    /* ---- pending entries (index = coalesce_hash of the key) ---------------- */

    /* Epoch the entry was opened in (coalesce_config); 0 = free.  A new     */
    /* epoch frees every entry at once (no register writes over P4Runtime). */
    @name(".MyIngress.coalesce_epoch")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_epoch;
    /* ingress_global_timestamp when the entry was opened, in us.           */
    @name(".MyIngress.coalesce_since")
    register<bit<48>>(COALESCE_ENTRIES) coalesce_since;
    /* The key whose GET is outstanding (compared in full on every use).    */
    @name(".MyIngress.coalesce_tenant")
    register<bit<16>>(COALESCE_ENTRIES) coalesce_tenant;
    @name(".MyIngress.coalesce_prefix_hash")
    register<bit<64>>(COALESCE_ENTRIES) coalesce_prefix_hash;
    @name(".MyIngress.coalesce_chunk_idx")
    register<chunk_index_t>(COALESCE_ENTRIES) coalesce_chunk_idx;
    /* The version the forwarded GET asked for (0 = any): a reader joins    */
    /* only a GET that asked the same question.                              */
    @name(".MyIngress.coalesce_version")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_version;
    /* The span it asked for (its aux; 1 for a single GET): a reader joins  */
    /* only a GET of the same span.                                          */
    @name(".MyIngress.coalesce_span")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_span;
    /* 1 once a reply of the span passed: the entry takes no new waiter.    */
    @name(".MyIngress.coalesce_answered")
    register<bit<1>>(COALESCE_ENTRIES) coalesce_answered;
    /* Destination address of the forwarded GET (the storage node), and the */
    /* switch port it left through: its reply must come in there.           */
    @name(".MyIngress.coalesce_server")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_server;
    @name(".MyIngress.coalesce_server_port")
    register<bit<16>>(COALESCE_ENTRIES) coalesce_server_port;
    /* The reader whose GET was forwarded: recognises the reply to it.      */
    @name(".MyIngress.coalesce_origin_ip")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_origin_ip;
    @name(".MyIngress.coalesce_origin_udp_port")
    register<bit<16>>(COALESCE_ENTRIES) coalesce_origin_udp_port;
    @name(".MyIngress.coalesce_origin_req_id")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_origin_req_id;
    /* Waiters parked in the entry, <= COALESCE_WAITERS.                     */
    @name(".MyIngress.coalesce_waiter_count")
    register<bit<8>>(COALESCE_ENTRIES) coalesce_waiter_count;
    /* Generation of the entry: a fresh number at every open (from           */
    /* coalesce_last_gen), stamped on its waiters and parked requests, so a  */
    /* carried batch or a retry check never mistakes a newer entry of the    */
    /* cell for the one it belongs to.                                        */
    @name(".MyIngress.coalesce_gen")
    register<bit<32>>(COALESCE_ENTRIES) coalesce_gen;
    @name(".MyIngress.coalesce_last_gen")
    register<bit<32>>(1) coalesce_last_gen;

    /* Waiter i of entry e lives in cell (e << COALESCE_WAITER_WIDTH) + i.  */
    @name(".MyIngress.coalesce_waiter_ip")
    register<bit<32>>(COALESCE_WAITER_CELLS) coalesce_waiter_ip;
    @name(".MyIngress.coalesce_waiter_udp_port")
    register<bit<16>>(COALESCE_WAITER_CELLS) coalesce_waiter_udp_port;
    @name(".MyIngress.coalesce_waiter_req_id")
    register<bit<32>>(COALESCE_WAITER_CELLS) coalesce_waiter_req_id;
    @name(".MyIngress.coalesce_waiter_mac")
    register<bit<48>>(COALESCE_WAITER_CELLS) coalesce_waiter_mac;
    @name(".MyIngress.coalesce_waiter_port")
    register<bit<16>>(COALESCE_WAITER_CELLS) coalesce_waiter_port;
    /* The generation of the entry the waiter was parked in.                */
    @name(".MyIngress.coalesce_waiter_gen")
    register<bit<32>>(COALESCE_WAITER_CELLS) coalesce_waiter_gen;

    /* Parked requests (see COALESCE_PARKED_WIDTH): entry generation by a    */
    /* hash of the reader's (IPv4, UDP port, req_id).  A collision errs     */
    /* either way harmlessly: a GET taken for a retry (same cell, entry,    */
    /* UDP port and req_id: practically never) is forwarded, one extra GET; */
    /* a retry whose cell another parked request took parks again and is   */
    /* served by the reply, or retries after the entry expired.             */
    @name(".MyIngress.coalesce_parked")
    register<bit<32>>(COALESCE_PARKED_CELLS) coalesce_parked;
    /* ... and which request it is: UDP source port ++ req_id (a cell shared */
    /* by two waiters of one entry must not make the other one a retry).    */
    @name(".MyIngress.coalesce_parked_who")
    register<bit<48>>(COALESCE_PARKED_CELLS) coalesce_parked_who;

    /* What coalescing did, by coalesce_event_t (copies sent to waiters are */
    /* counted in egress: MyEgress.coalesce_replicated).                    */
    @name(".MyIngress.coalesce_events")
    counter(COALESCE_EVENT_COUNT, CounterType.packets_and_bytes) coalesce_events;

    @name(".MyIngress.count_coalesce")
    action count_coalesce(in coalesce_event_t event) {
        coalesce_events.count((bit<32>)(bit<8>)event);
    }

    /* ---- configuration ---------------------------------------------------- */

    /* timeout_us: lifetime of a pending entry, in us (keep it below the     */
    /* readers' retry timeout, so a retry never joins its own old entry);    */
    /* epoch: != 0, a new number frees every entry; mcast_group: the PRE     */
    /* group holding (port, rid) for every port and rid 0..COALESCE_BATCH,   */
    /* and one (any port, COALESCE_CARRY_RID) (controller/coalescing.py).    */
    /* port_group_base: != 0 when the controller also installed the groups  */
    /* sized to a batch: for k = 1..COALESCE_BATCH waiters, group            */
    /* port_group_base + (k - 1) * 512 + p holding (p, rids 0..k) for every  */
    /* port p, and ... + 511 holding every port x rids 0..k; with            */
    /* (., COALESCE_CARRY_RID) when k = COALESCE_BATCH.  A batch of k        */
    /* waiters whose copies all leave through port p makes k + 1 (+ carry)  */
    /* copies; otherwise P x (k + 1) (+ carry), not P x 9 + 1.               */
    @name(".MyIngress.set_coalesce_config")
    action set_coalesce_config(bit<32> timeout_us, bit<32> epoch, bit<16> mcast_group,
                               bit<16> port_group_base) {
        coal.timeout = (bit<48>)timeout_us;
        coal.epoch = epoch;
        coal.mcast_group = mcast_group;
        coal.port_group_base = port_group_base;
    }

    /* Coalescing off (the initial state): every GET miss is forwarded.     */
    @name(".MyIngress.coalesce_off")
    action coalesce_off() {
        coal.timeout = 0;
        coal.epoch = 0;
        coal.mcast_group = 0;
        coal.port_group_base = 0;
    }

    /* Keyless: the controller sets only its default action. */
    @name(".MyIngress.coalesce_config")
    table coalesce_config {
        actions = {
            set_coalesce_config;
            coalesce_off;
        }
        size = 1;
        default_action = coalesce_off();
    }

    /* ---- the sender's MAC ----------------------------------------------- */

    /* Called just before ipv4_lpm, which overwrites the source MAC: a      */
    /* waiter's copy of the reply goes back to the MAC its GET came from.   */
    @name(".MyIngress.coalesce_note_sender")
    action coalesce_note_sender() {
        coal.sender_mac = hdr.ethernet.src_addr;
    }

    /* ---- the pending entry of the packet's key ----------------------------- */

    /* first: the chunk the entry is keyed by (a span's first chunk). */
    @name(".MyIngress.coalesce_hash")
    action coalesce_hash(in chunk_index_t first) {
        hash(coal.index, HashAlgorithm.crc32, 32w0,
             { COALESCE_SALT, hdr.kvp.tenant, hdr.kvp.prefix_hash, first },
             COALESCE_ENTRIES);
    }

    /* The request's cell in coalesce_parked (its retry check). */
    @name(".MyIngress.coalesce_parked_hash")
    action coalesce_parked_hash() {
        hash(coal.parked_cell, HashAlgorithm.crc32, 32w0,
             { COALESCE_PARKED_SALT, hdr.ipv4.src_addr, hdr.udp.src_port, hdr.kvp.req_id },
             COALESCE_PARKED_CELLS);
    }

    /* GET miss, already routed (egress_spec = its port towards the storage */
    /* node), span <= KVP_MAX_GET_SPAN: open the entry, join it as a waiter, */
    /* or forward.                                                           */
    @name(".MyIngress.coalesce_get")
    action coalesce_get() {
        bit<32> epoch;
        bit<32> span;
        bit<1> answered;
        bit<48> since;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> version;
        bit<32> server;
        bit<32> origin_ip;
        bit<16> origin_udp_port;
        bit<32> origin_req_id;
        bit<8> waiters;
        bit<32> gen;
        bit<32> last_gen;
        bit<32> parked_gen;
        bit<48> parked_who;
        coalesce_epoch.read(epoch, coal.index);
        coalesce_since.read(since, coal.index);
        coalesce_tenant.read(tenant, coal.index);
        coalesce_prefix_hash.read(prefix_hash, coal.index);
        coalesce_chunk_idx.read(chunk_idx, coal.index);
        coalesce_version.read(version, coal.index);
        coalesce_span.read(span, coal.index);
        coalesce_answered.read(answered, coal.index);
        coalesce_gen.read(gen, coal.index);
        coalesce_server.read(server, coal.index);
        coalesce_origin_ip.read(origin_ip, coal.index);
        coalesce_origin_udp_port.read(origin_udp_port, coal.index);
        coalesce_origin_req_id.read(origin_req_id, coal.index);
        coalesce_waiter_count.read(waiters, coal.index);
        coalesce_last_gen.read(last_gen, 0);
        bit<48> who = hdr.udp.src_port ++ hdr.kvp.req_id;
        bit<48> now = std_meta.ingress_global_timestamp;
        bool current = epoch == coal.epoch;
        bool live = current && now - since < coal.timeout;
        bit<32> asked = hdr.kvp.aux;
        if (asked == 0) {
            asked = 1;  /* aux 0 and 1 both ask for one chunk */
        }
        bool same = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && chunk_idx == hdr.kvp.chunk_idx
                    && server == hdr.ipv4.dst_addr
                    && version == hdr.kvp.version
                    && span == asked;
        bool is_origin = origin_ip == hdr.ipv4.src_addr
                         && origin_udp_port == hdr.udp.src_port
                         && origin_req_id == hdr.kvp.req_id;
        bit<32> base = coal.index << COALESCE_WAITER_WIDTH;
        if (!live) {
            if (current) {
                count_coalesce(coalesce_event_t.EXPIRED);
            }
            coalesce_epoch.write(coal.index, coal.epoch);
            coalesce_since.write(coal.index, now);
            coalesce_tenant.write(coal.index, hdr.kvp.tenant);
            coalesce_prefix_hash.write(coal.index, hdr.kvp.prefix_hash);
            coalesce_chunk_idx.write(coal.index, hdr.kvp.chunk_idx);
            coalesce_version.write(coal.index, hdr.kvp.version);
            coalesce_span.write(coal.index, asked);
            coalesce_answered.write(coal.index, 0);
            coalesce_server.write(coal.index, hdr.ipv4.dst_addr);
            coalesce_server_port.write(coal.index, (bit<16>)std_meta.egress_spec);
            coalesce_origin_ip.write(coal.index, hdr.ipv4.src_addr);
            coalesce_origin_udp_port.write(coal.index, hdr.udp.src_port);
            coalesce_origin_req_id.write(coal.index, hdr.kvp.req_id);
            coalesce_waiter_count.write(coal.index, 0);
            bit<32> new_gen = last_gen + 1;
            if (new_gen == 0) {
                new_gen = 1;  /* 0 stamps nothing */
            }
            coalesce_last_gen.write(0, new_gen);
            coalesce_gen.write(coal.index, new_gen);
            count_coalesce(coalesce_event_t.PENDING);
        } else if (!same) {
            count_coalesce(coalesce_event_t.COLLISION);
        } else if (is_origin) {
            /* the forwarded GET's own retransmission: forward it again */
        } else {
            /* Another reader's GET of the pending key: only now is its parked */
            /* cell looked at (an entry's opening, most GETs, needs none).     */
            /* A waiter's own retransmission (same IPv4, UDP port, req_id as a */
            /* request parked in this entry) waited a whole retry timeout, so  */
            /* the reply it waits for is not coming through this entry (lost,  */
            /* or one that cannot replicate); parking it again would strand it. */
            coalesce_parked_hash();
            coalesce_parked.read(parked_gen, coal.parked_cell);
            coalesce_parked_who.read(parked_who, coal.parked_cell);
            coal.parked = parked_gen == gen && gen != 0 && parked_who == who;
            if (coal.parked) {
                /* a waiter's own retransmission: forward it (see above) */
                count_coalesce(coalesce_event_t.RETRY);
            } else if (answered == 1) {
                /* a span whose replies began: a new waiter would miss some */
                count_coalesce(coalesce_event_t.LATE);
            } else if ((bit<32>)waiters >= COALESCE_WAITERS) {
                count_coalesce(coalesce_event_t.OVERFLOW);
            } else {
                bit<32> cell = base + (bit<32>)waiters;
                coalesce_waiter_ip.write(cell, hdr.ipv4.src_addr);
                coalesce_waiter_udp_port.write(cell, hdr.udp.src_port);
                coalesce_waiter_req_id.write(cell, hdr.kvp.req_id);
                coalesce_waiter_mac.write(cell, coal.sender_mac);
                coalesce_waiter_port.write(cell, (bit<16>)std_meta.ingress_port);
                coalesce_waiter_gen.write(cell, gen);
                coalesce_parked.write(coal.parked_cell, gen);
                coalesce_parked_who.write(coal.parked_cell, who);
                coalesce_waiter_count.write(coal.index, waiters + 1);
                count_coalesce(coalesce_event_t.COALESCED);
                mark_to_drop(std_meta);
            }
        }
    }

    /* Load the batch of waiters coal.next .. + COALESCE_BATCH - 1 of   */
    /* entry coal.index (generation coal.gen, coal.total      */
    /* waiters) into coal_w0..coal_w7 and multicast the reply to them.  A    */
    /* slot past the waiters, or whose waiter belongs to a newer entry of    */
    /* the cell (the entry was freed when its reply came; a carried batch    */
    /* may find a slot reused), gets COALESCE_NO_PORT: egress drops it.      */
    @name(".MyIngress.coalesce_load_batch")
    action coalesce_load_batch() {
        bit<32> base = (coal.index << COALESCE_WAITER_WIDTH) + (bit<32>)coal.next;
        bit<8> left = coal.total - coal.next;
        bit<8> batch = left;
        if (left > (bit<8>)COALESCE_BATCH) {
            batch = (bit<8>)COALESCE_BATCH;
        }
        bit<32> cell;
        bit<32> gen;
        bool stale = false;
        cell = base + 0;
        coalesce_waiter_ip.read(coal.w0.ip, cell);
        coalesce_waiter_udp_port.read(coal.w0.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w0.req_id, cell);
        coalesce_waiter_mac.read(coal.w0.mac, cell);
        coalesce_waiter_port.read(coal.w0.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)0 >= batch) {
            coal.w0.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w0.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 1;
        coalesce_waiter_ip.read(coal.w1.ip, cell);
        coalesce_waiter_udp_port.read(coal.w1.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w1.req_id, cell);
        coalesce_waiter_mac.read(coal.w1.mac, cell);
        coalesce_waiter_port.read(coal.w1.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)1 >= batch) {
            coal.w1.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w1.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 2;
        coalesce_waiter_ip.read(coal.w2.ip, cell);
        coalesce_waiter_udp_port.read(coal.w2.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w2.req_id, cell);
        coalesce_waiter_mac.read(coal.w2.mac, cell);
        coalesce_waiter_port.read(coal.w2.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)2 >= batch) {
            coal.w2.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w2.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 3;
        coalesce_waiter_ip.read(coal.w3.ip, cell);
        coalesce_waiter_udp_port.read(coal.w3.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w3.req_id, cell);
        coalesce_waiter_mac.read(coal.w3.mac, cell);
        coalesce_waiter_port.read(coal.w3.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)3 >= batch) {
            coal.w3.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w3.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 4;
        coalesce_waiter_ip.read(coal.w4.ip, cell);
        coalesce_waiter_udp_port.read(coal.w4.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w4.req_id, cell);
        coalesce_waiter_mac.read(coal.w4.mac, cell);
        coalesce_waiter_port.read(coal.w4.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)4 >= batch) {
            coal.w4.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w4.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 5;
        coalesce_waiter_ip.read(coal.w5.ip, cell);
        coalesce_waiter_udp_port.read(coal.w5.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w5.req_id, cell);
        coalesce_waiter_mac.read(coal.w5.mac, cell);
        coalesce_waiter_port.read(coal.w5.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)5 >= batch) {
            coal.w5.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w5.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 6;
        coalesce_waiter_ip.read(coal.w6.ip, cell);
        coalesce_waiter_udp_port.read(coal.w6.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w6.req_id, cell);
        coalesce_waiter_mac.read(coal.w6.mac, cell);
        coalesce_waiter_port.read(coal.w6.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)6 >= batch) {
            coal.w6.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w6.port = COALESCE_NO_PORT;
            stale = true;
        }
        cell = base + 7;
        coalesce_waiter_ip.read(coal.w7.ip, cell);
        coalesce_waiter_udp_port.read(coal.w7.udp_port, cell);
        coalesce_waiter_req_id.read(coal.w7.req_id, cell);
        coalesce_waiter_mac.read(coal.w7.mac, cell);
        coalesce_waiter_port.read(coal.w7.port, cell);
        coalesce_waiter_gen.read(gen, cell);
        if ((bit<8>)7 >= batch) {
            coal.w7.port = COALESCE_NO_PORT;
        } else if (gen != coal.gen) {
            coal.w7.port = COALESCE_NO_PORT;
            stale = true;
        }
        if (stale) {
            count_coalesce(coalesce_event_t.STALE);
        }
        coal.waiters = batch;
        coal.more = left > (bit<8>)COALESCE_BATCH;
        coal.replicate = true;
        /* The group sized to the batch (k waiters: rids 0..k), of the one    */
        /* port every copy leaves through (its waiters', and on the first     */
        /* batch the reply's own route) or of all ports (code 511).           */
        bit<16> p = coal.w0.port;
        bool one_port = coal.port_group_base != 0 && p != COALESCE_NO_PORT
            && (coal.w1.port == p || coal.w1.port == COALESCE_NO_PORT)
            && (coal.w2.port == p || coal.w2.port == COALESCE_NO_PORT)
            && (coal.w3.port == p || coal.w3.port == COALESCE_NO_PORT)
            && (coal.w4.port == p || coal.w4.port == COALESCE_NO_PORT)
            && (coal.w5.port == p || coal.w5.port == COALESCE_NO_PORT)
            && (coal.w6.port == p || coal.w6.port == COALESCE_NO_PORT)
            && (coal.w7.port == p || coal.w7.port == COALESCE_NO_PORT)
            && (coal.carry || (bit<16>)coal.origin_port == p);
        bit<16> code = COALESCE_ALL_PORTS;
        if (one_port) {
            code = p;
        }
        if (coal.port_group_base != 0) {
            std_meta.mcast_grp = coal.port_group_base
                                 + (((bit<16>)batch - 1) << COALESCE_GROUP_SHIFT) + code;
        } else {
            std_meta.mcast_grp = coal.carry_group;
        }
    }

    /* GET_REPLY, already routed to its reader, aux <= chunk_idx (entry     */
    /* `first` = chunk_idx - aux): if it answers a pending GET (reply aux  */
    /* of its span), multicast it to the readers parked there; its last     */
    /* reply, or one that is not a hit, frees the entry.                    */
    @name(".MyIngress.coalesce_reply")
    action coalesce_reply(in chunk_index_t first) {
        bit<32> epoch;
        bit<32> span;
        bit<48> since;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        bit<32> server;
        bit<16> server_port;
        bit<32> origin_ip;
        bit<16> origin_udp_port;
        bit<32> origin_req_id;
        bit<8> waiters;
        coalesce_epoch.read(epoch, coal.index);
        coalesce_since.read(since, coal.index);
        coalesce_tenant.read(tenant, coal.index);
        coalesce_prefix_hash.read(prefix_hash, coal.index);
        coalesce_chunk_idx.read(chunk_idx, coal.index);
        coalesce_span.read(span, coal.index);
        coalesce_gen.read(coal.gen, coal.index);
        coalesce_server.read(server, coal.index);
        coalesce_server_port.read(server_port, coal.index);
        coalesce_origin_ip.read(origin_ip, coal.index);
        coalesce_origin_udp_port.read(origin_udp_port, coal.index);
        coalesce_origin_req_id.read(origin_req_id, coal.index);
        coalesce_waiter_count.read(waiters, coal.index);
        bool answers = epoch == coal.epoch
                       && tenant == hdr.kvp.tenant
                       && prefix_hash == hdr.kvp.prefix_hash
                       && chunk_idx == first
                       && hdr.kvp.aux < span
                       && server == hdr.ipv4.src_addr
                       && origin_ip == hdr.ipv4.dst_addr
                       && origin_udp_port == hdr.udp.dst_port
                       && origin_req_id == hdr.kvp.req_id - hdr.kvp.aux;
        bool live = std_meta.ingress_global_timestamp - since < coal.timeout;
        /* the span's last reply (clipped: the block's last chunk), or an  */
        /* answer that ends it (MISS: one reply only; BUSY, errors)        */
        bool last = hdr.kvp.aux == span - 1
                    || hdr.kvp.chunk_idx == hdr.kvp.chunk_count - 1
                    || (hdr.kvp.status != kvp_status_t.HIT_SERVER
                        && hdr.kvp.status != kvp_status_t.HIT_SWITCH);
        if (!answers) {
            /* not the reply to a pending GET: forwarded as usual */
        } else if (server_port != (bit<16>)std_meta.ingress_port) {
            count_coalesce(coalesce_event_t.FOREIGN_REPLY);
        } else {
            /* In time, or late but the entry was not reopened meanwhile (it  */
            /* still names this GET): its waiters asked for exactly this      */
            /* answer, so they get it either way (a waiter that already       */
            /* retried gets a stray duplicate).  Expiry only lets new GETs    */
            /* reopen the cell when a reply is lost.                          */
            if (!last) {
                /* more of the span to come: the entry serves them, but  */
                /* takes no new waiter                                   */
                coalesce_answered.write(coal.index, 1);
            } else if (live) {
                coalesce_epoch.write(coal.index, 0);
                count_coalesce(coalesce_event_t.REPLIED);
            } else {
                coalesce_epoch.write(coal.index, 0);
                count_coalesce(coalesce_event_t.EXPIRED);
            }
            if (waiters != 0) {
                /* the first batch; coalesce_copy carries the rest on */
                coal.total = waiters;
                coal.next = 0;
                coal.carry_group = coal.mcast_group;
                coal.origin_port = std_meta.egress_spec;
                coalesce_load_batch();
            }
        }
    }

    /* PUT, or PUT_ACK OK: a pending GET for the key may be answered with    */
    /* the value before this write, so nobody may join it any more: free     */
    /* the entry (its waiters time out and retry; the forwarded GET's own    */
    /* reply still reaches its reader, as without coalescing).               */
    @name(".MyIngress.coalesce_release")
    action coalesce_release() {
        bit<32> epoch;
        bit<16> tenant;
        bit<64> prefix_hash;
        chunk_index_t chunk_idx;
        coalesce_epoch.read(epoch, coal.index);
        coalesce_tenant.read(tenant, coal.index);
        coalesce_prefix_hash.read(prefix_hash, coal.index);
        coalesce_chunk_idx.read(chunk_idx, coal.index);
        if (epoch == coal.epoch
            && tenant == hdr.kvp.tenant
            && prefix_hash == hdr.kvp.prefix_hash
            && chunk_idx == hdr.kvp.chunk_idx) {
            coalesce_epoch.write(coal.index, 0);
            count_coalesce(coalesce_event_t.RELEASED);
        }
    }

    /* A trusted INVALIDATE (fabric coherence: a write acknowledged at       */
    /* another switch) releases a pending GET for its key as a PUT_ACK OK     */
    /* does here: a reader that learnt of the write must not join a GET sent  */
    /* before it (its reply may carry the old version).                       */
    @name(".MyIngress.coalesce_invalidate")
    action coalesce_invalidate() {
        if (coal.epoch != 0 && coal.mcast_group != 0) {
            coalesce_hash(hdr.kvp.chunk_idx);
            coalesce_release();
        }
    }

    /* The call site: a well-formed KVP message that ipv4_lpm routed (not   */
    /* answered, punted or dropped), after coalesce_config.apply().          */
    /* A GET wider than KVP_MAX_GET_SPAN, or a reply whose aux exceeds its */
    /* chunk_idx (no span starts below chunk 0) or KVP_MAX_GET_SPAN, is    */
    /* forwarded untouched.                                                 */
    @name(".MyIngress.coalesce")
    action coalesce() {
        bool bypass = (hdr.kvp.flags & F_BYPASS) != 0;
        bool offset_ok = hdr.kvp.aux <= KVP_MAX_GET_SPAN
                         && hdr.kvp.aux <= hdr.kvp.chunk_idx;
        if (coal.epoch != 0 && coal.mcast_group != 0) {
            if (hdr.kvp.opcode == kvp_opcode_t.GET_REPLY && offset_ok) {
                coalesce_hash(hdr.kvp.chunk_idx - hdr.kvp.aux);
            } else {
                coalesce_hash(hdr.kvp.chunk_idx);
            }
            if (hdr.kvp.opcode == kvp_opcode_t.GET && !bypass
                && hdr.kvp.aux <= KVP_MAX_GET_SPAN) {
                coalesce_get();
            } else if (hdr.kvp.opcode == kvp_opcode_t.GET_REPLY && !bypass
                       && offset_ok) {
                coalesce_reply(hdr.kvp.chunk_idx - hdr.kvp.aux);
            } else if (hdr.kvp.opcode == kvp_opcode_t.PUT
                       || (hdr.kvp.opcode == kvp_opcode_t.PUT_ACK
                           && hdr.kvp.status == kvp_status_t.OK)) {
                coalesce_release();
            }
        }
    }

    /* A carried pass (egress recirculated the reply's carry copy with       */
    /* coal.carry, coal_index, coal_gen, coal_total, coal_next and      */
    /* coal_carry_group): multicast the reply to the next batch of waiters.  */
    /* Nothing else in ingress looks at it: it was routed and counted once.  */
    @name(".MyIngress.coalesce_carry")
    action coalesce_carry() {
        count_coalesce(coalesce_event_t.CARRIED);
        coalesce_load_batch();
    }

    apply {
        if (op == coalesce_op_t.CARRY) {
            coalesce_carry();
        } else if (op == coalesce_op_t.CONFIG) {
            coalesce_config.apply();
        } else if (op == coalesce_op_t.INVALIDATE) {
            coalesce_invalidate();
        } else if (op == coalesce_op_t.NOTE_SENDER) {
            coalesce_note_sender();
        } else {
            coalesce();
        }
    }
}
