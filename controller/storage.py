"""A UDP client for the storage node's control requests (TIER_MOVE, STAT, GET), matched to replies by req_id.

Every call waits up to its timeout: the pool makes them from its storage worker (`controller.storagework`), never
under the pool lock or on the P4Runtime stream thread."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from dataclasses import dataclass

from controller.tiers import StoredChunk
from kvpool import wire
from kvpool.constants import KVP_HEADER_LEN, KVP_SLOT_SHIFT, KVP_UDP_PORT, Flag, Opcode, Status
from kvpool.keys import ChunkKey
from policies.base import Tier


@dataclass(frozen=True)
class StorageClientOptions:
    """How the controller reaches one storage node (how a node itself runs is `kvpool.server.StorageOptions`)."""

    host: str
    """IPv4 address of the storage node."""
    port: int = KVP_UDP_PORT
    """Its KVP port."""
    timeout: float = 0.5
    """Seconds to wait for a reply before giving up (the caller logs and carries on)."""


class UdpStorageNode:
    """Talks KVP to one storage node; thread-safe (one request in flight at a time)."""

    def __init__(self, options: StorageClientOptions) -> None:
        self.options = options
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._lock = threading.Lock()
        self._req_ids = itertools.count(1)

    def close(self) -> None:
        self._socket.close()

    def _ask(self, header: wire.Header, reply_opcode: int) -> wire.Header | None:
        found = self._exchange(header, reply_opcode)
        return None if found is None else found[0]

    def _exchange(self, header: wire.Header, reply_opcode: int) -> tuple[wire.Header, bytes] | None:
        with self._lock:
            req_id = next(self._req_ids) & 0xFFFFFFFF
            self._socket.sendto(header.replace(req_id=req_id).pack(), (self.options.host, self.options.port))
            deadline = time.monotonic() + self.options.timeout
            while (left := deadline - time.monotonic()) > 0:
                self._socket.settimeout(left)
                try:
                    data, _ = self._socket.recvfrom(65535)  # a chunk may be up to 8 KiB (protocol v2)
                except (TimeoutError, OSError):
                    return None
                if len(data) < KVP_HEADER_LEN or wire.check(data) is not None:
                    continue
                reply = wire.Header.unpack(data)
                if reply.req_id == req_id and reply.opcode == reply_opcode:
                    return reply, data
            return None

    def tier_move(self, key: ChunkKey, tier: Tier, residual: float = 0.0) -> bool:
        score = min(max(round(residual * 1000), 0), (1 << 24) - 1)  # aux bits 31..8: residual × 1000
        header = wire.Header(Opcode.TIER_MOVE, tenant=key.tenant, prefix_hash=key.prefix_hash,
                             chunk_idx=key.chunk, chunk_count=key.chunk + 1, aux=(score << 8) | int(tier))
        reply = self._ask(header, Opcode.TIER_MOVE_ACK)
        return reply is not None and reply.status == Status.OK

    def fetch(self, key: ChunkKey) -> StoredChunk | None:
        """GET straight from the storage node (not through the switch): its version, chunk_count and value; None
        when absent, or when its chunks are larger than a slot (protocol v2: only 128-byte chunks are stored)."""
        header = wire.Header(Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk,
                             chunk_count=key.chunk + 1)
        found = self._exchange(header, Opcode.GET_REPLY)
        if found is None:
            return None
        reply, data = found
        value = wire.value_of(data)
        if reply.status != Status.HIT_SERVER or not reply.flags & Flag.VALUE or value is None:
            return None
        if reply.chunk_shift != KVP_SLOT_SHIFT:  # larger than a slot: coalesced by the switch, never stored
            return None
        return StoredChunk(reply.version, reply.chunk_count, value[: reply.value_len])

    def stat(self, key: ChunkKey) -> int | None:
        header = wire.Header(Opcode.STAT, tenant=key.tenant, prefix_hash=key.prefix_hash,
                             chunk_idx=key.chunk, chunk_count=key.chunk + 1)
        reply = self._ask(header, Opcode.STAT_REPLY)
        return None if reply is None else reply.aux
