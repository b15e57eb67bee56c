"""The Scapy layers KVP / KVPValue build the exact bytes of docs/protocol.md and dissect them back."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.packet import Packet, Raw, fuzz
from scapy.volatile import RandByte, RandInt, RandShort

from kvpool.constants import (
    KVP_MAX_CHUNK_SHIFT,
    KVP_MIN_CHUNK_SHIFT,
    KVP_UDP_PORT,
    REPLY_OF,
    Flag,
    Opcode,
    Status,
)
from kvpool.keys import BlockKey, ChunkKey
from kvpool.protocol import KVP, KVPValue, Reason, check
from kvpool.wire import Header, encode

# Protocol v2 (44-byte header). GET, tenant 7, req_id 42, prefix_hash 0x0123456789abcdef, chunk 2 of 4, version 5:
#   magic ver op st fl tenant req_id   prefix_hash      chunk_idx chunk_cnt vlen sh rs version  csum     aux
GET_HEX = "4b56 02 01 00 00 0007 0000002a 0123456789abcdef 00000002 00000004 0000 07 00 00000005 00000000 00000000"
# PUT of b"abc" (value_len 3), tenant 0, req_id 1, prefix_hash 0x10, chunk 0 of 1, version 9, 128-byte chunk
# (chunk_shift 7); the CRC-32 of "abc" + 125 zero bytes is 0x15a6ab51 (zlib.crc32, checked by hand with `python -c`).
PUT_HEX = ("4b56 02 03 00 01 0000 00000001 0000000000000010 00000000 00000001 0003 07 00 00000009 15a6ab51 00000000"
           + " 6162630000000000" + " 0000000000000000" * 15)
# The same GET in protocol v1 (36 bytes, 8-bit chunk_idx and chunk_count): refused as BAD_VERSION.
V1_GET_HEX = "4b56 01 01 00 00 0007 0000002a 0123456789abcdef 02 04 0000 00000005 00000000 00000000"


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_get_request_builds_the_documented_44_bytes():
    pkt = KVP(opcode="GET", tenant=7, req_id=42, prefix_hash=0x0123456789ABCDEF, chunk_idx=2, chunk_count=4,
              version=5)
    assert bytes(pkt) == hexbytes(GET_HEX)


def test_put_fills_flags_and_checksum_from_the_value():
    pkt = KVP(opcode="PUT", req_id=1, prefix_hash=0x10, version=9, value_len=3) / KVPValue.from_bytes(b"abc")
    assert bytes(pkt) == hexbytes(PUT_HEX)


def test_value_len_defaults_to_a_full_chunk_and_to_zero_without_value():
    assert KVP(bytes(KVP() / KVPValue())).value_len == 128
    assert KVP(bytes(KVP())).value_len == 0


def test_explicit_fields_are_not_overwritten_by_post_build():
    pkt = KVP(opcode="PUT", flags=0, value_len=7, value_csum=0xDEADBEEF) / KVPValue()
    again = KVP(bytes(pkt))
    assert (int(again.flags), again.value_len, again.value_csum) == (0, 7, 0xDEADBEEF)


def test_dissecting_the_put_bytes_gives_back_every_field():
    pkt = KVP(hexbytes(PUT_HEX))
    expected = dict(magic=0x4B56, ver=2, opcode=Opcode.PUT, status=Status.OK, tenant=0, req_id=1,
                    prefix_hash=0x10, chunk_idx=0, chunk_count=1, value_len=3, chunk_shift=7, version=9,
                    value_csum=0x15A6AB51, aux=0)
    assert {name: getattr(pkt, name) for name in expected} == expected
    assert int(pkt.flags) == Flag.VALUE
    assert isinstance(pkt.payload, KVPValue)
    assert pkt.payload.w0 == 0x6162630000000000
    assert pkt.value == b"abc"


def test_value_words_are_big_endian_w0_first():
    value = bytes(range(128))
    chunk = KVPValue.from_bytes(value)
    assert chunk.w0 == 0x0001020304050607 and chunk.w15 == int.from_bytes(value[120:], "big")
    assert bytes(chunk) == value == chunk.value_bytes


def test_truncated_value_is_kept_raw_and_reported():
    data = hexbytes(PUT_HEX)[:44 + 100]
    pkt = KVP(data)
    assert isinstance(pkt.payload, Raw)
    assert check(pkt) == Reason.VALUE_TRUNCATED


def test_a_1_kib_chunk_with_a_32_bit_index_builds_dissects_and_checks():
    value = bytes(range(256)) * 4
    pkt = KVP(opcode="PUT", prefix_hash=0x10, chunk_idx=300_000, chunk_count=300_001, chunk_shift=10,
              version=1) / Raw(value)
    data = bytes(pkt)
    assert len(data) == 44 + 1024 and data[20:28] == bytes.fromhex("000493e0000493e1") and data[30] == 10
    assert data == encode(Header(Opcode.PUT, prefix_hash=0x10, chunk_idx=300_000, chunk_count=300_001, version=1,
                                 chunk_shift=10), value)
    again = KVP(data)
    assert (again.chunk_idx, again.value_len, again.value) == (300_000, 1024, value)
    assert check(data) is None and check(data[:-1]) == Reason.VALUE_TRUNCATED


@pytest.mark.parametrize("ports", [dict(sport=40000, dport=KVP_UDP_PORT), dict(sport=KVP_UDP_PORT, dport=40000)])
def test_udp_port_7420_either_way_dissects_as_kvp(ports):
    frame = IP(src="10.0.0.1", dst="10.0.0.100") / UDP(**ports) / Raw(hexbytes(GET_HEX))
    assert IP(bytes(frame)).haslayer(KVP)


def test_building_udp_over_kvp_defaults_to_the_request_port():
    assert IP(bytes(IP() / UDP(sport=40000) / KVP()))[UDP].dport == KVP_UDP_PORT


def test_other_udp_ports_stay_plain_udp():
    frame = IP() / UDP(sport=1000, dport=2000) / Raw(hexbytes(GET_HEX))
    assert not IP(bytes(frame)).haslayer(KVP)


@pytest.mark.parametrize("request_op", list(REPLY_OF))
def test_reply_answers_its_request_by_req_id_and_key(request_op):
    request = KVP(opcode=request_op, tenant=3, req_id=99, prefix_hash=0xAB, chunk_idx=1, chunk_count=2)
    reply = KVP(opcode=REPLY_OF[request_op], tenant=3, req_id=99, prefix_hash=0xAB, chunk_idx=1, chunk_count=2,
                status=Status.HIT_SERVER)
    assert reply.answers(request)
    assert not request.answers(reply)


@pytest.mark.parametrize("change", [dict(req_id=100), dict(tenant=4), dict(prefix_hash=0xAC), dict(chunk_idx=0),
                                    dict(opcode=Opcode.PUT_ACK)])
def test_reply_with_another_req_id_key_or_opcode_does_not_answer(change):
    request = KVP(opcode="GET", tenant=3, req_id=99, prefix_hash=0xAB, chunk_idx=1, chunk_count=2)
    fields = dict(opcode=Opcode.GET_REPLY, tenant=3, req_id=99, prefix_hash=0xAB, chunk_idx=1, chunk_count=2)
    fields.update(change)
    assert not KVP(**fields).answers(request)


SPAN_GET = dict(opcode=Opcode.GET, tenant=3, req_id=0xFFFFFFFE, prefix_hash=0xAB, chunk_idx=16, chunk_count=20, aux=8)


@pytest.mark.parametrize("offset", range(4))
def test_each_reply_of_a_span_answers_its_get_and_buckets_with_it(offset):
    request = KVP(**SPAN_GET)
    reply = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=3, req_id=(0xFFFFFFFE + offset) % (1 << 32),
                prefix_hash=0xAB, chunk_idx=16 + offset, chunk_count=20, aux=offset)
    assert reply.answers(request) and reply.hashret() == request.hashret()
    assert reply.span_offset == offset and request.span == 8


@pytest.mark.parametrize("change", [dict(aux=8, req_id=6, chunk_idx=24), dict(aux=2, req_id=1), dict(aux=2, chunk_idx=17),
                                   dict(aux=0, req_id=0)])
def test_a_reply_outside_the_span_or_off_its_offset_does_not_answer(change):
    fields = dict(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=3, req_id=0, prefix_hash=0xAB,
                  chunk_idx=18, chunk_count=20, aux=2)
    fields.update(change)
    assert not KVP(**fields).answers(KVP(**SPAN_GET))


@pytest.mark.parametrize(("aux", "span"), [(0, 1), (1, 1), (2, 2), (16, 16), (17, 1), (0xFFFFFFFF, 1)])
def test_a_gets_span_is_its_aux_within_the_limit_else_one(aux, span):
    assert KVP(opcode="GET", aux=aux).span == span
    assert KVP(opcode="STAT", aux=aux).span == 1


def test_the_version_refusals_aux_is_no_offset():
    refusal = KVP(opcode="GET_REPLY", status="ERR_MALFORMED", req_id=5, aux=2)
    assert refusal.span_offset == 0 and refusal.answers(KVP(opcode="GET", req_id=5))


def test_summary_names_a_span_and_an_offset():
    assert "span=8" in KVP(**SPAN_GET).mysummary()
    assert "offset=3" in KVP(opcode="GET_REPLY", status="HIT_SERVER", aux=3).mysummary()


def test_summary_names_opcode_key_and_status():
    text = KVP(opcode="GET_REPLY", req_id=5, prefix_hash=0xFF, status="HIT_SWITCH").mysummary()
    assert "GET_REPLY" in text and "0x00000000000000ff" in text and "HIT_SWITCH" in text


FUZZ_TRIES = 300
"""Seeded tries per template; with the chunk padded to `1 << chunk_shift`, 176 in 200 of the slot-sized ones
raised OverflowError or MemoryError."""

FUZZ_TEMPLATES = {
    "header only": lambda: KVP(),
    "slot-sized value": lambda: KVP() / KVPValue(),
    # fuzz() leaves fields whose default is None (filled in post_build) alone; draw them too.
    "lengths and checksum random": lambda: KVP(flags=RandByte(), value_len=RandShort(), value_csum=RandInt())
    / KVPValue(),
    "1 KiB raw value": lambda: KVP() / Raw(bytes(range(256)) * 4),
    "over IP and UDP": lambda: IP() / UDP(sport=40000) / KVP() / KVPValue(),
}


@pytest.fixture
def seeded_random():
    """Scapy's fuzz() draws from the `random` module: seed it, and give the rest of the run its state back."""
    state = random.getstate()
    yield random.seed
    random.setstate(state)


