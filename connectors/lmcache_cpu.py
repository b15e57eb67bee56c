"""LMCache's engine on a CPU: a KV "GPU connector" that copies between LMCache's memory objects and plain tensors.

LMCache moves KV between the engine's cache and its own memory objects through a `GPUConnectorInterface`; the
connectors it ships (vLLM's paged cache, SGLang's) need an accelerator. This one serves transformers' eager
models on a CPU, which is what the tests and the calibration run: `KVBuffers` holds one key and one value tensor
per layer, `[kv_heads, tokens, head_size]` (a `DynamicCache` of batch 1 without its batch axis), and
`CPUKVConnector` copies token ranges between them and LMCache's `KV_2LTD` memory objects
(`[2, layers, tokens, kv_heads × head_size]`, keys first).

    buffers = KVBuffers.from_cache(model(ids, use_cache=True).past_key_values)
    engine.store(tokens, kvcaches=buffers)                 # from_gpu: buffers → memory objects → the pool
    empty = KVBuffers.empty(layers, kv_heads, len(tokens), head_size, torch.float32)
    hit = engine.retrieve(tokens, kvcaches=empty)         # to_gpu: the pool → memory objects → buffers
    cache = empty.to_cache(int(hit.sum()))                # a DynamicCache of the hit prefix

Needs torch and transformers (the engine environment, `.venv-engine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface
from lmcache.v1.memory_management import MemoryObj


@dataclass(frozen=True)
class KVBuffers:
    """A request's KV as plain tensors: `keys[l]` and `values[l]` are `[kv_heads, tokens, head_size]`."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    def __post_init__(self) -> None:
        if not self.keys or len(self.keys) != len(self.values):
            raise ValueError("KVBuffers needs one key and one value tensor per layer")
        shape = self.keys[0].shape
        if len(shape) != 3 or any(t.shape != shape for t in (*self.keys, *self.values)):
            raise ValueError(f"every layer's K and V must be [kv_heads, tokens, head_size] alike, got {shape}")

    @classmethod
    def empty(cls, layers: int, kv_heads: int, tokens: int, head_size: int, dtype: torch.dtype) -> KVBuffers:
        """Zeroed buffers for `tokens` tokens: what `retrieve` fills."""
        def make() -> tuple[torch.Tensor, ...]:
            return tuple(torch.zeros(kv_heads, tokens, head_size, dtype=dtype) for _ in range(layers))
        return cls(make(), make())

    @classmethod
    def from_cache(cls, cache) -> KVBuffers:
        """The KV of a transformers `DynamicCache` of batch 1 (views, not copies)."""
        layers = list(cache.layers)
        if not layers or layers[0].keys is None or layers[0].keys.shape[0] != 1:
            raise ValueError("from_cache takes a filled DynamicCache of batch size 1")
        return cls(tuple(layer.keys[0] for layer in layers), tuple(layer.values[0] for layer in layers))

    def to_cache(self, tokens: int):
        """A `DynamicCache` holding copies of the first `tokens` tokens of every layer."""
        from transformers import DynamicCache

        if not 0 <= tokens <= self.tokens:
            raise ValueError(f"{tokens} tokens asked of buffers holding {self.tokens}")
        cache = DynamicCache()
        for layer, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            cache.update(k[None, :, :tokens].clone(), v[None, :, :tokens].clone(), layer)
        return cache

    @property
    def layers(self) -> int:
        return len(self.keys)

    @property
    def kv_heads(self) -> int:
        return int(self.keys[0].shape[0])

    @property
    def tokens(self) -> int:
        return int(self.keys[0].shape[1])

    @property
    def head_size(self) -> int:
        return int(self.keys[0].shape[2])


class CPUKVConnector(GPUConnectorInterface):
    """Copies token ranges between `KVBuffers` (the `kvcaches` keyword of LMCache's store and retrieve) and
    LMCache memory objects in `KV_2LTD` layout."""

    def __init__(self, layers: int, kv_heads: int, head_size: int) -> None:
        self.layers = layers
        self.kv_heads = kv_heads
        self.head_size = head_size

    def get_shape(self, num_tokens: int) -> torch.Size:
        return torch.Size([2, self.layers, num_tokens, self.kv_heads * self.head_size])

    def _buffers(self, kwargs: dict) -> KVBuffers:
        buffers = kwargs.get("kvcaches")
        if not isinstance(buffers, KVBuffers):
            raise TypeError("CPUKVConnector needs kvcaches=KVBuffers(...)")
        if (buffers.layers, buffers.kv_heads, buffers.head_size) != (self.layers, self.kv_heads, self.head_size):
            raise ValueError(f"buffers of {buffers.layers} layers × {buffers.kv_heads} heads × "
                             f"{buffers.head_size} for a connector of {self.layers} × {self.kv_heads} × "
                             f"{self.head_size}")
        return buffers

    def _view(self, memory_obj: MemoryObj, start: int, end: int) -> torch.Tensor:
        tensor = memory_obj.tensor
        if tensor is None or tuple(tensor.shape) != tuple(self.get_shape(end - start)):
            shape = None if tensor is None else tuple(tensor.shape)
            raise ValueError(f"memory object of shape {shape} for tokens [{start}, {end})")
        return tensor

    def from_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs) -> None:
        """Buffers → memory object, tokens [start, end)."""
        buffers = self._buffers(kwargs)
        tensor = self._view(memory_obj, start, end)
        n = end - start
        for layer in range(self.layers):
            tensor[0, layer].copy_(buffers.keys[layer][:, start:end].transpose(0, 1).reshape(n, -1))
            tensor[1, layer].copy_(buffers.values[layer][:, start:end].transpose(0, 1).reshape(n, -1))

    def to_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs) -> None:
        """Memory object → buffers, tokens [start, end)."""
        buffers = self._buffers(kwargs)
        tensor = self._view(memory_obj, start, end)
        n = end - start
        for layer in range(self.layers):
            buffers.keys[layer][:, start:end].copy_(tensor[0, layer].reshape(n, self.kv_heads, -1).transpose(0, 1))
            buffers.values[layer][:, start:end].copy_(
                tensor[1, layer].reshape(n, self.kv_heads, -1).transpose(0, 1))

    def batched_from_gpu(self, memory_objs, starts: Sequence[int], ends: Sequence[int], **kwargs) -> None:
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.from_gpu(memory_obj, start, end, **kwargs)

    def batched_to_gpu(self, memory_objs=None, starts=None, ends=None, **kwargs) -> None:
        for memory_obj, start, end in zip(memory_objs or (), starts or (), ends or (), strict=True):
            self.to_gpu(memory_obj, start, end, **kwargs)
