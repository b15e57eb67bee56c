"""LMCache's engine on the pool through `connectors.lmcache` (engine environment: `.venv-engine/bin/python -m pytest`).

A tiny Llama-family model built from a config with seeded random weights (nothing downloaded) computes a prompt's
KV; one LMCache engine stores it through the kvswitch plugin into a real storage node on loopback, a second,
fresh engine (its own CPU buffer: nothing local) retrieves it. The KV read back must be bit-identical and the
rest of the prefill on top of it must give the same first token and top log-probabilities as a full prefill.
Blocks that are damaged, of another model, stored under another key or of a wrong size are refused (misses,
counted); a pool that is down gives misses and no exception.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")  # LMCache's usage telemetry: no traffic off this machine
os.environ.setdefault("LMCACHE_TRACK_USAGE", "false")
torch = pytest.importorskip("torch")
pytest.importorskip("lmcache")
pytest.importorskip("transformers")

from lmcache.v1.cache_engine import LMCacheEngineBuilder  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402

from connectors import blockcodec  # noqa: E402
from connectors.identity import ModelIdentity  # noqa: E402
from connectors.lmcache import (  # noqa: E402
    KVSwitchConnectorAdapter,
    KVSwitchRemoteConnector,
    PoolURL,
    identity_of,
    pool_key,
)
from connectors.lmcache_cpu import CPUKVConnector, KVBuffers  # noqa: E402
from connectors.store import BLOCK_VERSION  # noqa: E402
from kvpool.client import ClientOptions, KVPClient  # noqa: E402

LAYERS, KV_HEADS, HEAD_SIZE, CHUNK = 4, 2, 64, 256
MODEL_NAME = "kvswitch/tiny-test"
PROMPT_TOKENS = 600
"""Two full chunks of 256 and a partial one of 88 tokens."""
_instances = itertools.count()


# ---- fixtures ---------------------------------------------------------------------------------------------------

@pytest.fixture
def pool(serve) -> tuple[str, int]:
    """A storage node on 127.0.0.1:<free port> (tests/connectors/conftest.py), as (host, port)."""
    host, _, port = serve().address.rpartition(":")
    return host, int(port)


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=KV_HEADS, head_dim=HEAD_SIZE,
                         max_position_embeddings=2048, initializer_range=0.1)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def prompt() -> torch.Tensor:
    return torch.randint(0, 1000, (PROMPT_TOKENS,), generator=torch.Generator().manual_seed(1))


class Engines:
    """LMCache engines on the kvswitch plugin; each `new()` is a fresh engine with its own empty CPU buffer."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def new(self, url: str, save_unfull_chunk: bool = True, model_name: str = MODEL_NAME):
        config = LMCacheEngineConfig.from_defaults(
            chunk_size=CHUNK, local_cpu=True, max_local_cpu_size=0.05, save_unfull_chunk=save_unfull_chunk,
            remote_storage_plugins=["kvswitch"], blocking_timeout_secs=5,
            extra_config={"remote_storage_plugin.kvswitch.module_path": "connectors.lmcache",
                          "remote_storage_plugin.kvswitch.class_name": "KVSwitchConnectorAdapter",
                          "remote_storage_plugin.kvswitch.url": url})
        metadata = LMCacheMetadata(model_name=model_name, world_size=1, local_world_size=1, worker_id=0,
                                   local_worker_id=0, kv_dtype=torch.float32,
                                   kv_shape=(LAYERS, 2, CHUNK, KV_HEADS, HEAD_SIZE), chunk_size=CHUNK)
        instance = f"kvswitch-test-{next(_instances)}"
        engine = LMCacheEngineBuilder.get_or_create(instance, config, metadata,
                                                    CPUKVConnector(LAYERS, KV_HEADS, HEAD_SIZE),
                                                    lambda *a: None, lambda *a: None)
        engine.post_init()
        self.ids.append(instance)
        return engine

    def close(self) -> None:
        for instance in self.ids:
            LMCacheEngineBuilder.destroy(instance)
        self.ids.clear()


