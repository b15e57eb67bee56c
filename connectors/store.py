"""`PoolStore`: what a KV connector calls to use the pool, over `kvpool.client.KVPClient` (standard library only).

Three calls, each safe to make from an engine's hot path:

* `leading_hits(keys)`: how many leading blocks of a request the pool holds, in ONE round trip: a probe per key
  (STAT by default, or LOOKUP_META), all sent together in one window; no block data moves. A scheduler asks this
  for every new request.
* `get(key)`: a whole block, or None (not there, or the pool failed).
* `put(key, blob)`: store a block; False when it was not stored (pool full: counted in `dropped_full`).

None of them raises into the engine. A pool that times out or refuses the socket trips a circuit breaker
(`connectors.breaker`): calls then return "nothing" (0, None, False) at once until the back-off has passed, and
the outage is logged once. A request then simply misses the pool and the engine computes its prefill.

Why STAT is the default probe: the storage node answers it from what it has committed (OK if stored, else MISS),
on every path, with or without a switch. LOOKUP_META is the data plane's metadata query: behind a switch it is
punted to the controller, which answers with the blocks it tracks (announced by INSERT), so it suits clients
that announce their blocks; without a switch the storage node answers it as it answers STAT.

A `PoolStore` holds one client (one socket) and serialises its calls; a connector that loads and saves in
different threads gives each its own `PoolStore`.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
import random
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from connectors.breaker import BreakerOptions, CircuitBreaker
from kvpool.client import ClientOptions, KVPClient, parse_address
from kvpool.constants import KVP_MAX_CHUNK_LEN, Flag, Opcode, Status
from kvpool.errors import BlockNotFound, KVPError, KVPTimeout
from kvpool.transport import Transport
from kvpool.window import Window
from kvpool.wire import Header

Probe = Literal["stat", "lookup_meta"]

PROBE_OPCODES: dict[str, Opcode] = {"stat": Opcode.STAT, "lookup_meta": Opcode.LOOKUP_META}
PRESENT = frozenset({Status.OK, Status.HIT_SWITCH, Status.HIT_SERVER})
"""Probe reply statuses that mean "stored" (STAT and LOOKUP_META answer OK; a switch may say HIT_SWITCH)."""
BLOCK_VERSION = 1
"""Version of every block a connector writes: a key names one prefix of one model, so its KV never changes
(two engines that computed it may differ in the last bits; the second write is then ERR_CONFLICT, kept as is)."""

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    """Counters of one `PoolStore` (plain integers: read them, or `as_dict()` them, at any time)."""

    lookups: int = 0
    """Keys probed by `present` / `leading_hits`."""
    hits: int = 0
    """Probed keys the pool holds."""
    misses: int = 0
    """Probed keys the pool does not hold."""
    gets: int = 0
    """Blocks read back whole."""
    get_misses: int = 0
    """`get` of a block the pool no longer holds (evicted since the probe)."""
    puts: int = 0
    """Blocks stored (or found stored already: `conflicts`)."""
    conflicts: int = 0
    """Puts answered ERR_CONFLICT / ERR_STALE: another writer stored that key first; kept as it is."""
    rejected: int = 0
    """Blocks read but refused by the caller's checks (the connector counts these: `connectors.blockcodec`)."""
    failures: int = 0
    """Calls that failed (timeouts, socket errors, refusals); the engine went on without the pool."""
    dropped_full: int = 0
    """Puts refused with ERR_FULL: the save is dropped."""
    skipped: int = 0
    """Calls not made because the circuit breaker was open (the pool failed recently)."""
    bytes_read: int = 0
    bytes_written: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def auto_chunk_size(host: str) -> int | None:
    """8 KiB chunks on loopback (a 64 KiB MTU: fewest datagrams); None elsewhere: the client's default, which
    fits a 1,500-byte MTU (`kvpool.blocks.default_chunk_len`)."""
    try:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return None
    return KVP_MAX_CHUNK_LEN if address.is_loopback else None


