"""`KVSwitchConnector`: vLLM (v1, 0.32) keeps and finds KV-cache blocks in the kvswitch pool.

Configured only through vLLM's KV-transfer config (docs/engines.md):

    --kv-transfer-config '{"kv_connector": "KVSwitchConnector", "kv_connector_module_path": "connectors.vllm",
                           "kv_role": "kv_both", "kv_connector_extra_config": {"pool": "HOST:PORT", "block_tokens": 256}}'

Scheduler side (no data moves): for each new request, the prompt's full pool blocks (`block_tokens` tokens, a
whole number of vLLM blocks) are keyed by their prefix hashes chained over the model's identity
(`connectors.identity`); the pool is asked in ONE round trip which leading blocks it holds beyond vLLM's own
prefix-cache hit (`PoolStore.leading_hits`), and those tokens are announced as external hits, loaded
synchronously before the step's forward pass. Each step's metadata lists the loads and the pool blocks the step
completes, to be saved.

Worker side: loads read a request's blocks side by side (`connectors.fetch`), check each
(`connectors.blockcodec`: length, checksum, this model's identity, this key) and copy it into vLLM's paged cache
(`connectors.kvlayout`). A block that is missing or fails a check is never loaded: its vLLM blocks are reported
through `get_block_ids_with_load_errors`, the scheduler recomputes them (the connector sets
`kv_load_failure_policy` to "recompute": a pool is a cache, and a bad block is a miss, never a failed request),
and the step's saves of that request are skipped. Saves copy the completed blocks out of the paged cache after
the forward pass and queue them to a saver process (`connectors.saver`), which skips blocks the pool holds
already and writes the others; the engine never waits for the pool, nor shares its interpreter with the writes.
A full pool drops saves (counted); a down pool is skipped by a circuit breaker, so every request gets a full
prefill and none fails.

Loads are synchronous (all layers before the forward pass): a pool block holds every layer, so the first
layer's attention needs the whole block anyway; what overlaps is the reading of a request's blocks.

One vLLM worker only (tensor and pipeline parallel size 1): the payload is the whole model's KV.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)
from vllm.v1.metrics.cache_hit_source import CacheHitSource

from connectors import blockcodec
from connectors.breaker import BreakerOptions, CircuitBreaker
from connectors.fetch import ParallelReader
from connectors.identity import ModelIdentity
from connectors.kvlayout import PagedKV
from connectors.options import ConnectorOptions
from connectors.plan import BlockSave, Planner, RequestLoad, StepPlan
from connectors.saver import SaverProcess
from connectors.store import PoolStore

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request

log = logging.getLogger("vllm.kvswitch")
"""Under vLLM's logger, so these lines come out with vLLM's own, in its format."""

SHUTDOWN_FLUSH_S = 60.0
"""Seconds a shutting-down worker waits for queued saves."""


@dataclass
class KVSwitchMetadata(KVConnectorMetadata):
    """One step's work for the worker side."""

    plan: StepPlan = field(default_factory=StepPlan)


def identity_of(vllm_config: VllmConfig, options: ConnectorOptions) -> ModelIdentity:
    """The identity of the model vLLM runs, as both sides compute it (same config, same answer)."""
    model, cache, parallel = vllm_config.model_config, vllm_config.cache_config, vllm_config.parallel_config
    dtype = str(model.dtype).removeprefix("torch.") if cache.cache_dtype == "auto" else str(cache.cache_dtype)
    name = options.model_name or model.served_model_name or model.model
    if isinstance(name, list | tuple):
        name = name[0]
    return ModelIdentity(name=str(name), dtype=dtype, num_layers=model.get_num_layers(parallel),
                         num_kv_heads=model.get_num_kv_heads(parallel), head_size=model.get_head_size(),
                         block_tokens=options.block_tokens, salt=options.salt,
                         layout=_layout(model.dtype, cache.block_size, model.get_head_size(), cache.cache_dtype))


