"""The `mooncake` backend: committed blocks in Mooncake Store (kvcache-ai/Mooncake), reached over TCP.

Mapping (docs/storage-backends.md):

* One Mooncake object per committed block version, `<namespace>/<tenant>/<prefix_hash>/v<version>`, holding
  the block's chunks (each the block's chunk size, 128 B .. 8 KiB, padded). A commit is one Mooncake `put` of that object: Mooncake's put is
  all-or-nothing per key (readers see no object until the put has ended), which gives KVP's atomic blocks.
* One record per block, `<namespace>/<tenant>/<prefix_hash>/newest`: the newest committed version, its chunk
  count, each chunk's `value_len` and CRC-32, and which chunks TIER_MOVE dropped. Written with `upsert` and a
  hard pin (never evicted), so a restarted node still refuses to commit a version again with other bytes. The
  record is written after the block object and names it, so a crash in between leaves an unnamed object that
  the next commit of that version replaces.
* GET → the block object (`get`), cached per block version in this process (bounded, least recently used
  first) so GETs of chunks 0..n-1 fetch the block once; a version's bytes never change (an entry is served only
  while the record names the CRCs it was checked against), and a commit drops the older version's entry. Every
  chunk fetched is checked against the record's CRC-32: a mismatch is a MISS, never a wrong value.
* A record that exists but cannot be read (`get` says b"" both for "absent" and for a failed read, e.g. its
  replica on a dead node's segment; `is_exist` tells them apart) raises `StoreUnavailable`: the node then answers
  MISS / ERR_FULL and decides nothing, instead of taking the block for unknown and accepting an older version.
* STAT / LOOKUP_META / TIER_MOVE → `is_exist` of the block object (Mooncake may have evicted it: then MISS).
  TIER_MOVE to ABSENT drops the chunk from the record, and `remove`s the object once no chunk is left; to
  STORAGE_DRAM records the score; STORAGE_DISK is refused (ERR_DENIED), as on a memory node without `--disk`.
* A commit removes the previous version's object (`remove(force=True)`: the node is its only reader here).

Ownership: each block has one owning storage node (the switch steers by prefix hash), which keeps the newest
versions in process and reads the record only on first touch (e.g. after a restart). Two nodes writing one
block through one Mooncake namespace are not supported.

Objects and records are put with `replicas` replicas each; objects, with `soft_pin`, with a soft pin (Mooncake
evicts unpinned objects first). The node's `--capacity` is the memory segment it contributes to the Mooncake
pool.
"""

from __future__ import annotations

import os
import socket
import struct
import zlib
from array import array
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from kvpool.backends.base import BlockState, Moved, NewChunk, StoreUnavailable
from kvpool.constants import Status, Tier
from kvpool.keys import MAX_CHUNKS, BlockKey, ChunkKey

INSTALL_HINT = ("pip install mooncake-transfer-engine-non-cuda==0.3.13.post1 "
                "(and on Debian/Ubuntu: apt-get install libibverbs1)")
"""What makes `import mooncake.store` work (docs/storage-backends.md)."""

_BLOCK_HEAD = struct.Struct(">4sQIH")
"""Block object header: magic b"KVB2", version, chunk_count, chunk size in bytes; then chunk_count × chunk size
value bytes (protocol v2 layout; v1's b"KVB1" objects are not read)."""
_BLOCK_MAGIC = b"KVB2"
_RECORD_HEAD = struct.Struct(">4sQIH")
"""Newest-version record: magic b"KVN2", version, chunk_count, chunk size; then the dropped-chunk bitmap
(ceil(chunk_count / 8) bytes, bit i = chunk i), chunk_count big-endian 16-bit value_lens and chunk_count
big-endian CRC-32s."""
_RECORD_MAGIC = b"KVN2"
BIND_ADDRESS_ENV = "MC_TCP_BIND_ADDRESS"
"""The transfer engine publishes this address in the node's segment descriptor: the address other Mooncake
clients open TCP connections to when they read or write this node's segment. Unset, it takes the first
address of the first interface that is up (`findLocalIpAddresses()[0]`), whatever `local_hostname` says: on a
node with a management interface listed first, an address the other nodes cannot reach."""


