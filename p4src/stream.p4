/* -*- P4_16 -*- */

control Stream(inout headers_t hdr, inout standard_metadata_t std_meta,
               in mac_addr_t sender_mac, inout stream_t st) {
    /*
     * kvswitch: the stream join (applied in MyEgress; docs/dataplane.md,
     * "Stream join", has the design and the alternatives).
     *
     * Readers of one block that start apart by more than a storage round
     * trip cannot share GETs (coalescing holds a GET only while its reply is
     * outstanding), but they can share the rest of a block read already
     * under way.  The first reader whose GET with F_STREAM of block B leaves
     * this switch towards a STORAGE port (table stream_storage_port) becomes
     * the ORIGIN of B's stream here; a later reader whose F_STREAM GET of B
     * leaves towards the same node, for the same version, while the stream
     * lives becomes a SUBSCRIBER (up to STREAM_SUBSCRIBERS).  The origin
     * and the subscribers are the stream's MEMBERS (the origin is member
     * cell 0).  A stream keeps its FRONT, one past the highest chunk pushed
     * so far.  A HIT reply with a value from that node to a member is also
     * sent to every other member as a pushed copy (addressed to it: MAC,
     * IPv4, UDP port; req_id 0, F_PUSHED, UDP checksum 0) when its chunk is
     * at or beyond the front (the front moves past it), or when it is
     * addressed to the origin (so an origin's reordered reply is still
     * pushed); a member's reply below the front is a PATCH of a chunk it
     * missed: not pushed, unless it is the first reply of a chunk the
     * front skipped (replies out of order: the front jumped past it) within
     * STREAM_RECENT chunks below the front (stream_recent keeps which of
     * those were pushed): no member has that chunk from the stream, so it
     * is pushed (REORDERED).  So whichever member reads ahead feeds the
     * others.  The members' own GETs are always forwarded.
     *
     * The patch pass: a subscriber's JOIN POINT is the front when it
     * joined (it missed the chunks below it); the stream keeps the highest
     * (the join point max).  When the reply of the block's last chunk is
     * pushed and the join point max is above 0, the stream does not end:
     * it begins its PATCH PASS, a second pass over the chunks below the
     * join point max with its front back at 0 (the patch front).  A
     * member's reply of chunk c with patch front <= c < join point max is
     * pushed to every other member as in the first pass (the patch front
     * moves past it), below the patch front it is a PATCH (not pushed;
     * a skipped chunk's first reply within STREAM_RECENT is pushed, as in
     * the first pass), and the stream ends once the patch front reaches the join point max.
     * So the late members, which ask for their missed chunks only once the
     * first pass ended, share them as they shared the rest.  A reader that
     * joins during the patch pass joins at the first pass's front (the
     * block's chunk count): the patch pass then covers the whole block, a
     * second pass it shares with the late members.
     *
     * Replication is a chain of egress-to-egress clones, one egress pass per
     * member: the reply clones itself to clone session
     * STREAM_SESSION_BASE + (first member's port) with the member in
     * metadata (STREAM_CHAIN_FIELDS); that copy rewrites itself to its
     * member and clones itself on to the next one, until the members the
     * stream had when the reply passed are served.  The chain steps over
     * the reply's addressee (st.skip): it has the reply itself.
     *
     * Bounded and fail-safe: a stream ends at a PUT, an OK PUT_ACK or an
     * INVALIDATE of any chunk of its block, once a reply for the block's
     * last chunk (chunk_count - 1) is pushed and no subscriber joined past
     * chunk 0, once its patch pass reaches the join point max, or when
     * idle for its lifetime (stream_config); a GET whose cell streams
     * another block, whose stream is full, or whose membership cell
     * another subscriber holds is forwarded as without streams (counted),
     * as is everything when stream_config is off.  F_BYPASS GETs never open or join.
     *
     * Every operation on the registers is ONE action, so BMv2 locks them
     * all for the whole check-then-write.
     */

    /* ---- streams (index = stream_hash of the block) ---------------------- */

    /* Epoch the stream was opened in (stream_config); 0 = ended.  A new    */
    /* epoch ends every stream at once (no register writes over P4Runtime). */
    @name(".MyEgress.stream_epoch")
    register<bit<32>>(STREAM_ENTRIES) stream_epoch;
    /* egress_global_timestamp of the stream's last activity (its opening,  */
    /* the origin's GETs and pushed replies), in us.                        */
    @name(".MyEgress.stream_last")
    register<bit<48>>(STREAM_ENTRIES) stream_last;
    /* The block, the node and the version asked (compared in full).        */
    @name(".MyEgress.stream_tenant")
    register<bit<16>>(STREAM_ENTRIES) stream_tenant;
    @name(".MyEgress.stream_prefix_hash")
    register<bit<64>>(STREAM_ENTRIES) stream_prefix_hash;
    @name(".MyEgress.stream_server")
    register<bit<32>>(STREAM_ENTRIES) stream_server;
    @name(".MyEgress.stream_version")
    register<bit<32>>(STREAM_ENTRIES) stream_version;
    /* The port towards the node: the members' replies must come in there.*/
    @name(".MyEgress.stream_server_port")
    register<bit<16>>(STREAM_ENTRIES) stream_server_port;
    /* The origin: its replies are pushed.                                  */
    @name(".MyEgress.stream_origin_ip")
    register<bit<32>>(STREAM_ENTRIES) stream_origin_ip;
    @name(".MyEgress.stream_origin_udp_port")
    register<bit<16>>(STREAM_ENTRIES) stream_origin_udp_port;
    /* Subscribers so far, <= STREAM_SUBSCRIBERS (the origin not counted). */
    @name(".MyEgress.stream_subscriber_count")
    register<bit<8>>(STREAM_ENTRIES) stream_subscriber_count;
    /* The front: one past the highest chunk pushed so far in the first   */
    /* pass (0 at opening; the chunk count once the patch pass began).     */
    @name(".MyEgress.stream_front")
    register<bit<32>>(STREAM_ENTRIES) stream_front;
    /* The patch front: one past the highest chunk pushed so far in the   */
    /* patch pass (0 when it begins).                                      */
    @name(".MyEgress.stream_patch_front")
    register<bit<32>>(STREAM_ENTRIES) stream_patch_front;
    /* The join point max: the highest front any subscriber joined at (0  */
    /* at opening).  The patch pass covers the chunks below it.            */
    @name(".MyEgress.stream_join_max")
    register<bit<32>>(STREAM_ENTRIES) stream_join_max;
    /* The chunks just below the front of the pass under way that were    */
    /* pushed: bit k is chunk (front - 1 - k), k < STREAM_RECENT.  A reply  */
    /* beyond the front moves the front past chunks whose replies had not  */
    /* come yet (replies out of order); the first reply of such a chunk is */
    /* still pushed, since no other member has it.  0 at opening and when */
    /* the patch pass begins.                                               */
    @name(".MyEgress.stream_recent")
    register<bit<64>>(STREAM_ENTRIES) stream_recent;
    /* The pass under way: STREAM_MAIN_PASS, or STREAM_PATCH_PASS once the */
    /* block's last chunk was pushed with a join point max above 0.        */
    @name(".MyEgress.stream_pass")
    register<bit<8>>(STREAM_ENTRIES) stream_pass;
    /* A fresh number at every opening (from stream_last_gen), stamped on   */
    /* the stream's subscriber and membership cells, so neither a push      */
    /* chain under way nor a reader's membership is ever taken for a newer  */
    /* stream of the cell.                                                   */
    @name(".MyEgress.stream_gen")
    register<bit<32>>(STREAM_ENTRIES) stream_gen;
    @name(".MyEgress.stream_last_gen")
    register<bit<32>>(1) stream_last_gen;

    /* Member i of stream s lives in cell (s << STREAM_SUBSCRIBER_WIDTH) + i: */
    /* the origin in cell 0, subscriber j in cell j + 1.                     */
    @name(".MyEgress.stream_subscriber_ip")
    register<bit<32>>(STREAM_SUBSCRIBER_CELLS) stream_subscriber_ip;
    @name(".MyEgress.stream_subscriber_udp_port")
    register<bit<16>>(STREAM_SUBSCRIBER_CELLS) stream_subscriber_udp_port;
    @name(".MyEgress.stream_subscriber_mac")
    register<bit<48>>(STREAM_SUBSCRIBER_CELLS) stream_subscriber_mac;
    @name(".MyEgress.stream_subscriber_port")
    register<bit<16>>(STREAM_SUBSCRIBER_CELLS) stream_subscriber_port;
    @name(".MyEgress.stream_subscriber_gen")
    register<bit<32>>(STREAM_SUBSCRIBER_CELLS) stream_subscriber_gen;

    /* Membership (STREAM_MEMBER_CELLS): generation of the stream the       */
    /* reader opened or subscribed to, and who it is (IPv4 ++ UDP port).    */
    @name(".MyEgress.stream_member_gen")
    register<bit<32>>(STREAM_MEMBER_CELLS) stream_member_gen;
    @name(".MyEgress.stream_member_who")
    register<bit<48>>(STREAM_MEMBER_CELLS) stream_member_who;

    /* What the stream join did, by stream_event_t.                         */
    @name(".MyEgress.stream_events")
    counter(STREAM_EVENT_COUNT, CounterType.packets_and_bytes) stream_events;

    @name(".MyEgress.count_stream")
    action count_stream(in stream_event_t event) {
        stream_events.count((bit<32>)(bit<8>)event);
    }

    /* ---- configuration ---------------------------------------------------- */

    /* idle_us: a stream with no activity for this long ends (keep it about */
    /* the readers' retry timeout: a subscriber falls back to GETting the   */
    /* rest when pushes stop that long); epoch: != 0, a new number ends     */
    /* every stream at once.                                                 */
    @name(".MyEgress.set_stream_config")
    action set_stream_config(bit<32> idle_us, bit<32> epoch) {
        st.idle = (bit<48>)idle_us;
        st.epoch = epoch;
    }

    /* Streams off (the initial state): everything is forwarded as today.  */
    @name(".MyEgress.stream_off")
    action stream_off() {
        st.idle = 0;
        st.epoch = 0;
    }

    /* Keyless: the controller sets only its default action. */
    @name(".MyEgress.stream_config")
    table stream_config {
        actions = {
            set_stream_config;
            stream_off;
        }
        size = 1;
        default_action = stream_off();
    }

    /* The GET leaves towards a storage node.                               */
    @name(".MyEgress.stream_towards_storage")
    action stream_towards_storage() {
        st.towards_storage = true;
    }

    /* The switch's STORAGE ports (the controller installs the same ports   */
    /* as STORAGE in MyIngress.port_role): only the switch next to a        */
    /* storage node makes streams; in a fabric the others just forward.     */
    @name(".MyEgress.stream_storage_port")
    table stream_storage_port {
        key = {
            std_meta.egress_port: exact @name("egress_port");
        }
        actions = {
            stream_towards_storage;
            @defaultonly NoAction;
        }
        size = 512;  /* every bit<9> port */
        default_action = NoAction();
    }

    /* ---- the stream of the packet's block --------------------------------- */

    @name(".MyEgress.stream_hash")
    action stream_hash() {
        hash(st.index, HashAlgorithm.crc32, 32w0,
             { STREAM_SALT, hdr.kvp.tenant, hdr.kvp.prefix_hash },
             STREAM_ENTRIES);
    }

    /* An F_STREAM GET leaving towards a storage node: open the block's     */
    /* stream (its reader the origin), or subscribe the reader to it.       */
    @name(".MyEgress.stream_get")
    action stream_get() {
        bit<32> epoch;
        bit<48> last;
        bit<16> tenant;
        bit<64> prefix_hash;
        bit<32> server;
        bit<32> version;
        bit<16> server_port;
        bit<32> origin_ip;
        bit<16> origin_udp_port;
        bit<32> gen;
        bit<8> subscribers;
        bit<32> front;
        bit<32> join_max;
        stream_epoch.read(epoch, st.index);
        stream_last.read(last, st.index);
        stream_tenant.read(tenant, st.index);
        stream_prefix_hash.read(prefix_hash, st.index);
        stream_server.read(server, st.index);
        stream_version.read(version, st.index);
        stream_server_port.read(server_port, st.index);
        stream_origin_ip.read(origin_ip, st.index);
        stream_origin_udp_port.read(origin_udp_port, st.index);
        stream_gen.read(gen, st.index);
        stream_subscriber_count.read(subscribers, st.index);
        stream_front.read(front, st.index);
        stream_join_max.read(join_max, st.index);
        bit<32> last_gen;
        stream_last_gen.read(last_gen, 0);
        bit<32> member;
        bit<32> member_gen;
        bit<48> member_who;

        bit<48> now = std_meta.egress_global_timestamp;
        bool opened = epoch == st.epoch;
        bool live = opened && now - last < st.idle;
        bool same = tenant == hdr.kvp.tenant
                    && prefix_hash == hdr.kvp.prefix_hash
                    && server == hdr.ipv4.dst_addr
                    && version == hdr.kvp.version
                    && server_port == (bit<16>)std_meta.egress_port;
        bool is_origin = origin_ip == hdr.ipv4.src_addr
                         && origin_udp_port == hdr.udp.src_port;
        bit<48> who = hdr.ipv4.src_addr ++ hdr.udp.src_port;
        if (!live || (same && !is_origin)) {
            /* the reader's member cell: only a stream's opening and another */
            /* reader's GET use it (the origin's GETs, most of them, do not) */
            hash(member, HashAlgorithm.crc32, 32w0,
                 { STREAM_MEMBER_SALT, hdr.ipv4.src_addr, hdr.udp.src_port,
                   hdr.kvp.tenant, hdr.kvp.prefix_hash },
                 STREAM_MEMBER_CELLS);
            stream_member_gen.read(member_gen, member);
            stream_member_who.read(member_who, member);
        }
        if (!live) {
            if (opened) {
                count_stream(stream_event_t.EXPIRED);
            }
            stream_epoch.write(st.index, st.epoch);
            stream_last.write(st.index, now);
            stream_tenant.write(st.index, hdr.kvp.tenant);
            stream_prefix_hash.write(st.index, hdr.kvp.prefix_hash);
            stream_server.write(st.index, hdr.ipv4.dst_addr);
            stream_version.write(st.index, hdr.kvp.version);
            stream_server_port.write(st.index, (bit<16>)std_meta.egress_port);
            stream_origin_ip.write(st.index, hdr.ipv4.src_addr);
            stream_origin_udp_port.write(st.index, hdr.udp.src_port);
            stream_subscriber_count.write(st.index, 0);
            stream_front.write(st.index, 0);
            stream_join_max.write(st.index, 0);
            stream_recent.write(st.index, 0);
            stream_pass.write(st.index, STREAM_MAIN_PASS);
            bit<32> new_gen = last_gen + 1;
            if (new_gen == 0) {
                new_gen = 1;  /* 0 stamps nothing */
            }
            stream_last_gen.write(0, new_gen);
            stream_gen.write(st.index, new_gen);
            /* the origin is member 0 */
            bit<32> origin_cell = st.index << STREAM_SUBSCRIBER_WIDTH;
            stream_subscriber_ip.write(origin_cell, hdr.ipv4.src_addr);
            stream_subscriber_udp_port.write(origin_cell, hdr.udp.src_port);
            stream_subscriber_mac.write(origin_cell, sender_mac);
            stream_subscriber_port.write(origin_cell, (bit<16>)std_meta.ingress_port);
            stream_subscriber_gen.write(origin_cell, new_gen);
            stream_member_gen.write(member, new_gen);
            stream_member_who.write(member, who);
            count_stream(stream_event_t.OPENED);
        } else if (!same) {
            count_stream(stream_event_t.COLLISION);
        } else if (is_origin) {
            stream_last.write(st.index, now);
        } else if (member_gen == gen && member_who == who) {
            /* a subscriber's own GET for a chunk it missed: forwarded */
        } else if (member_gen == gen) {
            count_stream(stream_event_t.MEMBER_COLLISION);
        } else if ((bit<32>)subscribers >= STREAM_SUBSCRIBERS) {
            count_stream(stream_event_t.FULL);
        } else {
            bit<32> cell = (st.index << STREAM_SUBSCRIBER_WIDTH) + (bit<32>)subscribers + 1;
            stream_subscriber_ip.write(cell, hdr.ipv4.src_addr);
            stream_subscriber_udp_port.write(cell, hdr.udp.src_port);
            stream_subscriber_mac.write(cell, sender_mac);
            stream_subscriber_port.write(cell, (bit<16>)std_meta.ingress_port);
            stream_subscriber_gen.write(cell, gen);
            stream_member_gen.write(member, gen);
            stream_member_who.write(member, who);
            stream_subscriber_count.write(st.index, subscribers + 1);
            if (front > join_max) {
                /* its join point: it missed the chunks below the front */
                /* (in the patch pass: all of them, the count)          */
                stream_join_max.write(st.index, front);
            }
            count_stream(stream_event_t.JOINED);
        }
    }

    /* Load member st.next of stream st.cell (generation st.gen) into st,   */
    /* stepping over the reply's addressee (st.skip), and clone the copy on */
    /* to it; a cell a newer stream reused stops the chain.                 */
    @name(".MyEgress.stream_chain_on")
    action stream_chain_on() {
        bit<32> base = st.cell << STREAM_SUBSCRIBER_WIDTH;
        bit<32> cell = base + (bit<32>)st.next;
        bit<32> gen;
        stream_subscriber_ip.read(st.ip, cell);
        stream_subscriber_udp_port.read(st.udp_port, cell);
        stream_subscriber_mac.read(st.mac, cell);
        stream_subscriber_port.read(st.port, cell);
        stream_subscriber_gen.read(gen, cell);
        bool more = true;
        if (st.ip ++ st.udp_port == st.skip) {
            /* the addressee has the reply: the next member (one cell holds it) */
            st.next = st.next + 1;
            if (st.next >= st.total) {
                more = false;
            } else {
                cell = base + (bit<32>)st.next;
                stream_subscriber_ip.read(st.ip, cell);
                stream_subscriber_udp_port.read(st.udp_port, cell);
                stream_subscriber_mac.read(st.mac, cell);
                stream_subscriber_port.read(st.port, cell);
                stream_subscriber_gen.read(gen, cell);
            }
        }
        if (!more) {
            /* the addressee was the last member */
        } else if (gen != st.gen) {
            count_stream(stream_event_t.STALE);
        } else {
            st.chain = true;
            st.next = st.next + 1;
            clone_preserving_field_list(CloneType.E2E,
                STREAM_SESSION_BASE + (bit<32>)st.port, STREAM_CHAIN_FIELDS);
        }
    }

    /* A GET_REPLY on its way to its reader: if it is a HIT with a value    */
    /* from the stream's node (in on the stream's port) to a member, push   */
    /* it to the other members when its chunk is at or beyond the front    */
    /* (the front moves past it), when it is the first reply of a chunk the */
    /* front skipped within STREAM_RECENT below it, or, in the first pass,  */
    /* it is the origin's;                                                  */
    /* in the patch pass only chunks below the join point max are pushed.  */
    /* A reply of the block's last chunk pushed begins the patch pass (or   */
    /* ends the stream when nobody joined past chunk 0); the patch front    */
    /* reaching the join point max ends it.                                 */
    @name(".MyEgress.stream_reply")
    action stream_reply() {
        bit<32> epoch;
        bit<48> last;
        bit<16> tenant;
        bit<64> prefix_hash;
        bit<32> server;
        bit<32> version;
        bit<16> server_port;
        bit<32> origin_ip;
        bit<16> origin_udp_port;
        bit<8> subscribers;
        bit<32> front;
        bit<32> patch_front;
        bit<32> join_max;
        bit<8> pass;
        bit<64> recent;
        stream_epoch.read(epoch, st.index);
        stream_last.read(last, st.index);
        stream_tenant.read(tenant, st.index);
        stream_prefix_hash.read(prefix_hash, st.index);
        stream_server.read(server, st.index);
        stream_version.read(version, st.index);
        stream_server_port.read(server_port, st.index);
        stream_origin_ip.read(origin_ip, st.index);
        stream_origin_udp_port.read(origin_udp_port, st.index);
        stream_subscriber_count.read(subscribers, st.index);
        stream_front.read(front, st.index);
        stream_patch_front.read(patch_front, st.index);
        stream_join_max.read(join_max, st.index);
        stream_pass.read(pass, st.index);
        stream_recent.read(recent, st.index);
        stream_gen.read(st.gen, st.index);
        bit<48> now = std_meta.egress_global_timestamp;
        bit<48> addressee = hdr.ipv4.dst_addr ++ hdr.udp.dst_port;
        bool to_origin = origin_ip == hdr.ipv4.dst_addr
                         && origin_udp_port == hdr.udp.dst_port;
        bool of_stream = epoch == st.epoch
                         && tenant == hdr.kvp.tenant
                         && prefix_hash == hdr.kvp.prefix_hash;
        bool to_member = to_origin;
        if (of_stream && !to_origin) {
            /* a subscriber's own reply? its member cell says (looked at only */
            /* here: a reply to the origin, or of no stream, needs none)      */
            bit<32> member;
            hash(member, HashAlgorithm.crc32, 32w0,
                 { STREAM_MEMBER_SALT, hdr.ipv4.dst_addr, hdr.udp.dst_port,
                   hdr.kvp.tenant, hdr.kvp.prefix_hash },
                 STREAM_MEMBER_CELLS);
            bit<32> member_gen;
            bit<48> member_who;
            stream_member_gen.read(member_gen, member);
            stream_member_who.read(member_who, member);
            to_member = member_gen == st.gen && member_who == addressee;
        }
        bool answers = of_stream
                       && server == st.reply_node
                       && server_port == (bit<16>)std_meta.ingress_port
                       && to_member
                       && (version == 0 || version == hdr.kvp.version);
        bool pushable = (hdr.kvp.status == kvp_status_t.HIT_SERVER
                         || hdr.kvp.status == kvp_status_t.HIT_SWITCH)
                        && (hdr.kvp.flags & F_VALUE) != 0
                        && (hdr.kvp.flags & F_PUSHED) == 0
                        && hdr.kvp.chunk_idx < hdr.kvp.chunk_count;
        bit<32> chunk = (bit<32>)hdr.kvp.chunk_idx;
        bool patching = pass == STREAM_PATCH_PASS;
        bool beyond = chunk >= front;
        bit<32> top = front;  /* one past the highest chunk pushed in this pass */
        if (patching) {
            beyond = chunk >= patch_front && chunk < join_max;
            top = patch_front;
        }
        /* below the front, within STREAM_RECENT: was a reply of it pushed? */
        bit<32> behind = top - 1 - chunk;
        bool recent_window = chunk < top && behind < STREAM_RECENT;
        bit<64> recent_bit = 0;
        if (recent_window) {
            recent_bit = (bit<64>)1 << (bit<8>)behind;
        }
        bool skipped = recent_window && (recent & recent_bit) == 0;
        if (!answers || !pushable) {
            /* not a member's reply, or nothing to push: forwarded as usual */
        } else if (now - last >= st.idle) {
            stream_epoch.write(st.index, 0);
            count_stream(stream_event_t.EXPIRED);
        } else if (!beyond && !skipped && (patching || !to_origin)) {
            /* a member's patch of a chunk it missed: the others have it */
            count_stream(stream_event_t.PATCH);
        } else {
            stream_last.write(st.index, now);
            /* below the front (a chunk the front skipped, or the origin's   */
            /* reordered reply in the first pass): pushed once from now on   */
            bit<64> new_recent = recent | recent_bit;
            if (beyond) {
                /* the front moves past the chunk: bit 0 is the chunk itself */
                bit<32> shift = chunk + 1 - top;
                new_recent = 1;
                if (shift < STREAM_RECENT) {
                    new_recent = (recent << (bit<8>)shift) | 1;
                }
            } else if (skipped && (patching || !to_origin)) {
                count_stream(stream_event_t.REORDERED);
            }
            if (!beyond) {
                /* the front stays */
            } else if (patching) {
                stream_patch_front.write(st.index, chunk + 1);
                count_stream(stream_event_t.PATCH_PUSHED);
                if (chunk + 1 == join_max) {
                    stream_epoch.write(st.index, 0);
                    count_stream(stream_event_t.ENDED_PATCHED);
                }
            } else {
                stream_front.write(st.index, chunk + 1);
                if (hdr.kvp.chunk_idx == hdr.kvp.chunk_count - 1) {
                    if (join_max == 0) {
                        stream_epoch.write(st.index, 0);
                        count_stream(stream_event_t.ENDED_LAST);
                    } else {
                        /* the first pass is over: the patch pass, from 0 */
                        stream_pass.write(st.index, STREAM_PATCH_PASS);
                        stream_patch_front.write(st.index, 0);
                        new_recent = 0;
                        count_stream(stream_event_t.PATCH_PASS);
                    }
                }
            }
            stream_recent.write(st.index, new_recent);
            if (subscribers != 0) {
                /* the first member but the addressee; each copy clones on */
                st.cell = st.index;
                st.total = subscribers + 1;
                st.next = 0;
                st.skip = addressee;
                st.flags = (hdr.kvp.flags & ~F_CONGESTED) | F_PUSHED;
                stream_chain_on();
            }
        }
    }

    /* PUT, OK PUT_ACK or INVALIDATE of any chunk of the block: nothing     */
    /* pushed after it may be from before the write, so the stream ends.    */
    @name(".MyEgress.stream_end")
    action stream_end() {
        bit<32> epoch;
        bit<16> tenant;
        bit<64> prefix_hash;
        stream_epoch.read(epoch, st.index);
        stream_tenant.read(tenant, st.index);
        stream_prefix_hash.read(prefix_hash, st.index);
        if (epoch == st.epoch
            && tenant == hdr.kvp.tenant
            && prefix_hash == hdr.kvp.prefix_hash) {
            stream_epoch.write(st.index, 0);
            count_stream(stream_event_t.ENDED_BY_WRITE);
        }
    }

    /* A chain copy: rewrite it to its member, then clone it on.            */
    @name(".MyEgress.stream_push")
    action stream_push() {
        st.chain = false;
        if (st.port != (bit<16>)std_meta.egress_port) {
            mark_to_drop(std_meta);
            count_stream(stream_event_t.WRONG_PORT);
        } else {
            hdr.ethernet.dst_addr = st.mac;
            hdr.ipv4.dst_addr = st.ip;
            hdr.udp.dst_port = st.udp_port;
            hdr.udp.checksum = 0;
            hdr.kvp.req_id = 0;
            hdr.kvp.flags = st.flags;
            count_stream(stream_event_t.PUSHED);
        }
        if (st.next < st.total) {
            stream_chain_on();
        }
    }

    apply {
        bit<32> itype = (bit<32>)std_meta.instance_type;
        if (itype == PKT_INSTANCE_TYPE_EGRESS_CLONE) {
            if (st.chain) {
                stream_push();
            }
        } else if (hdr.kvp.isValid()) {
            stream_config.apply();
            kvp_opcode_t op = hdr.kvp.opcode;
            /* a packet on its way (a multicast copy too: coalescing's copy */
            /* of a reply for a waiter that is an origin is that origin's   */
            /* reply), not coalescing's carry copy (recirculated, not sent) */
            bool routed = itype == PKT_INSTANCE_TYPE_NORMAL
                || (itype == PKT_INSTANCE_TYPE_REPLICATION
                    && std_meta.egress_rid != COALESCE_CARRY_RID);
            bool write = op == kvp_opcode_t.PUT || op == kvp_opcode_t.INVALIDATE
                || (op == kvp_opcode_t.PUT_ACK && hdr.kvp.status == kvp_status_t.OK);
            bool bypass = (hdr.kvp.flags & F_BYPASS) != 0;
            if (st.epoch == 0) {
                /* streams off */
            } else if (write && (routed || itype == PKT_INSTANCE_TYPE_INGRESS_CLONE)) {
                stream_hash();
                stream_end();
            } else if (!routed || std_meta.egress_spec == BMV2_DROP_PORT || bypass) {
                /* a copy not sent, a fabric clone, or F_BYPASS: nothing */
            } else if (op == kvp_opcode_t.GET && (hdr.kvp.flags & F_STREAM) != 0) {
                stream_storage_port.apply();
                if (st.towards_storage) {
                    stream_hash();
                    stream_get();
                }
            } else if (op == kvp_opcode_t.GET_REPLY) {
                stream_hash();
                stream_reply();
            }
        }
    }
}