@pytest.fixture
def engines() -> Iterator[Engines]:
    made = Engines()
    yield made
    made.close()


def connector_of(engine) -> KVSwitchRemoteConnector:
    backend = engine.storage_manager.storage_backends["RemoteBackend-kvswitch"]
    connector = backend.connection._connector  # LMCache wraps every connector in an InstrumentedRemoteConnector
    assert isinstance(connector, KVSwitchRemoteConnector)
    return connector


def wait_for(predicate, seconds: float = 20.0) -> None:
    """Saves run on LMCache's event loop after `store` returns: wait (generously) until they are done."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the connector did not finish in time"
        time.sleep(0.02)


def url_of(address: tuple[str, int], **options: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"kvswitch://{address[0]}:{address[1]}" + (f"?{query}" if query else "")


def prefill(model, prompt: torch.Tensor) -> KVBuffers:
    with torch.no_grad():
        out = model(prompt[None], use_cache=True)
    return KVBuffers.from_cache(out.past_key_values)


def store_prompt(engines: Engines, url: str, model, prompt: torch.Tensor) -> KVBuffers:
    """Engine A computes and stores the prompt's KV, waits for its saves, and is closed."""
    kv = prefill(model, prompt)
    writer = engines.new(url)
    writer.store(prompt, kvcaches=kv)
    connector = connector_of(writer)
    wait_for(lambda: connector.counters["stored"] + connector.counters["store_dropped"] >= 3)
    return kv


def chunk_keys(engine, prompt: torch.Tensor) -> list:
    return [key for _, _, key in engine.token_database.process_tokens(prompt)]


def top_logprobs(logits: torch.Tensor, k: int = 5) -> tuple[list[int], torch.Tensor]:
    values, indices = torch.log_softmax(logits.double(), -1).topk(k)
    return indices.tolist(), values


# ---- the round trip ---------------------------------------------------------------------------------------------

@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_second_engine_retrieves_bit_identical_kv_and_the_same_first_token(pool, engines, model, prompt):
    kv = store_prompt(engines, url_of(pool), model, prompt)

    reader = engines.new(url_of(pool))
    got = KVBuffers.empty(LAYERS, KV_HEADS, PROMPT_TOKENS, HEAD_SIZE, torch.float32)
    hit = reader.retrieve(prompt, kvcaches=got)
    assert int(hit.sum()) == PROMPT_TOKENS
    for layer in range(LAYERS):
        assert torch.equal(got.keys[layer], kv.keys[layer]), f"layer {layer} keys differ"
        assert torch.equal(got.values[layer], kv.values[layer]), f"layer {layer} values differ"
    assert connector_of(reader).counters["loaded"] == 3
    assert connector_of(reader).counters["refused"] == 0

    # The first token from the cached prefix (all but the last token recomputed from the pool's KV) is the full
    # prefill's, with the same top log-probabilities.
    cached = PROMPT_TOKENS - 1
    with torch.no_grad():
        full = model(prompt[None]).logits[0, -1]
        rest = model(prompt[None, cached:], past_key_values=got.to_cache(cached)).logits[0, -1]
    full_ids, full_lp = top_logprobs(full)
    rest_ids, rest_lp = top_logprobs(rest)
    assert rest_ids == full_ids
    assert torch.allclose(rest_lp, full_lp, atol=1e-5)


@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_bytes_loaded_equal_bytes_stored(pool, engines, model, prompt):
    store_prompt(engines, url_of(pool), model, prompt)
    reader = engines.new(url_of(pool))
    reader.retrieve(prompt, kvcaches=KVBuffers.empty(LAYERS, KV_HEADS, PROMPT_TOKENS, HEAD_SIZE, torch.float32))
    stats = connector_of(reader).stats()
    expected = PROMPT_TOKENS * 2 * LAYERS * KV_HEADS * HEAD_SIZE * 4 + 3 * blockcodec.HEADER_LEN
    assert stats["load_store"]["bytes_read"] == expected