@dataclass(frozen=True, slots=True)
class MooncakeOptions:
    """How the node reaches Mooncake Store."""

    master: str = "127.0.0.1:50051"
    """`mooncake_master` RPC address, HOST:PORT."""
    metadata: str = "http://127.0.0.1:8080/metadata"
    """Transfer-engine metadata server URL (the master's, with `--enable_http_metadata_server=true`)."""
    local_hostname: str = "127.0.0.1"
    """Address other Mooncake clients reach this node's memory segment at."""
    protocol: str = "tcp"
    """Mooncake transfer protocol ("tcp"; "rdma" needs RDMA devices)."""
    buffer_bytes: int = 16 << 20
    """Mooncake client's local transfer buffer."""
    replicas: int = 1
    """Replicas of each block object and of each record (Mooncake `ReplicateConfig.replica_num`, each replica on
    another node's segment): with 2, the death of one node loses no committed block once the master has
    unmounted its segment."""
    soft_pin: bool = False
    """Soft-pin block objects (Mooncake evicts them after unpinned objects)."""
    namespace: str = "kvp"
    """Prefix of every Mooncake key this node writes (several pools can share one master)."""
    cache_bytes: int = 8 << 20
    """Bytes of fetched block objects kept in this process."""
    shared: bool = False
    """Other nodes may commit this node's blocks (a steered pool's failover, controller/steering.py): read a
    block's newest-version record from Mooncake on every request instead of keeping it in the process, so a
    node that serves a block again sees what another node committed meanwhile. Costs one small `get` per
    request; cached block objects stay valid (a version's bytes never change)."""

    def __post_init__(self) -> None:
        if self.replicas < 1 or self.cache_bytes < 0 or "/" in self.namespace or not self.namespace:
            raise ValueError("mooncake: replicas >= 1, cache_bytes >= 0, a non-empty namespace without '/'")


class StoreClient(Protocol):
    """The part of `mooncake.store.MooncakeDistributedStore` this backend uses (tests pass a fake)."""

    def put(self, key: str, value: bytes, config: Any = ...) -> int: ...
    def upsert(self, key: str, value: bytes, config: Any = ...) -> int: ...
    def get(self, key: str) -> bytes: ...
    def is_exist(self, key: str) -> int: ...
    def remove(self, key: str, force: bool = False) -> int: ...
    def close(self) -> int: ...


class BackendUnavailable(RuntimeError):
    """Mooncake cannot be used: the package is missing or the master / metadata server do not answer."""


@dataclass(frozen=True, slots=True)
class MooncakeChunk:
    """A committed chunk (`ChunkMeta`): always in the storage node's DRAM tier as far as KVP is concerned."""

    chunk_count: int
    value_len: int
    version: int
    csum: int
    score: float = 0.0
    tier: Tier = Tier.STORAGE_DRAM


