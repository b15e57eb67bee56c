"""A pool block's payload gathered from, and scattered into, an engine's paged KV caches (torch).

The payload of a pool block is, for each attention layer in model order, the engine blocks of that pool block
exactly as the engine's cache holds them (K and V of every token, every KV head, in the model's dtype),
concatenated:

    payload = layer 0 [block b0, b1, ..., b(n-1)] ‖ layer 1 [...] ‖ ... ‖ layer L-1 [...]

Copying paged blocks as they are costs one gather per layer and keeps K and V bit-exact; it ties the payload to
the engine's block layout, which the model identity names (`ModelIdentity.layout`), so an engine with another
layout never reads it (its keys differ and the codec refuses it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import torch

_NUMBER = re.compile(r"(\d+)")


def layer_order(names: Sequence[str]) -> list[str]:
    """Layer names in model order: "model.layers.2.self_attn.attn" before "model.layers.10....": numbers
    compared as numbers."""
    return sorted(names, key=lambda name: [int(p) if p.isdigit() else p for p in _NUMBER.split(name)])


class PagedKV:
    """The engine's per-layer KV caches, whose block dimension is `num_blocks` long."""

    def __init__(self, caches: Mapping[str, torch.Tensor], num_blocks: int) -> None:
        if not caches:
            raise ValueError("no KV cache layers to read or write")
        self.names = layer_order(list(caches))
        self.layers = [caches[name] for name in self.names]
        self.block_dims = [self._block_dim(name, tensor, num_blocks) for name, tensor in zip(self.names,
                                                                                           self.layers,
                                                                                           strict=True)]

    @staticmethod
    def _block_dim(name: str, tensor: torch.Tensor, num_blocks: int) -> int:
        for dim in (0, 1):
            if tensor.dim() > dim and tensor.shape[dim] == num_blocks:
                return dim
        raise ValueError(f"KV cache {name} of shape {tuple(tensor.shape)} has no dimension of {num_blocks} blocks")

    def block_bytes(self, layer: int) -> int:
        """Bytes of one engine block of one layer."""
        tensor, dim = self.layers[layer], self.block_dims[layer]
        return tensor.numel() // tensor.shape[dim] * tensor.element_size()

    def payload_bytes(self, engine_blocks: int) -> int:
        """Bytes of the payload of a pool block of `engine_blocks` engine blocks."""
        return engine_blocks * sum(self.block_bytes(i) for i in range(len(self.layers)))

    def gather(self, block_ids: Sequence[int]) -> bytearray:
        """The payload of the engine blocks `block_ids` (a copy: the engine may reuse the blocks at once).

        Copied with numpy on views of the caches' bytes: one copy, single-threaded (torch's gather would run
        its OpenMP threads, which on a busy host wait for one another at every call)."""
        index = np.asarray(block_ids, dtype=np.int64)
        out = bytearray(self.payload_bytes(len(block_ids)))
        flat = np.frombuffer(out, dtype=np.uint8)
        offset = 0
        for layer, dim in enumerate(self.block_dims):
            source = _bytes_of(self.layers[layer])
            shape = list(source.shape)
            shape[dim] = len(block_ids)
            size = self.block_bytes(layer) * len(block_ids)
            np.take(source, index, axis=dim, out=flat[offset:offset + size].reshape(shape))
            offset += size
        return out

    def scatter(self, block_ids: Sequence[int], payload: bytes | bytearray, first: int = 0) -> None:
        """Write `payload` (of all of `block_ids`) into the cache, only blocks `block_ids[first:]`."""
        count = len(block_ids)
        if len(payload) != self.payload_bytes(count):
            raise ValueError(f"payload of {len(payload)} bytes, {count} engine blocks take "
                             f"{self.payload_bytes(count)}")
        flat = np.frombuffer(payload, dtype=np.uint8)
        index = np.asarray(block_ids[first:], dtype=np.int64)
        offset = 0
        for layer, dim in enumerate(self.block_dims):
            target = _bytes_of(self.layers[layer])
            shape = list(target.shape)
            shape[dim] = count
            size = self.block_bytes(layer) * count
            blocks = flat[offset:offset + size].reshape(shape)
            if dim == 0:
                target[index] = blocks[first:]
            else:
                target[:, index] = blocks[:, first:]
            offset += size


def _bytes_of(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor's bytes, same shape but the last dimension in bytes."""
    return tensor.view(torch.uint8).numpy()