@pytest.mark.parametrize("template", list(FUZZ_TEMPLATES), ids=list(FUZZ_TEMPLATES))
def test_every_fuzzed_packet_builds_dissects_back_and_gets_a_verdict(template, seeded_random):
    seeded_random(20_21)
    illegal_shifts = 0
    for attempt in range(FUZZ_TRIES):
        packet: Packet = fuzz(FUZZ_TEMPLATES[template]())
        data = bytes(packet)
        again = IP(data) if packet.haslayer(IP) else KVP(data)
        assert bytes(again) == data, f"try {attempt}: {again!r}"
        kvp = again[KVP] if again.haslayer(KVP) else None
        if kvp is None:  # a fuzzed UDP port that is not 7420: plain UDP, as for any other port
            assert again[UDP].sport != KVP_UDP_PORT and again[UDP].dport != KVP_UDP_PORT
            continue
        kvp.mysummary()
        assert check(kvp) is None or isinstance(check(kvp), Reason)
        illegal_shifts += not KVP_MIN_CHUNK_SHIFT <= kvp.chunk_shift <= KVP_MAX_CHUNK_SHIFT
    assert illegal_shifts > FUZZ_TRIES // 2, "most fuzzed chunk_shift values should be outside 7..13"


@pytest.mark.parametrize("chunk_shift", [0, 6, 14, 40, 255])
def test_an_illegal_chunk_shift_is_sent_as_it_is_and_the_checksum_covers_the_payload(chunk_shift):
    data = bytes(KVP(opcode="PUT", chunk_shift=chunk_shift) / Raw(b"abc"))
    assert len(data) == 44 + 3 and data[30] == chunk_shift
    assert Header.unpack(data).value_len == 3 and Header.unpack(data).value_csum == zlib.crc32(b"abc")
    assert check(data) == Reason.BAD_CHUNK_SIZE