@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_exists_sync_is_a_bool_and_batched_contains_counts_leading_chunks(pool, engines, model, prompt):
    store_prompt(engines, url_of(pool), model, prompt)
    reader = engines.new(url_of(pool))
    connector = connector_of(reader)
    keys = chunk_keys(reader, prompt)
    assert connector.exists_sync(keys[0]) is True
    other = chunk_keys(reader, prompt + 1)
    assert connector.exists_sync(other[0]) is False
    assert connector.batched_contains(keys) == 3
    assert connector.batched_contains([keys[0], other[1], keys[2]]) == 1


@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_put_never_releases_the_memory_object(pool, engines, prompt):
    import asyncio

    engine = engines.new(url_of(pool))
    connector = connector_of(engine)
    key = chunk_keys(engine, prompt)[0]
    memory_obj = connector.local_cpu_backend.allocate(connector.meta_shapes, connector.meta_dtypes,
                                                      connector.meta_fmt)
    before = memory_obj.get_ref_count()
    asyncio.run(connector.put(key, memory_obj))
    asyncio.run(connector.batched_put([key], [memory_obj]))
    assert memory_obj.get_ref_count() == before
    memory_obj.ref_count_down()


# ---- refused blocks ---------------------------------------------------------------------------------------------

def forged_blobs(identity: ModelIdentity, key: int, payload: bytes) -> dict[str, bytes]:
    """Blobs under `key` that must never be loaded, by the refusal each must get."""
    good = blockcodec.encode(identity, payload, key=key)
    damaged = bytearray(good)
    damaged[-1] ^= 0x01
    foreign = ModelIdentity(**{**_fields(identity), "name": "someone/else"})
    return {
        blockcodec.Rejection.CHECKSUM.value: bytes(damaged),
        blockcodec.Rejection.FOREIGN_IDENTITY.value: blockcodec.encode(foreign, payload, key=key),
        blockcodec.Rejection.FOREIGN_KEY.value: blockcodec.encode(identity, payload, key=key ^ 1),
        blockcodec.Rejection.SHORT.value: good[:blockcodec.HEADER_LEN - 1],
        "size": blockcodec.encode(identity, payload[:100], key=key),
    }


def _fields(identity: ModelIdentity) -> dict:
    return {name: getattr(identity, name) for name in identity.__dataclass_fields__}


@pytest.mark.slow  # LMCache engines (a few seconds each)
@pytest.mark.parametrize("reason", ["checksum", "foreign identity", "foreign key", "short", "size"])
def test_refused_block_is_a_counted_miss_and_recomputed(pool, engines, model, prompt, reason):
    engine = engines.new(url_of(pool))
    connector = connector_of(engine)
    first = chunk_keys(engine, prompt)[0]
    key = pool_key(connector.identity, first)
    payload = bytes(CHUNK * 2 * LAYERS * KV_HEADS * HEAD_SIZE * 4)
    blob = forged_blobs(connector.identity, key, payload)[reason]
    with KVPClient(ClientOptions(server=pool, tenant=connector.identity.tenant(), timeout=0.3)) as client:
        client.put_block(key, blob, BLOCK_VERSION)

    assert connector.batched_contains(chunk_keys(engine, prompt)) == 1  # the pool holds it ...
    got = KVBuffers.empty(LAYERS, KV_HEADS, PROMPT_TOKENS, HEAD_SIZE, torch.float32)
    hit = engine.retrieve(prompt, kvcaches=got)
    assert int(hit.sum()) == 0  # ... and it is never loaded
    assert all(not k.any() for k in got.keys)
    assert connector.counters["refused"] == 1
    assert connector.counters[f"refused:{reason}"] == 1
    assert connector.counters["loaded"] == 0


