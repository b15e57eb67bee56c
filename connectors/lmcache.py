"""LMCache on the pool: a remote storage plugin for lmcache 0.5.6, URL `kvswitch://HOST:PORT`.

LMCache loads third-party remote backends by configuration (docs/engines.md, "vLLM + LMCache"):

    remote_storage_plugins: ["kvswitch"]
    extra_config:
      remote_storage_plugin.kvswitch.module_path: connectors.lmcache
      remote_storage_plugin.kvswitch.class_name: KVSwitchConnectorAdapter
      remote_storage_plugin.kvswitch.url: kvswitch://10.0.0.200:7420

`KVSwitchConnectorAdapter` parses the URL (`kvswitch://HOST:PORT[?salt=..&timeout=..&retries=..&probe=..]`, given
as `remote_url` or as the plugin's `.url`) and creates a `KVSwitchRemoteConnector`, LMCache's `RemoteConnector`
over `connectors.store.PoolStore`:

* Keys. LMCache names a chunk with a `CacheEngineKey` (model name, world size, worker id, its chained chunk hash,
  dtype, tags). The pool key is a link of `kvpool.prefix_hash.chain` from the model's identity
  (`connectors.identity.ModelIdentity`, built from LMCache's metadata: name, KV dtype, layers, KV heads, head
  size, chunk size, and the tenant `salt`) over the key's text, and requests carry the identity's tenant: two
  models, layouts or tenants never read each other's chunks.
* Values. A chunk's bytes are stored as a `connectors.blockcodec` blob. A blob that is damaged, of another model,
  stored under another key, or whose payload is not a whole number of tokens of at most one chunk is refused:
  a miss, counted by reason (`KVSwitchRemoteConnector.counters`), logged once per reason. LMCache then computes
  those tokens.
* Failures. `PoolStore` never raises and trips a circuit breaker when the pool is down or slow: every call then
  answers "not there" at once (a full prefill), and a save the pool refuses (ERR_FULL) is dropped and counted.
* Memory objects. `get` allocates from LMCache's local CPU backend and, on any miss after allocating, gives its
  reference back exactly once. `put` never releases the object it was handed: LMCache's `RemoteBackend` takes a
  reference for the write and its `InstrumentedRemoteConnector` releases it when `put` returns (as LMCache's own
  connectors do).
* Threads. Probes and loads go through one `PoolStore` (one socket) on one worker thread, saves through another
  on a second, so a long save never delays a load; LMCache's event loop only awaits them.

Needs the engine environment (`.venv-engine`: lmcache, torch).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlparse

import torch
from lmcache.utils import CacheEngineKey
from lmcache.v1.memory_management import MemoryObj
from lmcache.v1.storage_backend.connector import ConnectorAdapter, ConnectorContext, extract_plugin_type
from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector

from connectors import blockcodec
from connectors.identity import ModelIdentity
from connectors.store import PoolStore
from kvpool.client import parse_address
from kvpool.prefix_hash import chain

SCHEME = "kvswitch://"
PLUGIN_TYPE = "kvswitch"
"""The plugin name to list in `remote_storage_plugins` (or `kvswitch.<instance>`)."""
KEY_DOMAIN = b"lmcache-chunk:"
"""Prefix of the bytes a pool key chains over: keeps LMCache chunk keys apart from other connectors' keys."""

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PoolURL:
    """A parsed `kvswitch://HOST:PORT[?option=value&...]`."""

    address: str
    """HOST:PORT of the pool (the storage node, or the pool address a switch serves)."""
    salt: str = ""
    """Tenant / cache salt mixed into the identity: engines with different salts never share chunks."""
    timeout_s: float = 0.2
    """Seconds per try of one pool request."""
    retries: int = 2
    """Resends after the first try."""
    probe: str = "stat"
    """How `exists` asks: "stat" (the storage node's view) or "lookup_meta" (the data plane's)."""

    @classmethod
    def parse(cls, url: str) -> PoolURL:
        """Raises ValueError naming what is wrong."""
        if not url.startswith(SCHEME):
            raise ValueError(f"{url!r}: a kvswitch pool URL starts with {SCHEME} (e.g. {SCHEME}10.0.0.200:7420)")
        parsed = urlparse(url)
        if not parsed.hostname or parsed.port is None:
            raise ValueError(f"{url!r}: needs HOST:PORT (e.g. {SCHEME}10.0.0.200:7420)")
        options = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        unknown = set(options) - {"salt", "timeout", "retries", "probe"}
        if unknown:
            raise ValueError(f"{url!r}: unknown option(s) {', '.join(sorted(unknown))}; "
                             "known: salt, timeout, retries, probe")
        host, port = parse_address(f"{parsed.hostname}:{parsed.port}")
        try:
            return cls(f"{host}:{port}", options.get("salt", ""), float(options.get("timeout", 0.2)),
                       int(options.get("retries", 2)), options.get("probe", "stat"))
        except ValueError as exc:
            raise ValueError(f"{url!r}: {exc}") from None


