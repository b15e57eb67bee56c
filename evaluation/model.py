"""LLM model shapes that set a KV block's size in bytes and the prefill compute a cached block saves.

Values come from each model's Hugging Face `config.json` (cited per preset); parameter counts from the model
cards. Only what the KV cache and the FLOP count need is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.traces import BLOCK_TOKENS


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer, as far as KV bytes and prefill FLOPs are concerned."""

    name: str
    layers: int
    """`num_hidden_layers`."""
    attention_heads: int
    """`num_attention_heads` (query heads; they set the attention FLOPs)."""
    kv_heads: int
    """`num_key_value_heads` (GQA; they set the KV bytes)."""
    head_dim: int
    """`hidden_size / num_attention_heads` unless the config names `head_dim`."""
    dtype_bytes: int
    """Bytes per KV element (2 for bfloat16/float16)."""
    params: float
    """Parameter count; a forward pass costs about 2 FLOPs per parameter per token."""
    source: str
    """Where the numbers come from."""
    latent_dim: int = 0
    """Multi-head latent attention (DeepSeek's MLA): elements cached per token per layer (the compressed KV
    latent plus the decoupled RoPE key) instead of separate keys and values; 0 = ordinary (GQA) attention."""

    @property
    def kv_bytes_per_token(self) -> int:
        """Key and value vectors of every layer: 2 × layers × kv_heads × head_dim × dtype bytes (with MLA:
        layers × latent_dim × dtype bytes)."""
        if self.latent_dim:
            return self.layers * self.latent_dim * self.dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    def block_bytes(self, block_tokens: int = BLOCK_TOKENS) -> int:
        """Bytes of one KV block of `block_tokens` tokens."""
        return self.kv_bytes_per_token * block_tokens

    def prefill_flops(self, start: int, end: int) -> float:
        """FLOPs to prefill token positions [start, end) when positions [0, start) are already cached.

        Linear layers: 2 × params per token. Causal attention: the token at position p scores against p + 1
        keys and mixes p + 1 values, 2 × head_dim FLOPs each, for every query head of every layer:
        4 × layers × heads × head_dim × Σ_{p=start}^{end-1} (p + 1).
        """
        if not 0 <= start <= end:
            raise ValueError(f"prefill range [{start}, {end}) is not a valid token range")
        tokens = end - start
        pairs = (end * (end + 1) - start * (start + 1)) // 2
        return 2.0 * self.params * tokens + 4.0 * self.layers * self.attention_heads * self.head_dim * pairs


MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        ModelConfig("llama-3-8b", layers=32, attention_heads=32, kv_heads=8, head_dim=128, dtype_bytes=2,
                    params=8.03e9, source="huggingface.co/meta-llama/Meta-Llama-3-8B config.json (hidden 4096)"),
        ModelConfig("llama-3-70b", layers=80, attention_heads=64, kv_heads=8, head_dim=128, dtype_bytes=2,
                    params=70.6e9, source="huggingface.co/meta-llama/Meta-Llama-3-70B config.json (hidden 8192)"),
        # MLA caches kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per token per layer, 61 layers:
        # 70,272 bytes per token in BF16, ~34 MiB per 512-token block. FLOPs use the 37 B activated
        # parameters (MoE) and the 192-wide query-key heads (128 no-RoPE + 64 RoPE).
        ModelConfig("deepseek-v3", layers=61, attention_heads=128, kv_heads=1, head_dim=192, dtype_bytes=2,
                    params=37e9, latent_dim=576,
                    source="huggingface.co/deepseek-ai/DeepSeek-V3 config.json (kv_lora_rank 512, "
                           "qk_rope_head_dim 64, 61 layers; 671 B parameters, 37 B activated)"),
        ModelConfig("qwen2.5-7b", layers=28, attention_heads=28, kv_heads=4, head_dim=128, dtype_bytes=2,
                    params=7.62e9, source="huggingface.co/Qwen/Qwen2.5-7B config.json (hidden 3584)"),
        ModelConfig("mistral-7b", layers=32, attention_heads=32, kv_heads=8, head_dim=128, dtype_bytes=2,
                    params=7.24e9, source="huggingface.co/mistralai/Mistral-7B-v0.1 config.json (hidden 4096)"),
    )
}


def model_preset(name: str) -> ModelConfig:
    """A preset by name; unknown names list the known ones."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