def test_a_value_len_that_disagrees_with_the_value_is_sent_as_it_is():
    data = bytes(KVP(opcode="PUT", value_len=0xFFFF, chunk_shift=13) / Raw(b"abc"))
    assert len(data) == 44 + 3 and Header.unpack(data).value_len == 0xFFFF
    assert Header.unpack(data).value_csum == zlib.crc32(b"abc".ljust(8192, b"\0"))
    assert check(data) == Reason.VALUE_TRUNCATED


@settings(deadline=None)  # a loaded machine must not turn a slow example into a failure
@given(payload=st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda b: b"KV\x02" + b),
                         st.binary(min_size=41, max_size=300).map(lambda b: b"KV\x02\x03\x00\x01" + b)))
def test_any_udp_payload_on_port_7420_dissects_and_rebuilds_the_same_bytes(payload):
    frame = bytes(IP(src="10.0.0.1", dst="10.0.0.100") / UDP(sport=40000, dport=KVP_UDP_PORT) / Raw(payload))
    again = IP(frame)
    assert bytes(again) == frame
    verdict = check(payload)
    assert verdict is None or isinstance(verdict, Reason)
    if again.haslayer(KVP):
        again[KVP].mysummary()
        assert check(again[KVP]) == verdict


GOOD_GET = Header(Opcode.GET, chunk_count=2, chunk_idx=1).pack()
GOOD_PUT = encode(Header(Opcode.PUT, version=1), b"x")