def identity_of(metadata: Any, salt: str = "") -> ModelIdentity:
    """The identity of the model whose KV an LMCache engine stores, from its `LMCacheMetadata`
    (`kv_shape` is (layers, 2, chunk_size, kv_heads, head_size))."""
    layers, _, chunk_tokens, kv_heads, head_size = metadata.kv_shape
    return ModelIdentity(name=str(metadata.model_name), dtype=str(metadata.kv_dtype).removeprefix("torch."),
                         num_layers=int(layers), num_kv_heads=int(kv_heads), head_size=int(head_size),
                         block_tokens=int(chunk_tokens), salt=salt)


def pool_key(identity: ModelIdentity, key: CacheEngineKey) -> int:
    """The pool's 64-bit prefix hash for one LMCache chunk: a chain link from the identity's root over the key's
    text (model name, world size, worker id, chunk hash, dtype, tags), the same in every process."""
    return chain(identity.root(), KEY_DOMAIN + key.to_string().encode())


class KVSwitchRemoteConnector(RemoteConnector):
    """LMCache's `RemoteConnector` on the kvswitch pool (see the module docstring)."""

    def __init__(self, context: ConnectorContext, url: PoolURL,
                 store_factory: Callable[[PoolURL, ModelIdentity], PoolStore] | None = None) -> None:
        """`store_factory` builds each of the two `PoolStore`s (tests give a fake transport); default: UDP to
        `url.address` with the identity's tenant."""
        if context.config is None or context.metadata is None:
            raise ValueError("the kvswitch connector needs LMCache's config and metadata")
        super().__init__(context.config, context.metadata)
        self.url = url
        self.local_cpu_backend = context.local_cpu_backend
        self.identity = identity_of(context.metadata, url.salt)
        make = store_factory or _udp_store
        self.load_store = make(url, self.identity)
        """Probes and loads."""
        self.save_store = make(url, self.identity)
        """Saves, on their own socket and thread."""
        self._load_thread = ThreadPoolExecutor(1, thread_name_prefix="kvswitch-load")
        self._save_thread = ThreadPoolExecutor(1, thread_name_prefix="kvswitch-save")
        self._lock = threading.Lock()
        self.counters: Counter[str] = Counter()
        """loaded, load_misses, refused (and refused:<reason>), no_memory, stored, store_dropped."""
        self._stored_keys: dict[int, str] = {}
        self._logged: set[str] = set()

    def __repr__(self) -> str:
        return f"KVSwitchRemoteConnector({SCHEME}{self.url.address}, model {self.identity.name})"

    # ---- helpers ----------------------------------------------------------------------------------------

    async def _on(self, thread: ThreadPoolExecutor, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(thread, call)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] += n

    def _log_once(self, what: str, message: str, *args: object) -> None:
        with self._lock:
            first = what not in self._logged
            self._logged.add(what)
        (log.warning if first else log.debug)(message, *args)

    def stats(self) -> dict[str, Any]:
        """This connector's counters and both stores' (`connectors.store.PoolStats`)."""
        with self._lock:
            mine = dict(self.counters)
        return {"connector": mine, "load_store": self.load_store.stats.as_dict(),
                "save_store": self.save_store.stats.as_dict()}

    def _payload_ok(self, payload: bytes) -> bool:
        """A whole number of tokens, at least one, at most one chunk."""
        return 0 < len(payload) <= self.full_chunk_size_bytes and len(payload) % self.single_token_size == 0

    def _load(self, key: CacheEngineKey) -> MemoryObj | None:
        """One chunk from the pool into a fresh memory object, or None (its reference already given back)."""
        pk = pool_key(self.identity, key)
        blob = self.load_store.get(pk)
        if blob is None:
            self._count("load_misses")
            return None
        try:
            payload = blockcodec.decode(self.identity, blob, key=pk)
        except blockcodec.BlockRejected as exc:
            self._refuse(key, exc.reason.value, str(exc))
            return None
        if not self._payload_ok(payload):
            self._refuse(key, "size", f"{len(payload)} bytes, not whole tokens of {self.single_token_size} B "
                         f"up to {self.full_chunk_size_bytes} B")
            return None
        memory_obj = self.local_cpu_backend.allocate(self.meta_shapes, self.meta_dtypes, self.meta_fmt)
        if memory_obj is None:
            self._count("no_memory")
            self._log_once("no_memory", "LMCache's CPU buffer is full: a chunk from the pool is dropped")
            return None
        try:
            target = memory_obj.tensor
            assert target is not None
            target.view(torch.uint8).view(-1)[:len(payload)].copy_(torch.frombuffer(bytearray(payload),
                                                                                    dtype=torch.uint8))
            if len(payload) != self.full_chunk_size_bytes:
                memory_obj = self.reshape_partial_chunk(memory_obj, len(payload))
        except Exception as exc:
            memory_obj.ref_count_down()
            self._refuse(key, "layout", str(exc))
            return None
        self._count("loaded")
        return memory_obj

    def _refuse(self, key: CacheEngineKey, reason: str, detail: str) -> None:
        """Count and log (once per reason) a chunk that must not be loaded."""
        self._count("refused")
        self._count(f"refused:{reason}")
        self.load_store.stats.rejected += 1
        self._log_once(f"refused:{reason}", "kvswitch: chunk %s refused (%s): recomputed instead",
                       key.to_string(), detail)

    def _save(self, key: CacheEngineKey, memory_obj: MemoryObj) -> bool:
        pk = pool_key(self.identity, key)
        blob = blockcodec.encode(self.identity, _bytes_of(memory_obj), key=pk)
        if self.save_store.put(pk, blob):
            self._count("stored")
            with self._lock:
                self._stored_keys[pk] = key.to_string()
            return True
        self._count("store_dropped")
        return False

    # ---- RemoteConnector ----------------------------------------------------------------------------------

    async def exists(self, key: CacheEngineKey) -> bool:
        return await self._on(self._load_thread, lambda: self.exists_sync(key))

    def exists_sync(self, key: CacheEngineKey) -> bool:
        """A real bool (one probe), never a coroutine."""
        return bool(self.load_store.present([pool_key(self.identity, key)])[0])

    async def get(self, key: CacheEngineKey) -> MemoryObj | None:
        return await self._on(self._load_thread, lambda: self._load(key))

    async def put(self, key: CacheEngineKey, memory_obj: MemoryObj) -> None:
        """Store one chunk; never releases `memory_obj` (its caller does, once)."""
        await self._on(self._save_thread, lambda: self._save(key, memory_obj))

    async def list(self) -> builtins.list[str]:
        """The keys this connector stored in this process (the pool itself has no listing)."""
        with self._lock:
            return list(self._stored_keys.values())

    async def close(self) -> None:
        self._load_thread.shutdown(wait=True)
        self._save_thread.shutdown(wait=True)
        self.load_store.close()
        self.save_store.close()

    # ---- batched calls --------------------------------------------------------------------------------------

    def support_batched_contains(self) -> bool:
        return True

    def batched_contains(self, keys: builtins.list[CacheEngineKey]) -> int:
        """Leading chunks the pool holds, all probed in one round trip."""
        return self.load_store.leading_hits([pool_key(self.identity, k) for k in keys])

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: builtins.list[CacheEngineKey], pin: bool = False) -> int:
        return await self._on(self._load_thread, lambda: self.batched_contains(keys))

    def support_batched_get(self) -> bool:
        return True

    async def batched_get(self, keys: builtins.list[CacheEngineKey]) -> builtins.list[MemoryObj | None]:
        """Chunks in order; after the first miss the rest are None (LMCache uses a leading run only)."""
        got = await self._on(self._load_thread, lambda: self._load_leading(keys))
        return [*got, *([None] * (len(keys) - len(got)))]

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id: str, keys: builtins.list[CacheEngineKey]) -> builtins.list[MemoryObj]:
        return await self._on(self._load_thread, lambda: self._load_leading(keys))

    def _load_leading(self, keys: Sequence[CacheEngineKey]) -> builtins.list[MemoryObj]:
        loaded: builtins.list[MemoryObj] = []
        for key in keys:
            memory_obj = self._load(key)
            if memory_obj is None:
                break
            loaded.append(memory_obj)
        return loaded

    def support_batched_put(self) -> bool:
        return True

    async def batched_put(self, keys: builtins.list[CacheEngineKey], memory_objs: builtins.list[MemoryObj]) -> None:
        """Store each chunk; never releases the objects (their caller does, once each)."""
        def save_all() -> None:
            for key, memory_obj in zip(keys, memory_objs, strict=True):
                self._save(key, memory_obj)
        await self._on(self._save_thread, save_all)