@dataclass(slots=True)
class _Block:
    """The node's view of a block (mirrors its newest-version record)."""

    version: int
    chunk_len: int
    """Bytes of each chunk (the block's chunk size)."""
    value_lens: array[int]
    csums: array[int]
    dropped: int = 0
    """Bitmap of chunks TIER_MOVE dropped."""
    scores: dict[int, float] = field(default_factory=dict)

    @property
    def chunk_count(self) -> int:
        return len(self.value_lens)

    def serves(self, idx: int) -> bool:
        return idx < self.chunk_count and not self.dropped >> idx & 1

    def record(self) -> bytes:
        count = self.chunk_count
        return (_RECORD_HEAD.pack(_RECORD_MAGIC, self.version, count, self.chunk_len)
                + self.dropped.to_bytes((count + 7) // 8, "big") + _big_endian(self.value_lens)
                + _big_endian(self.csums))

    @classmethod
    def parse(cls, data: bytes) -> _Block | None:
        if len(data) < _RECORD_HEAD.size:
            return None
        magic, version, count, chunk_len = _RECORD_HEAD.unpack_from(data)
        bitmap = (count + 7) // 8
        if magic != _RECORD_MAGIC or len(data) != _RECORD_HEAD.size + bitmap + 6 * count:
            return None
        at = _RECORD_HEAD.size
        dropped = int.from_bytes(data[at:at + bitmap], "big")
        lens = _from_big_endian("H", data[at + bitmap:at + bitmap + 2 * count])
        csums = _from_big_endian("I", data[at + bitmap + 2 * count:])
        return cls(version, chunk_len, lens, csums, dropped)


def _big_endian(values: array[int]) -> bytes:
    """An array's items as big-endian bytes (the record's byte order on every host)."""
    out = array(values.typecode, values)
    if struct.pack("=H", 1) != struct.pack(">H", 1):
        out.byteswap()
    return out.tobytes()


def _from_big_endian(typecode: str, data: bytes) -> array[int]:
    out = array(typecode)
    out.frombytes(data)
    if struct.pack("=H", 1) != struct.pack(">H", 1):
        out.byteswap()
    return out


class MooncakeBackend:
    """Committed blocks as Mooncake objects; see the module docstring for the mapping."""

    name = "mooncake"

    def __init__(self, store: StoreClient, options: MooncakeOptions, block_config: Any = None,
                 record_config: Any = None, owns_store: bool = True) -> None:
        self.store = store
        self.options = options
        self._block_config = block_config
        """ReplicateConfig of block objects (replicas, soft pin); None = Mooncake's default."""
        self._record_config = record_config
        """ReplicateConfig of records (hard pin); None = Mooncake's default."""
        self._owns_store = owns_store
        self._blocks: dict[BlockKey, _Block] = {}
        self._unknown: OrderedDict[BlockKey, None] = OrderedDict()
        """Blocks whose record was looked up and absent (bounded; we own them, so they stay absent until we
        commit)."""
        self._cache: OrderedDict[tuple[BlockKey, int], tuple[bytes, array[int]]] = OrderedDict()
        """(block, version) → (the block's chunk bytes, the chunk CRC-32s of the record they were checked
        against). Served only while the record names the same CRCs: should a version ever be committed again with
        other bytes (its record lost with a node's segment), the cached bytes are not served for it."""
        self._cache_bytes = 0
        self.counters: Counter[str] = Counter()
        """Mooncake calls and their failures, cache hits/misses, corrupt objects."""

    # ---- keys and records --------------------------------------------------------------------------

    def _key(self, block: BlockKey, suffix: str) -> str:
        """`<namespace>/<tenant>/<prefix_hash as 16 hex digits>/<suffix>` (the names of existing stores: keep)."""
        return f"{self.options.namespace}/{block.tenant}/{block.prefix_hash:016x}/{suffix}"

    def _object(self, block: BlockKey, version: int) -> str:
        return self._key(block, f"v{version}")

    def _state(self, block: BlockKey) -> _Block | None:
        state = self._blocks.get(block)
        if not self.options.shared and (state is not None or block in self._unknown):
            return state
        self.counters["get.record"] += 1
        key = self._key(block, "newest")
        raw = self.store.get(key)
        state = _Block.parse(raw) if raw else None
        if state is None and (raw or self.store.is_exist(key) != 0):
            # b"" is also what get says when the read failed (a replica on a dead node's segment): only a record
            # Mooncake says is absent is absent; taking an unreadable one for absent would let an older version
            # be committed over it
            self.counters["record.unreadable"] += 1
            raise StoreUnavailable(f"mooncake: the record {key} exists but could not be read")
        if state is None:
            self._unknown[block] = None
            if len(self._unknown) > 1 << 16:
                self._unknown.popitem(last=False)
        else:
            self._blocks[block] = state
        return state

    def _write_record(self, block: BlockKey, state: _Block) -> bool:
        self.counters["upsert.record"] += 1
        ok = self._call(self.store.upsert, self._key(block, "newest"), state.record(), self._record_config) == 0
        if not ok:
            self.counters["upsert.record.failed"] += 1
        return ok

    @staticmethod
    def _call(method: Any, key: str, value: bytes, config: Any) -> int:
        return int(method(key, value) if config is None else method(key, value, config))

    # ---- the block cache -----------------------------------------------------------------------------

    def _fetch(self, block: BlockKey, state: _Block) -> bytes | None:
        """The block object's chunk bytes (chunk_count × chunk size) for the newest version, checked; None if gone."""
        entry = (block, state.version)
        cached = self._cache.get(entry)
        if cached is not None and cached[1] == state.csums:
            self._cache.move_to_end(entry)
            self.counters["cache.hit"] += 1
            return cached[0]
        if cached is not None:
            self.counters["cache.other_record"] += 1
            self._forget(entry)
        self.counters["cache.miss"] += 1
        raw = self.store.get(self._object(block, state.version))
        if not raw:
            return None
        count, size = state.chunk_count, state.chunk_len
        if (len(raw) != _BLOCK_HEAD.size + count * size
                or _BLOCK_HEAD.unpack_from(raw) != (_BLOCK_MAGIC, state.version, count, size)):
            self.counters["corrupt"] += 1
            return None
        data = raw[_BLOCK_HEAD.size:]
        view = memoryview(data)
        for i in range(count):
            if zlib.crc32(view[i * size:(i + 1) * size]) != state.csums[i]:
                self.counters["corrupt"] += 1
                return None
        self._remember(entry, data, state.csums)
        return data

    def _remember(self, entry: tuple[BlockKey, int], data: bytes, csums: array[int]) -> None:
        if len(data) > self.options.cache_bytes:
            return
        self._forget(entry)
        self._cache[entry] = (data, csums)
        self._cache_bytes += len(data)
        while self._cache_bytes > self.options.cache_bytes:
            _, (old, _) = self._cache.popitem(last=False)
            self._cache_bytes -= len(old)

    def _forget(self, entry: tuple[BlockKey, int]) -> None:
        old = self._cache.pop(entry, None)
        if old is not None:
            self._cache_bytes -= len(old[0])

    # ---- StorageBackend ------------------------------------------------------------------------------

    def newest(self, block: BlockKey) -> BlockState | None:
        state = self._state(block)
        return None if state is None else BlockState(state.version, state.chunk_count)

    def _meta(self, state: _Block, idx: int) -> MooncakeChunk:
        return MooncakeChunk(state.chunk_count, state.value_lens[idx], state.version, state.csums[idx],
                             state.scores.get(idx, 0.0))

    def chunk(self, key: ChunkKey) -> MooncakeChunk | None:
        block, idx = key.block, key.chunk
        state = self._state(block)
        if state is None or not state.serves(idx):
            return None
        cached = self._cache.get((block, state.version))
        if cached is None or cached[1] != state.csums:
            self.counters["is_exist"] += 1
            if self.store.is_exist(self._object(block, state.version)) != 1:  # evicted by Mooncake (or -1: error)
                return None
        return self._meta(state, idx)

    def read(self, key: ChunkKey) -> tuple[MooncakeChunk, bytes | memoryview] | None:
        block, idx = key.block, key.chunk
        state = self._state(block)
        if state is None or not state.serves(idx):
            return None
        data = self._fetch(block, state)
        if data is None:
            return None
        size = state.chunk_len
        return self._meta(state, idx), memoryview(data)[idx * size:(idx + 1) * size]  # a view: no copy

    def read_span(self, block: BlockKey, first: int, count: int) -> list[tuple[MooncakeChunk, bytes | memoryview] | None]:
        return [self.read(block.chunk(idx)) for idx in range(first, first + count)]

    def commit(self, block: BlockKey, version: int, chunks: Sequence[NewChunk]) -> bool:
        assert 0 < len(chunks) <= MAX_CHUNKS
        old = self._state(block)
        assert old is None or version > old.version, "the node commits only newer versions"
        name = self._object(block, version)
        data = b"".join(c.value for c in chunks)
        if self.store.is_exist(name) == 1:  # an object no record names (a crash before its record): replace it
            self.counters["remove.unnamed"] += 1
            self.store.remove(name, True)
        self.counters["put"] += 1
        size = len(chunks[0].value)
        if self._call(self.store.put, name, _BLOCK_HEAD.pack(_BLOCK_MAGIC, version, len(chunks), size) + data,
                      self._block_config) != 0:
            self.counters["put.failed"] += 1
            return False
        state = _Block(version, size, array("H", (c.value_len for c in chunks)), array("I", (c.csum for c in chunks)))
        if not self._write_record(block, state):
            self.store.remove(name, True)
            return False
        self._blocks[block] = state
        self._unknown.pop(block, None)
        if old is not None:
            self._forget((block, old.version))
            self.counters["remove"] += 1
            self.store.remove(self._object(block, old.version), True)
        self._remember((block, version), data, state.csums)
        return True

    def move(self, key: ChunkKey, target: Tier, score: float) -> Moved:
        block, idx = key.block, key.chunk
        state = self._blocks[block]  # the node checked `chunk(key)` first, which loaded it
        if target == Tier.STORAGE_DISK:
            return Moved(Status.ERR_DENIED, Tier.STORAGE_DRAM)
        if target == Tier.STORAGE_DRAM:
            state.scores[idx] = score
            return Moved(Status.OK, Tier.STORAGE_DRAM)
        dropped = state.dropped | 1 << idx
        if not self._write_record(block, _Block(state.version, state.chunk_len, state.value_lens, state.csums, dropped)):
            return Moved(Status.ERR_FULL, Tier.STORAGE_DRAM)
        state.dropped = dropped
        state.scores.pop(idx, None)
        if all(not state.serves(i) for i in range(state.chunk_count)):
            self._forget((block, state.version))
            self.counters["remove"] += 1
            self.store.remove(self._object(block, state.version), True)
        return Moved(Status.OK, Tier.ABSENT)

    def summary(self) -> dict[str, object]:
        return {"backend": self.name, "master": self.options.master, "blocks": len(self._blocks),
                "cache": {"entries": len(self._cache), "bytes": self._cache_bytes},
                "mooncake": dict(self.counters)}

    def close(self) -> None:
        if self._owns_store:
            self.store.close()


def _mooncake_store() -> Any:
    """The `mooncake.store` module, or BackendUnavailable saying how to install it."""
    try:
        import mooncake.store
    except (ImportError, OSError) as exc:
        raise BackendUnavailable(f"the mooncake backend needs Mooncake Store: {INSTALL_HINT} ({exc})") from exc
    return mooncake.store


def replicate_configs(options: MooncakeOptions) -> tuple[Any, Any]:
    """Mooncake `ReplicateConfig`s of (block objects: replicas, soft pin; records: replicas, hard pin)."""
    store = _mooncake_store()
    block_config = store.ReplicateConfig()
    block_config.replica_num = options.replicas
    if options.soft_pin:
        block_config.soft_pin_action = store.SoftPinAction.ENABLE
    record_config = store.ReplicateConfig()
    record_config.replica_num = options.replicas  # a record lost with a segment would make its block unknown
    record_config.with_hard_pin = True
    return block_config, record_config


def open_store(options: MooncakeOptions, segment_bytes: int) -> StoreClient:
    """A Mooncake client that contributes `segment_bytes` of memory to the pool, reachable by the other clients
    at `options.local_hostname` (`BIND_ADDRESS_ENV`). The master and metadata server are probed first:
    Mooncake's setup retries an absent master for ever."""
    for what, address in (("master", options.master), ("metadata server", urlsplit(options.metadata).netloc)):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
        except (OSError, ValueError) as exc:
            raise BackendUnavailable(f"Mooncake {what} at {address!r} does not answer ({exc}); start one with "
                                     "`python -m kvpool.mooncake_master`") from exc
    # The transfer engine reads it in setup. An address the user set is kept; ours is set for this setup only,
    # so it never leaks into a later store of this process (another local_hostname) or into child processes
    # (every storage node of a testbed started from one test process would publish the first one's address).
    users = os.environ.get(BIND_ADDRESS_ENV)
    os.environ[BIND_ADDRESS_ENV] = users or options.local_hostname
    try:
        client = _mooncake_store().MooncakeDistributedStore()
        rc = client.setup(options.local_hostname, options.metadata, segment_bytes, options.buffer_bytes,
                          options.protocol, "", options.master)
    finally:
        if not users:
            os.environ.pop(BIND_ADDRESS_ENV, None)
    if rc != 0:
        raise BackendUnavailable(f"Mooncake client setup failed ({rc}): is mooncake_master running at "
                                 f"{options.master} with its metadata server at {options.metadata}?")
    return cast(StoreClient, client)


def connect(options: MooncakeOptions, segment_bytes: int) -> MooncakeBackend:
    """A backend on a new Mooncake client (closed with the backend)."""
    block_config, record_config = replicate_configs(options)
    return MooncakeBackend(open_store(options, segment_bytes), options, block_config, record_config)