MALFORMED = [
    ("payload shorter than the header", GOOD_GET[:43], Reason.SHORT_HEADER),
    ("payload shorter than magic and version", GOOD_GET[:2], Reason.SHORT_HEADER),
    ("wrong magic", b"XX" + GOOD_GET[2:], Reason.NOT_KVP),
    ("version 3", Header(Opcode.GET, ver=3).pack(), Reason.BAD_VERSION),
    ("a v1 GET (36 bytes)", hexbytes(V1_GET_HEX), Reason.BAD_VERSION),
    ("a v1 header cut to 3 bytes", hexbytes(V1_GET_HEX)[:3], Reason.BAD_VERSION),
    ("opcode 0x7f", Header(0x7F).pack(), Reason.UNKNOWN_OP),
    ("chunk_shift 6 (64 B)", Header(Opcode.GET, chunk_shift=6).pack(), Reason.BAD_CHUNK_SIZE),
    ("chunk_shift 14 (16 KiB)", Header(Opcode.GET, chunk_shift=14).pack(), Reason.BAD_CHUNK_SIZE),
    ("F_VALUE with 127 value bytes", GOOD_PUT[:-1], Reason.VALUE_TRUNCATED),
    ("F_VALUE with 1 KiB chunk, 1,023 value bytes", encode(Header(Opcode.PUT, chunk_shift=10), b"x")[:-1],
     Reason.VALUE_TRUNCATED),
    ("PUT without F_VALUE", Header(Opcode.PUT, version=1).pack() + bytes(128), Reason.VALUE_MISSING),
    ("SLOT_WRITE without F_VALUE", Header(Opcode.SLOT_WRITE).pack(), Reason.VALUE_MISSING),
    ("chunk_count 0", Header(Opcode.GET, chunk_count=0).pack(), Reason.ZERO_CHUNK_COUNT),
    ("chunk_idx == chunk_count", Header(Opcode.GET, chunk_idx=3, chunk_count=3).pack(), Reason.CHUNK_IDX_RANGE),
    ("value_len 129", Header(Opcode.GET, value_len=129).pack(), Reason.VALUE_LEN_RANGE),
    ("value_len 8193 in an 8 KiB chunk", Header(Opcode.GET, value_len=8193, chunk_shift=13).pack(),
     Reason.VALUE_LEN_RANGE),
]