class PoolStore:
    """The pool at one address, for a connector: probes, reads and writes that never raise."""

    def __init__(self, address: str, *, timeout_s: float = 0.2, retries: int = 2, give_up_s: float = 2.0,
                 tenant: int = 0,
                 chunk_size: int | Literal["auto"] | None = "auto", window: int = 64, bypass: bool = False,
                 probe: Probe = "stat", breaker: BreakerOptions | CircuitBreaker | None = None,
                 transport: Transport | None = None, logger: logging.Logger | None = None) -> None:
        """`address` is "HOST:PORT" (the storage node, or the pool address a switch serves); `timeout_s` per try,
        `retries` resends after it (probes); a block read or write fails once the pool is silent for `give_up_s` (the
        engine then recomputes: it must not wait the client's default 30 s). `chunk_size` of written blocks: bytes, None for the client's default, "auto"
        for `auto_chunk_size`. `window`: chunk requests in flight per block (64 x 8 KiB fits the client's socket
        buffer). `breaker`: its options, or a breaker shared with other stores on the same pool (one outage, one
        log line). `transport` replaces the UDP socket (tests)."""
        if probe not in PROBE_OPCODES:
            raise ValueError(f"probe must be one of {', '.join(PROBE_OPCODES)}, got {probe!r}")
        host, port = parse_address(address)
        self.address = f"{host}:{port}"
        self.chunk_size = auto_chunk_size(host) if chunk_size == "auto" else chunk_size
        self.options = ClientOptions(server=(host, port), tenant=tenant, timeout=timeout_s, retries=retries,
                                     bypass=bypass, window=window, chunk_size=self.chunk_size, give_up=give_up_s)
        self.probe_opcode = PROBE_OPCODES[probe]
        self.log = logger or log
        self.stats = PoolStats()
        self.breaker = breaker if isinstance(breaker, CircuitBreaker) else CircuitBreaker(
            f"pool {self.address}", breaker or BreakerOptions(), self.log)
        self._client = KVPClient(self.options, transport)
        self._lock = threading.Lock()
        self._full_logged = False
        self._probe_ids = itertools.count(random.randrange(1 << 31))

    def close(self) -> None:
        with self._lock:
            self._client.close()

    def __enter__(self) -> PoolStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- probes ---------------------------------------------------------------------------------------

    def present(self, keys: Sequence[int]) -> list[bool]:
        """Whether the pool holds each key, in one round trip (all probes in one window); all False when the
        pool is down or the breaker open."""
        if not keys:
            return []
        if not self.breaker.allow():
            self.stats.skipped += 1
            return [False] * len(keys)
        try:
            with self._lock:
                found = self._probe(keys)
        except (KVPTimeout, OSError) as exc:
            self._down(exc)
            return [False] * len(keys)
        except Exception as exc:  # never into the engine: a wrong reply is a miss
            self.stats.failures += 1
            self.log.debug("probe of %d keys failed: %s", len(keys), exc)
            return [False] * len(keys)
        self.breaker.success()
        self.stats.lookups += len(keys)
        self.stats.hits += sum(found)
        self.stats.misses += len(keys) - sum(found)
        return found

    def leading_hits(self, keys: Sequence[int]) -> int:
        """How many leading keys of `keys` the pool holds (the request's blocks that can be loaded in order)."""
        count = 0
        for stored in self.present(keys):
            if not stored:
                break
            count += 1
        return count

    def _probe(self, keys: Sequence[int]) -> list[bool]:
        client = self._client
        window = Window(client.transport, lambda: next(self._probe_ids), client.path,
                        silence=self.options.give_up, tries=self.options.retries + 1, cap=len(keys),
                        clock=client.clock)
        flags = int(Flag.BYPASS) if self.options.bypass else 0
        for index, key in enumerate(keys):
            window.submit(index, Header(self.probe_opcode, flags=flags, tenant=self.options.tenant,
                                        prefix_hash=key, chunk_idx=0, chunk_count=1))
        found = [False] * len(keys)
        for answer in window.answers():
            found[answer.tag] = not answer.malformed and answer.reply.status in PRESENT
        return found

    # ---- blocks -----------------------------------------------------------------------------------------

    def get(self, key: int) -> bytes | None:
        """The block stored under `key`, or None (not stored, or the pool failed)."""
        if not self.breaker.allow():
            self.stats.skipped += 1
            return None
        try:
            with self._lock:
                block = self._client.get_block(key)
        except BlockNotFound:
            self.breaker.success()
            self.stats.get_misses += 1
            return None
        except (KVPTimeout, OSError) as exc:
            self._down(exc)
            return None
        except Exception as exc:  # a refusal or an inconsistent block: the pool is up, this block is unusable
            self.breaker.success()
            self.stats.failures += 1
            self.log.debug("get %#018x failed: %s", key, exc)
            return None
        self.breaker.success()
        self.stats.gets += 1
        self.stats.bytes_read += len(block.data)
        return bytes(block.data)  # (the read hands out its buffer, a bytearray: callers here are given bytes)

    def put(self, key: int, blob: bytes | memoryview) -> bool:
        """Store `blob` under `key`; True when the pool holds a block under `key` afterwards (this one, or one
        another writer stored first), False when it was not stored (pool full, pool down)."""
        if not self.breaker.allow():
            self.stats.skipped += 1
            return False
        try:
            with self._lock:
                self._client.put_block(key, blob, BLOCK_VERSION, self.chunk_size)
        except (KVPTimeout, OSError) as exc:
            self._down(exc)
            return False
        except KVPError as exc:
            self.breaker.success()
            return self._refused(key, exc)
        except Exception as exc:
            self.stats.failures += 1
            self.log.debug("put %#018x failed: %s", key, exc)
            return False
        self.breaker.success()
        self.stats.puts += 1
        self.stats.bytes_written += len(blob)
        return True

    def _refused(self, key: int, exc: KVPError) -> bool:
        if exc.status in (Status.ERR_CONFLICT, Status.ERR_STALE):
            self.stats.conflicts += 1
            self.stats.puts += 1
            return True
        if exc.status == Status.ERR_FULL:
            self.stats.dropped_full += 1
            if not self._full_logged:
                self._full_logged = True
                self.log.warning("pool %s is full: saves are dropped (counted in dropped_full)", self.address)
            return False
        self.stats.failures += 1
        self.log.debug("put %#018x refused: %s", key, exc)
        return False

    def _down(self, exc: BaseException) -> None:
        self.stats.failures += 1
        self.breaker.failure(exc)