def _bytes_of(memory_obj: MemoryObj) -> bytes:
    """The chunk's bytes as LMCache holds them (the tokens it has, not the full chunk's buffer)."""
    tensor = memory_obj.tensor
    assert tensor is not None
    return tensor.contiguous().view(torch.uint8).numpy().tobytes()


def _udp_store(url: PoolURL, identity: ModelIdentity) -> PoolStore:
    return PoolStore(url.address, timeout_s=url.timeout_s, retries=url.retries, tenant=identity.tenant(),
                     probe=url.probe, logger=log)  # type: ignore[arg-type]


class KVSwitchConnectorAdapter(ConnectorAdapter):
    """What LMCache's plugin loader instantiates: recognises `kvswitch://HOST:PORT` and `plugin://kvswitch`."""

    def __init__(self, store_factory: Callable[[PoolURL, ModelIdentity], PoolStore] | None = None) -> None:
        super().__init__(SCHEME)
        self.store_factory = store_factory

    def can_parse(self, url: str) -> bool:
        if url.startswith(SCHEME):
            return True
        return url.startswith("plugin://") and extract_plugin_type(url[len("plugin://"):]) == PLUGIN_TYPE

    def create_connector(self, context: ConnectorContext) -> RemoteConnector:
        return KVSwitchRemoteConnector(context, PoolURL.parse(self.pool_url(context)), self.store_factory)

    @staticmethod
    def pool_url(context: ConnectorContext) -> str:
        """`remote_url` itself, or for `plugin://NAME` the `remote_storage_plugin.NAME.url` extra config."""
        if context.url.startswith(SCHEME):
            return context.url
        name = context.plugin_name or context.url[len("plugin://"):]
        extra = (context.config.extra_config if context.config is not None else None) or {}
        url = extra.get(f"remote_storage_plugin.{name}.url")
        if not url:
            raise ValueError(f"LMCache plugin {name!r}: set extra_config remote_storage_plugin.{name}.url to "
                             f"{SCHEME}HOST:PORT (the pool's address)")
        return str(url)