def _layout(dtype: torch.dtype, block_size: int, head_size: int, cache_dtype: str) -> str:
    """What decides the bytes of vLLM's paged blocks besides the identity's fields: platform, attention kernel
    ISA on CPU (its blocks are laid out per ISA) and vLLM's block size."""
    from vllm.platforms import current_platform

    kernel = current_platform.device_type
    if current_platform.is_cpu():
        try:
            from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

            kernel += "/" + _get_attn_isa(dtype, block_size, head_size, cache_dtype)
        except Exception:  # another vLLM: name the platform only
            kernel += "/unknown"
    return f"vllm/{kernel}/block{block_size}"


class KVSwitchConnector(KVConnectorBase_V1):
    """The kvswitch pool as vLLM's external KV cache (see the module docstring)."""

    _cache_hit_source = CacheHitSource.P2P
    """Hits come over the network from a shared pool."""

    def __init__(self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        transfer = self._kv_transfer_config
        self.options = ConnectorOptions.from_mapping(transfer.kv_connector_extra_config or {})
        parallel = vllm_config.parallel_config
        if parallel.tensor_parallel_size > 1 or parallel.pipeline_parallel_size > 1:
            raise NotImplementedError("KVSwitchConnector supports one worker (tensor and pipeline parallel size 1)")
        self.identity = identity_of(vllm_config, self.options)
        self.engine_block_tokens = vllm_config.cache_config.block_size
        self.can_load = self.options.load and transfer.is_kv_consumer
        self.can_save = self.options.save and transfer.is_kv_producer
        self.counters: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        """Wall time spent in the connector's hooks, by what they did (probing, loading, copying saves out)."""
        self._stats_dirty = False
        if role == KVConnectorRole.SCHEDULER:
            self._init_scheduler(transfer)
        else:
            self._init_worker()
        log.info("KVSwitchConnector (%s): pool %s, %s, %d-token blocks (%d vLLM blocks), tenant %d, load %s, "
                 "save %s", role.name.lower(), self.options.pool, self.identity.name, self.identity.block_tokens,
                 self.identity.block_tokens // self.engine_block_tokens, self.identity.tenant(), self.can_load,
                 self.can_save)

    def _store_options(self) -> dict[str, Any]:
        o = self.options
        return {"timeout_s": o.timeout_s, "retries": o.retries, "tenant": self.identity.tenant(),
                "chunk_size": o.chunk_size, "bypass": o.bypass, "probe": o.probe}

    def _store(self, breaker: CircuitBreaker | None = None) -> PoolStore:
        return PoolStore(self.options.pool, **self._store_options(), breaker=breaker, logger=log)

    @property
    def requires_kv_delivery(self) -> bool:
        """A dropped save is a future miss, never an error: a preempted request need not be recomputed."""
        return False

    # ==== scheduler side =========================================================================================

    def _init_scheduler(self, transfer: Any) -> None:
        self.planner = Planner(self.identity, self.engine_block_tokens)
        self.lookup_store = self._store() if self.can_load else None
        if transfer.kv_load_failure_policy != "recompute":
            # read by the scheduler right after it made this connector: a block the pool lost or damaged is a
            # miss to recompute, never a failed request
            transfer.kv_load_failure_policy = "recompute"
            log.info("KVSwitchConnector: kv_load_failure_policy set to 'recompute' (a bad pool block is a miss)")

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> tuple[int | None, bool]:
        prompt = request.prompt_token_ids
        if prompt is None:  # prompt embeddings: nothing to key
            return 0, False
        store = self.lookup_store
        begin = time.perf_counter()
        hits = self.planner.match(request.request_id, prompt, num_computed_tokens,
                                  store.leading_hits if store is not None else (lambda keys: 0),
                                  salt=getattr(request, "cache_salt", None) or "")
        self.seconds["lookup"] += time.perf_counter() - begin
        self.counters["lookups"] += 1
        self.counters["hit_tokens"] += hits
        self.counters["requests_hit"] += hits > 0
        self._stats_dirty = True
        return hits, False

    def update_state_after_alloc(self, request: Request, blocks: KVCacheBlocks, num_external_tokens: int) -> None:
        self.planner.allocated(request.request_id, num_external_tokens)

    def build_connector_meta(self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        loads: list[RequestLoad] = []
        saves: list[tuple[str, str, BlockSave]] = []
        scheduled = scheduler_output.num_scheduled_tokens

        def add(request_id: str, block_ids: list[int] | None, replace: bool, computed: int) -> None:
            load, new_saves = self.planner.scheduled(request_id, block_ids, replace, computed)
            if load is not None:
                loads.append(load)
            if self.can_save:
                salt = self.planner.salt_of(request_id)
                saves.extend((request_id, salt, save) for save in new_saves)

        for new in scheduler_output.scheduled_new_reqs:
            add(new.req_id, list(new.block_ids[0]), True, new.num_computed_tokens + scheduled.get(new.req_id, 0))
        cached = scheduler_output.scheduled_cached_reqs
        for i, request_id in enumerate(cached.req_ids):
            new_blocks = cached.new_block_ids[i]
            add(request_id, list(new_blocks[0]) if new_blocks is not None else None,
                request_id in cached.resumed_req_ids, cached.num_computed_tokens[i] + scheduled.get(request_id, 0))
        self.counters["load_blocks_planned"] += sum(len(load.blocks) for load in loads)
        self.counters["save_blocks_planned"] += len(saves)
        if self._stats_dirty or loads or saves:
            self._write_stats("scheduler")
        return KVSwitchMetadata(StepPlan(tuple(loads), tuple(saves)))

    def update_connector_output(self, connector_output: KVConnectorOutput) -> None:
        if connector_output.invalid_block_ids:
            affected = self.planner.load_failed(set(connector_output.invalid_block_ids))
            self.counters["requests_load_failed"] += len(affected)
            self._stats_dirty = True

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        self.planner.finished(request.request_id)
        return False, None  # saves copy their blocks out during the step: nothing holds vLLM's blocks

    # ==== worker side ============================================================================================

    def _init_worker(self) -> None:
        self.kv: PagedKV | None = None
        breaker = CircuitBreaker(f"pool {self.options.pool}", BreakerOptions(), log)
        self.reader = ParallelReader(lambda: self._store(breaker), self.options.load_workers) \
            if self.can_load else None
        self.saver = SaverProcess(self.options.pool, self._store_options(), self.options.save_queue,
                                  self.options.saver_nice) if self.can_save else None
        self._invalid: set[int] = set()
        self._tainted: set[str] = set()
        self._warned: set[str] = set()
        if self.saver is not None:
            atexit.register(self.saver.close, SHUTDOWN_FLUSH_S)

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self.kv = PagedKV(kv_caches, self._kv_cache_config.num_blocks)

    def start_load_kv(self, forward_context: ForwardContext, **kwargs: Any) -> None:
        if not self.has_connector_metadata():
            return
        metadata = self._get_connector_metadata()
        assert isinstance(metadata, KVSwitchMetadata)
        begin = time.perf_counter()
        for load in metadata.plan.loads:
            self._load(load)
        if metadata.plan.loads:
            self.seconds["load"] += time.perf_counter() - begin

    def _load(self, load: RequestLoad) -> None:
        """Read the request's blocks side by side, check them and copy them into the cache in prompt order;
        from the first that cannot be loaded, report its blocks and all later ones (the scheduler recomputes
        from there)."""
        identity = self.identity.salted(load.salt)
        blobs = self.reader.get_many([block.key for block in load.blocks]) if self.reader is not None else None
        for position, block in enumerate(load.blocks):
            blob = next(blobs) if blobs is not None else None
            problem = self._load_block(identity, block.key, blob, block.block_ids, block.first)
            if problem is None:
                continue
            self.counters[f"load_failed.{problem}"] += 1
            if problem not in self._warned:
                self._warned.add(problem)
                log.warning("KVSwitchConnector: pool block %#018x not loaded (%s): recomputed (logged once per "
                            "reason; counted)", block.key, problem)
            for later in load.blocks[position:]:
                self._invalid.update(later.block_ids[later.first:])
            self._tainted.add(load.request_id)
            return

    def _load_block(self, identity: ModelIdentity, key: int, blob: bytes | None, block_ids: tuple[int, ...],
                    first: int) -> str | None:
        """Check one pool block and copy it into the cache; None when done, else why not."""
        if blob is None or self.kv is None:
            return "missing or pool down"
        try:
            payload = blockcodec.decode(identity, blob, key)
            self.kv.scatter(block_ids, payload, first)
        except blockcodec.BlockRejected as rejected:
            self.counters["rejected"] += 1
            return str(rejected.reason)
        except ValueError:  # a well-formed block of another size: another layout
            self.counters["rejected"] += 1
            return "payload size"
        self.counters["loaded_blocks"] += 1
        self.counters["loaded_bytes"] += len(payload)
        self._stats_dirty = True
        return None

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads finish in start_load_kv, before the forward pass (synchronous loads)

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: AttentionMetadata,
                      **kwargs: Any) -> None:
        return  # a pool block holds every layer: it is copied once all are written, in wait_for_save

    def wait_for_save(self) -> None:
        if self.has_connector_metadata() and self.saver is not None and self.kv is not None:
            metadata = self._get_connector_metadata()
            assert isinstance(metadata, KVSwitchMetadata)
            begin = time.perf_counter()
            for request_id, salt, save in metadata.plan.saves:
                if request_id in self._tainted:  # this step attended to KV that failed to load
                    self.counters["save_skipped_failed_load"] += 1
                    continue
                self.saver.submit(save.key, self.identity.salted(salt), self.kv.gather(save.block_ids))
                self._stats_dirty = True
            if metadata.plan.saves:
                self.seconds["save_copy"] += time.perf_counter() - begin
        self._tainted.clear()
        if self._stats_dirty:
            self._write_stats("worker")

    def get_block_ids_with_load_errors(self) -> set[int]:
        invalid, self._invalid = self._invalid, set()
        return invalid

    def shutdown(self) -> None:
        if self._role == KVConnectorRole.WORKER:
            if self.saver is not None:
                self.saver.close(SHUTDOWN_FLUSH_S)
            if self.reader is not None:
                self.reader.close()
            self._write_stats("worker")
        else:
            if self.lookup_store is not None:
                self.lookup_store.close()
            self._write_stats("scheduler")

    # ==== counters ===============================================================================================

    def stats(self) -> dict[str, Any]:
        """This side's counters and its pool clients' (`PoolStats`)."""
        out: dict[str, Any] = {"identity": asdict(self.identity), "counters": dict(self.counters),
                               "seconds": dict(self.seconds)}
        if self._role == KVConnectorRole.SCHEDULER:
            if self.lookup_store is not None:
                out["lookup_store"] = self.lookup_store.stats.as_dict()
        else:
            if self.reader is not None:
                out["load_store"] = self.reader.stats().as_dict()
            if self.saver is not None:
                saver = self.saver.counters()
                out["counters"].update({k: v for k, v in saver.items() if k != "saver_busy_us"})
                out["seconds"]["saver_process"] = saver["saver_busy_us"] / 1e6
        return out

    def _write_stats(self, role: str) -> None:
        self._stats_dirty = False
        if not self.options.stats_dir:
            return
        folder = Path(self.options.stats_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{role}-{os.getpid()}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.stats(), sort_keys=True))
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("KVSwitchConnector: cannot write stats to %s: %s", folder, exc)