@pytest.mark.parametrize(("what", "data", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_check_names_the_broken_rule(what, data, reason):
    assert check(data) == reason


@pytest.mark.parametrize("data", [GOOD_GET, GOOD_PUT, Header(Opcode.STAT).pack()])
def test_check_accepts_valid_messages(data):
    assert check(data) is None
    assert check(KVP(data)) is None


def test_unknown_opcode_maps_to_err_unknown_op_and_the_rest_to_err_malformed():
    assert Reason.UNKNOWN_OP.status == Status.ERR_UNKNOWN_OP
    assert {r.status for r in Reason if r is not Reason.UNKNOWN_OP} == {Status.ERR_MALFORMED}


headers = st.builds(
    Header,
    opcode=st.sampled_from(list(Opcode)),
    status=st.sampled_from(list(Status)),
    flags=st.integers(0, 0xFE).map(lambda f: f & ~Flag.VALUE),
    tenant=st.integers(0, 0xFFFF),
    req_id=st.integers(0, 0xFFFFFFFF),
    prefix_hash=st.integers(0, 2**64 - 1),
    chunk_idx=st.integers(0, 2**32 - 1),
    chunk_count=st.integers(0, 2**32 - 1),
    value_len=st.integers(0, 0xFFFF),
    version=st.integers(0, 0xFFFFFFFF),
    value_csum=st.integers(0, 0xFFFFFFFF),
    aux=st.integers(0, 0xFFFFFFFF),
)


@settings(deadline=None)  # a loaded machine must not turn a slow example into a failure
@given(header=headers, value=st.one_of(st.none(), st.binary(max_size=128)))
def test_struct_codec_and_scapy_layer_agree_byte_for_byte(header, value):
    data = encode(header, value)
    pkt = KVP(data)
    assert bytes(pkt) == data
    for name in ("opcode", "status", "tenant", "req_id", "prefix_hash", "chunk_idx", "chunk_count", "version",
                 "aux"):
        assert getattr(pkt, name) == getattr(header, name), name
    if value is not None:
        assert pkt.value == value and pkt.value_csum == zlib.crc32(value.ljust(128, b"\0"))
    assert Header.unpack(bytes(KVP(**{f: getattr(header, f) for f in (
        "opcode", "status", "tenant", "req_id", "prefix_hash", "chunk_idx", "chunk_count", "value_len",
        "version", "value_csum", "aux")}, flags=header.flags))) == header


def test_constants_wire_and_prefix_hash_import_without_scapy():
    import subprocess
    import sys

    code = ("import sys, kvpool.constants, kvpool.wire, kvpool.prefix_hash, kvpool.blocks; "
            "print(any(m == 'scapy' or m.startswith('scapy.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_a_header_names_its_chunk_and_block_with_the_shared_key_types():
    h = Header.unpack(hexbytes(GET_HEX))
    assert h.key == ChunkKey(7, 0x0123456789ABCDEF, 2) and type(h.key) is ChunkKey
    assert h.block == BlockKey(7, 0x0123456789ABCDEF) == h.key.block


def test_a_hand_built_header_out_of_range_has_no_key():
    with pytest.raises(ValueError, match="tenant"):
        _ = Header(Opcode.GET, tenant=1 << 16).key


@settings(deadline=None)  # a loaded machine must not turn a slow example into a failure
@given(st.integers(0, 0xFFFF), st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 32) - 1))
def test_the_unchecked_fast_path_makes_the_same_keys_as_the_constructor(tenant, prefix_hash, chunk):
    fast, checked = ChunkKey.from_wire(tenant, prefix_hash, chunk), ChunkKey(tenant, prefix_hash, chunk)
    assert fast == checked and hash(fast) == hash(checked) and {fast: 1}[checked] == 1
    assert BlockKey.from_wire(tenant, prefix_hash) == checked.block == BlockKey(tenant, prefix_hash)
    assert hash(checked.block) == hash(BlockKey(tenant, prefix_hash))
