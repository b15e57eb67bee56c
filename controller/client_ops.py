"""The controller's client-facing KVP service: INSERT and LOOKUP_META punted by the switch, answered by packet-out.

Clients address these requests to the storage node; the switch punts them to us and we answer in the storage
node's name by swapping the Ethernet and IP addresses and the UDP ports of the request (docs/protocol.md,
*Transport*), so the reply looks exactly like one from the storage node.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.pool import Denied, PinError, PoolManager
from kvpool import wire
from kvpool.constants import Flag, Opcode, Status
from kvpool.keys import ChunkKey

log = logging.getLogger(__name__)

REPLY_TTL = 64
"""TTL of our replies (Linux's default, as the switch's own replies)."""


@dataclass(frozen=True, slots=True)
class Request:
    """A punted client request, dissected."""

    frame: Ether
    header: wire.Header
    value: bytes | None
    """The value chunk's meaningful bytes, when F_VALUE was set."""

    @property
    def key(self) -> ChunkKey:
        return ChunkKey(self.header.tenant, self.header.prefix_hash, self.header.chunk_idx)

    @property
    def client(self) -> str:
        return self.frame[IP].src


def parse(frame_bytes: bytes) -> tuple[Request | None, str]:
    """Dissect a punted frame; (None, why) when it is not a well-formed KVP request we can answer."""
    try:
        frame = Ether(frame_bytes)
    except Exception as exc:  # scapy raises assorted errors on garbage; a bad packet must not stop us
        return None, f"undissectable frame: {exc!r}"
    if IP not in frame or UDP not in frame:
        return None, "not IPv4/UDP"
    payload = bytes(frame[UDP].payload)
    reason = wire.check(payload)
    if reason is not None and len(payload) < wire.HEADER.size:
        return None, f"malformed KVP ({reason.value})"
    header = wire.Header.unpack(payload)
    if reason is not None:
        return Request(frame, header, None), f"malformed KVP ({reason.value})"
    value = wire.value_of(payload)
    return Request(frame, header, None if value is None else value[: header.value_len]), ""


def reply_frame(request: Request, header: wire.Header) -> bytes:
    """The reply to `request`: addresses and ports swapped, UDP checksum 0 (docs/protocol.md)."""
    frame = request.frame
    ip, udp = frame[IP], frame[UDP]
    packet = (Ether(src=frame.dst, dst=frame.src)
              / IP(src=ip.dst, dst=ip.src, ttl=REPLY_TTL, id=ip.id)
              / UDP(sport=udp.dport, dport=udp.sport, chksum=0)
              / header.pack())
    return bytes(packet)


class PrefixChains:
    """Links an INSERTed block to its parent: the block the same client inserted at depth − 1 (same tenant, chunk).

    INSERT carries the block's depth but not its parent's hash; clients announce a prompt's blocks in prefix
    order, so the previous depth's block from the same client is its parent.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._last: dict[tuple[str, int, int, int], int] = {}
        self.limit = limit

    def parent(self, client: str, key: ChunkKey, depth: int) -> ChunkKey | None:
        if len(self._last) >= self.limit:
            self._last.clear()
        self._last[(client, key.tenant, key.chunk, depth)] = key.prefix_hash
        if depth == 0:
            return None
        parent_hash = self._last.get((client, key.tenant, key.chunk, depth - 1))
        return None if parent_hash is None else ChunkKey(key.tenant, parent_hash, key.chunk)


class ClientService:
    """Answers punted INSERT / LOOKUP_META with the pool's view."""

    def __init__(self, pool: PoolManager) -> None:
        self.pool = pool
        self.chains = PrefixChains()

    def handle(self, frame_bytes: bytes) -> bytes | None:
        """The reply frame for a punted request, or None when there is nothing to answer."""
        request, problem = parse(frame_bytes)
        if request is None:
            log.warning("ignoring punted packet: %s", problem)
            return None
        h = request.header
        if h.opcode not in (Opcode.INSERT, Opcode.LOOKUP_META):
            log.warning("ignoring punted opcode %#x", h.opcode)
            return None
        reply_opcode = Opcode.INSERT_ACK if h.opcode == Opcode.INSERT else Opcode.LOOKUP_META_REPLY
        base = h.replace(opcode=reply_opcode, flags=0, value_len=0, value_csum=0, aux=0)
        if problem:
            return reply_frame(request, base.replace(status=Status.ERR_MALFORMED))
        self.pool.metrics.count("client_requests", Opcode(h.opcode).name)
        if h.opcode == Opcode.LOOKUP_META:
            bitmap, version = self.pool.lookup(request.key)
            status = Status.OK if bitmap else Status.MISS
            return reply_frame(request, base.replace(status=status, aux=bitmap, version=version))
        depth, tokens = h.aux >> 16, h.aux & 0xFFFF
        parent = self.chains.parent(request.client, request.key, depth)
        try:
            bitmap = self.pool.offer(request.key, depth=depth, tokens=tokens, parent=parent, value=request.value,
                                     version=h.version, pin=bool(h.flags & Flag.PIN), host=request.client,
                                     chunk_shift=h.chunk_shift if h.flags & Flag.VALUE else None)
        except (PinError, Denied) as exc:
            log.info("INSERT %s refused: %s", request.key, exc)
            bitmap, _ = self.pool.lookup(request.key)
            return reply_frame(request, base.replace(status=Status.ERR_DENIED, aux=bitmap))
        return reply_frame(request, base.replace(status=Status.OK, aux=bitmap))