@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_another_models_chunks_are_neither_found_nor_loaded(pool, engines, model, prompt):
    store_prompt(engines, url_of(pool), model, prompt)
    other = engines.new(url_of(pool), model_name="kvswitch/another-model")
    assert connector_of(other).batched_contains(chunk_keys(other, prompt)) == 0
    salted = engines.new(url_of(pool, salt="tenant-b"))
    assert connector_of(salted).batched_contains(chunk_keys(salted, prompt)) == 0


# ---- the pool down ----------------------------------------------------------------------------------------------

@pytest.mark.slow  # LMCache engines (a few seconds each)
def test_pool_down_gives_misses_and_no_exception(engines, model, prompt):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:  # a port nobody serves
        probe.bind(("127.0.0.1", 0))
        address = probe.getsockname()
    engine = engines.new(url_of(address, timeout="0.05", retries="0"))
    connector = connector_of(engine)
    kv = prefill(model, prompt)
    engine.store(prompt, kvcaches=kv)  # no exception; saves dropped
    wait_for(lambda: connector.counters["store_dropped"] >= 1)
    fresh = engines.new(url_of(address, timeout="0.05", retries="0"))
    got = KVBuffers.empty(LAYERS, KV_HEADS, PROMPT_TOKENS, HEAD_SIZE, torch.float32)
    assert int(fresh.retrieve(prompt, kvcaches=got).sum()) == 0
    assert connector_of(fresh).batched_contains(chunk_keys(fresh, prompt)) == 0
    assert connector.counters["stored"] == 0


# ---- URL, identity and keys (no engine) ---------------------------------------------------------------------------

def test_adapter_parses_its_urls_only():
    adapter = KVSwitchConnectorAdapter()
    assert adapter.can_parse("kvswitch://10.0.0.200:7420")
    assert adapter.can_parse("plugin://kvswitch")
    assert adapter.can_parse("plugin://kvswitch.primary")
    assert not adapter.can_parse("plugin://fs")
    assert not adapter.can_parse("redis://localhost:6379")


@pytest.mark.parametrize("url, problem", [
    ("redis://h:1", "starts with"), ("kvswitch://host", "HOST:PORT"), ("kvswitch://h:1?colour=red", "unknown"),
    ("kvswitch://h:1?timeout=soon", "timeout=soon"),
])
def test_bad_pool_urls_are_explained(url, problem):
    with pytest.raises(ValueError, match=problem.split("=")[0]):
        PoolURL.parse(url)


def test_pool_url_options():
    url = PoolURL.parse("kvswitch://10.0.0.200:7420?salt=t1&timeout=0.5&retries=1&probe=lookup_meta")
    assert url == PoolURL("10.0.0.200:7420", "t1", 0.5, 1, "lookup_meta")


def test_pool_keys_depend_on_identity_and_salt_and_are_stable():
    from lmcache.utils import CacheEngineKey

    metadata = LMCacheMetadata(model_name=MODEL_NAME, world_size=1, local_world_size=1, worker_id=0,
                               local_worker_id=0, kv_dtype=torch.float32,
                               kv_shape=(LAYERS, 2, CHUNK, KV_HEADS, HEAD_SIZE), chunk_size=CHUNK)
    identity = identity_of(metadata)
    assert (identity.num_layers, identity.num_kv_heads, identity.head_size, identity.block_tokens,
            identity.dtype) == (LAYERS, KV_HEADS, HEAD_SIZE, CHUNK, "float32")
    key = CacheEngineKey(MODEL_NAME, 1, 0, 12345, torch.float32)
    assert pool_key(identity, key) == pool_key(identity_of(metadata), CacheEngineKey(MODEL_NAME, 1, 0, 12345,
                                                                                   torch.float32))
    assert pool_key(identity, key) != pool_key(identity_of(metadata, salt="b"), key)
    assert pool_key(identity, key) != pool_key(identity, CacheEngineKey(MODEL_NAME, 1, 0, 12346, torch.float32))
    assert pool_key(identity, key) != pool_key(identity, CacheEngineKey(MODEL_NAME, 2, 1, 12345, torch.float32))
