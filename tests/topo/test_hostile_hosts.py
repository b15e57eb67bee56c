"""Issue 9's hostile hosts, end to end on the star testbed, on the softswitch and on BMv2.

h3 behaves as a hostile tenant would: raw frames with forged sources (a GET_REPLY in the storage node's name
right after a PUT invalidated the slot, a PUT_ACK OK of version 0xFFFFFFFF, a TIER_MOVE in the controller's
name), a PUT of 0xFFFFFFFF the storage node refuses or never commits, an INSERT with F_PIN carrying its own
bytes, a TIER_MOVE to ABSENT, and 10,000 fuzzed datagrams. h1 and h2 are the honest readers and writers. Every
read is judged against the model of the storage node (forged bytes are bytes no write had: a wrong read);
figures per scenario go to `out/coherence/hostile-<target>.json`. The module also repeats one admission path
(re-admission by CLI pin) so BMv2 runs the central coherence scenario too.
"""

from __future__ import annotations

import os
import shutil

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from kvpool.constants import KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.wire import Header, encode
from kvtesting.coherence import Figures
from tests.topo.coherence_bed import OUT, Block, Pool, assert_no_wrong, eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.mininet,
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="Debian's mininet package (mnexec) is not installed"),
]

HOSTS = ("h1", "h2", "h3")
CONTROLLER_MGMT_IP = "172.31.74.1"
"""The management link's root-namespace end: where the controller's TIER_MOVEs come from."""
READS = 60


@pytest.fixture(scope="module", params=["soft", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def pool(module_testbed, request):
    if request.param == "bmv2" and shutil.which("simple_switch_grpc") is None:
        pytest.skip("BMv2 (simple_switch_grpc) is not installed")
    bed = module_testbed(target=request.param, hosts=len(HOSTS))
    pool = Pool(bed, HOSTS, Figures(OUT / f"hostile-{request.param}.json"))
    yield pool
    pool.close()
    bed.stop()  # now, not at the module's end: the next target's testbed uses the same interface names


def endpoint(pool: Pool, name: str):
    return next(ep for ep in pool.bed.plan.endpoints if ep.name == name)


def frame(pool: Pool, src: str, dst: str, header: Header, value: bytes | None = None, *, src_ip: str | None = None,
          sport: int = KVP_UDP_PORT, dport: int = KVP_UDP_PORT) -> str:
    """An Ethernet frame (hex) in `src`'s name (`src_ip` forges the address) to `dst`, for h3's agent to send."""
    s, d = endpoint(pool, src), endpoint(pool, dst)
    payload = encode(header, value) if value is not None else header.pack()
    packet = (Ether(src=s.mac, dst=d.mac) / IP(src=src_ip or s.ip.split("/")[0], dst=d.ip.split("/")[0], ttl=64)
              / UDP(sport=sport, dport=dport, chksum=0) / payload)
    return bytes(packet).hex()


def forwarded_flags(pool: Pool, marker: bytes) -> dict[str, int]:
    """KVP flags of the frames carrying `marker` that s1 sent out of its ports, from its pcaps (the softswitch
    writes them as it goes; other targets may not have flushed them: then nothing is counted)."""
    from scapy.utils import rdpcap

    flags: dict[str, int] = {}
    for path in sorted((pool.bed.switch_dir("s1") / "pcap").glob("*_out.pcap")):
        try:
            packets = rdpcap(str(path))
        except Exception:  # a pcap still being written may end mid-record
            continue
        for packet in packets:
            data = bytes(packet)
            if marker in data and UDP in packet:
                payload = bytes(packet[UDP].payload)
                name = "F_BYPASS set" if payload[5] & Flag.BYPASS else "F_BYPASS clear"
                flags[name] = flags.get(name, 0) + 1
    return flags


def cached(pool: Pool, block: Block, tally, reader: str = "h1") -> None:
    """Write `block`, pin it and read until the switch serves it."""
    pool.put(reader, block, tally)
    pool.pin(block)
    pool.read_until_switch(reader, block, tally)


def test_readmission_by_pin_never_serves_the_old_value(pool):
    tally = pool.figures["re-admission: CLI pin"]
    v1, v2 = Block.of(0xBAD0_0001, 1, size=100), Block.of(0xBAD0_0001, 2, size=100)
    cached(pool, v1, tally)
    pool.evict(v1)
    pool.put("h2", v2, tally)
    pool.pin(v2)
    pool.read_until_switch("h1", v2, tally)
    pool.reads("h2", [v2], tally, count=READS)
    assert_no_wrong(tally)


def test_forged_get_reply_from_a_host_never_reaches_a_reader_as_a_switch_hit(pool):
    """Five rounds: h2 PUTs a new version (the PUT invalidates the cached copy; acknowledged), and right then h3
    sends, in the storage node's name, GET_REPLY HIT_SERVER frames with F_VALUE, a valid CRC and its own bytes
    for every chunk, at the acknowledged version and above. h1 and h2 then read: never the forged bytes."""
    tally = pool.figures["forged GET_REPLY from h3"]
    ph = 0xBAD0_0002
    cached(pool, Block.of(ph, 1), tally)
    forged_total = 0
    for version in range(2, 7):
        block = Block.of(ph, version)
        pool.put("h2", block, tally)
        frames = []
        for forged_version in (version, version + 1, 0xFFFFFFFF):
            for i in range(block.chunks):
                forged = (f"FORGED-by-h3-v{forged_version}-" * 8).encode()[:128]
                header = Header(Opcode.GET_REPLY, status=Status.HIT_SERVER, prefix_hash=ph, chunk_idx=i,
                                chunk_count=block.chunks, version=forged_version)
                frames += [frame(pool, "st1", dst, header, forged, src_ip="10.0.0.100", dport=40000 + i)
                           for dst in ("h1", "h2")] * 5
        forged_total += pool.agents["h3"].call("frames", frames=frames)["sent"]
        answers = pool.concurrently({h: ("reads", {"blocks": [[ph, block.chunks]], "count": READS // 2})
                                     for h in ("h1", "h2")})
        for answer in answers.values():
            tally.count_reads(answer["reads"], pool.model)
        pool.read_until_switch("h1", block, tally)  # refilled from the storage node, with its bytes
    tally.notes["forged frames sent"] = forged_total
    passed_on = tally.notes["forged frames the switch passed on, by flags"] = forwarded_flags(pool, b"FORGED-by-h3")
    pool.figures.save()
    assert_no_wrong(tally)
    assert "F_BYPASS clear" not in passed_on, passed_on  # delivered, but marked: no switch downstream fills


def test_insert_with_pin_and_a_value_from_a_host_never_plants_bytes(pool):
    """h3 INSERTs with F_PIN and its own bytes, claiming the stored version and a newer one, for a stored block
    and for one never written: readers get the storage node's bytes, or nothing."""
    tally = pool.figures["INSERT with F_PIN and a value from h3"]
    stored, unwritten = Block.of(0xBAD0_0003, 1), Block.of(0xBAD0_0004, 1)
    pool.put("h1", stored, tally)
    answers = []
    for block in (stored, unwritten):
        for version in (1, 9):
            for i in range(block.chunks):
                answers.append(pool.agents["h3"].call(
                    "insert", ph=block.prefix_hash, chunk=i, chunks=block.chunks, pin=True, version=version,
                    value=(b"PLANTED-by-h3 " * 10)[:128].hex()))
    tally.notes["INSERT answers"] = sorted({a["status"] for a in answers})
    pool.read_until_switch("h1", stored, tally)
    pool.reads("h2", [stored], tally, count=READS)
    unwritten_reads = pool.reads("h2", [unwritten], tally, count=10)  # MISS each time: nothing to serve
    tally.notes["reads of the never-written block that returned bytes"] = sum("data" in r for r in unwritten_reads)
    assert_no_wrong(tally, errors_expected=True)  # the never-written block: MISS
    assert tally.notes["reads of the never-written block that returned bytes"] == 0


def test_refused_or_forged_put_of_version_max_does_not_make_a_key_uncacheable(pool):
    """From h3: a PUT of version 0xFFFFFFFF with a bad checksum (refused), one chunk of a 2-chunk PUT of
    0xFFFFFFFF (never committed), and a PUT_ACK OK of 0xFFFFFFFF in the storage node's name. Then h1 PUTs v2:
    the switch serves v2 (HIT_SWITCH), also after evict and pin."""
    tally = pool.figures["PUT 0xFFFFFFFF refused / forged ack"]
    ph = 0xBAD0_0005
    v1, v2 = Block.of(ph, 1), Block.of(ph, 2)
    cached(pool, v1, tally)
    bad = Header(Opcode.PUT, prefix_hash=ph, chunk_idx=0, chunk_count=v1.chunks, version=0xFFFFFFFF)
    value = b"deny-this-key".ljust(128, b"!")
    bad_csum = bad.replace(flags=Flag.VALUE, value_len=128, value_csum=0x1234).pack() + value
    incomplete = encode(bad, value)  # chunk 0 of 2 only: staged, never committed
    forged_ack = Header(Opcode.PUT_ACK, status=Status.OK, prefix_hash=ph, chunk_idx=0, chunk_count=v1.chunks,
                        version=0xFFFFFFFF)
    h3 = endpoint(pool, "h3")
    frames = [(Ether(src=h3.mac, dst=endpoint(pool, "st1").mac) / IP(src=h3.ip.split("/")[0], dst="10.0.0.100")
               / UDP(sport=41000, dport=KVP_UDP_PORT, chksum=0) / payload) for payload in (bad_csum, incomplete)]
    sent = pool.agents["h3"].call("frames", frames=[bytes(f).hex() for f in frames]
                                  + [frame(pool, "st1", "h1", forged_ack, src_ip="10.0.0.100", dport=40000)] * 3)
    tally.notes["frames from h3"] = sent["sent"]
    pool.reads("h1", [v1], tally, count=10)  # v1 is still the newest committed version
    pool.put("h1", v2, tally)
    pool.read_until_switch("h2", v2, tally)
    pool.evict(v2)
    pool.pin(v2)
    pool.read_until_switch("h1", v2, tally)
    pool.reads("h2", [v2], tally, count=READS)
    assert_no_wrong(tally)


def test_tier_move_to_absent_from_a_host_deletes_nothing(pool):
    """h3 asks the storage node to drop a block (TIER_MOVE to ABSENT), as itself and in the controller's name:
    the switch drops it (a control opcode from a host port) or the storage node refuses it; the block stays."""
    tally = pool.figures["TIER_MOVE to ABSENT from h3"]
    block = Block.of(0xBAD0_0006, 1)
    pool.put("h1", block, tally)
    answers = [pool.agents["h3"].call("tier_move", ph=block.prefix_hash, chunk=i, tier="ABSENT", retries=1,
                                      timeout=0.5) for i in range(block.chunks)]
    spoofed = Header(Opcode.TIER_MOVE, prefix_hash=block.prefix_hash, chunk_idx=0, chunk_count=block.chunks, aux=0)
    pool.agents["h3"].call("frames", frames=[frame(pool, "h3", "st1", spoofed, src_ip=CONTROLLER_MGMT_IP,
                                                   sport=41001)] * 3)
    tally.notes["TIER_MOVE answers"] = sorted({a["status"] for a in answers})
    assert all(a["status"] in ("TIMEOUT", "ERR_DENIED") for a in answers), answers
    assert pool.stored(block), "the storage node dropped the block"
    pool.reads("h2", [block], tally, count=20)
    assert tally.read_errors == 0, tally
    assert_no_wrong(tally)


def test_ten_thousand_fuzzed_datagrams_crash_nothing(pool):
    """10,000 malformed or random KVP datagrams from h3 to the storage node's port, through the switch: the
    switch, the controller and the storage node keep running, a cached block is still served by the switch and
    a new write is read back."""
    tally = pool.figures["fuzz: 10,000 datagrams from h3"]
    block = Block.of(0xBAD0_0007, 1)
    cached(pool, block, tally)
    answer = pool.agents["h3"].call("fuzz", count=10_000, seed=9)
    tally.notes["fuzz"] = answer
    alive = {what: pool.bed.process(what).process.poll() is None
             for what in ("switch s1", "controller s1", "storage st1")}
    tally.notes["alive after fuzz"] = alive
    assert all(alive.values()), alive
    assert pool.status()["primary"]
    pool.read_until_switch("h1", block, tally)
    newer = Block.of(block.prefix_hash, 2)
    pool.put("h2", newer, tally)
    eventually("the new version served by the switch",
               lambda: all((pool.reads("h1", [newer], tally, count=1) or [{}])[-1].get("switch") or [False]))
    pool.reads("h2", [newer], tally, count=READS)
    assert_no_wrong(tally)
