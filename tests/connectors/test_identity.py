"""Model identities and the keys chained over them: stable, separating, prefix-preserving."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from connectors.identity import ModelIdentity, block_hashes, dtype_size
from kvpool.keys import TENANT_BITS
from kvpool.prefix_hash import token_prefix_hashes

TINY = ModelIdentity("kvswitch/tiny", "float32", num_layers=4, num_kv_heads=2, head_size=64, block_tokens=256)
PROMPT = list(range(3, 3 + 1100))

VARIANTS = {
    "name": {"name": "kvswitch/other"},
    "dtype": {"dtype": "bfloat16"},
    "layers": {"num_layers": 5},
    "kv heads": {"num_kv_heads": 4},
    "head size": {"head_size": 128},
    "block tokens": {"block_tokens": 128},
    "salt": {"salt": "tenant-b"},
    "layout": {"layout": "vllm/cpu/vec/block128"},
}


def test_digest_is_the_same_in_another_process() -> None:
    code = ("from connectors.identity import ModelIdentity as M; "
            "print(M('kvswitch/tiny', 'float32', 4, 2, 64, 256).digest().hex())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PYTHONPATH": "."}).stdout.strip()
    assert other == TINY.digest().hex()
    assert len(TINY.digest()) == 16


@pytest.mark.parametrize("field", list(VARIANTS), ids=list(VARIANTS))
def test_every_field_changes_digest_and_every_key(field: str) -> None:
    other = dataclasses.replace(TINY, **VARIANTS[field])
    assert other.digest() != TINY.digest()
    size = min(TINY.block_tokens, other.block_tokens)
    mine, theirs = block_hashes(PROMPT, TINY, size), block_hashes(PROMPT, other, size)
    assert len(mine) == len(theirs) > 0
    assert not set(mine) & set(theirs)


def test_keys_differ_from_unsalted_token_hashes() -> None:
    plain = token_prefix_hashes(PROMPT, 256)
    assert not set(block_hashes(PROMPT, TINY)) & set(plain)


def test_one_key_per_full_block_and_prefix_property() -> None:
    keys = block_hashes(PROMPT, TINY)
    assert len(keys) == len(PROMPT) // 256 == 4
    assert block_hashes(PROMPT[:512], TINY) == keys[:2]
    assert block_hashes(PROMPT[:511], TINY) == keys[:1]
    changed = PROMPT.copy()
    changed[300] += 1  # inside block 1: block 0 keeps its key, every later one changes
    other = block_hashes(changed, TINY)
    assert other[0] == keys[0] and all(a != b for a, b in zip(other[1:], keys[1:], strict=True))


def test_request_salt_separates_tenants_of_one_model() -> None:
    assert TINY.salted("") is TINY
    a, b = TINY.salted("alice"), TINY.salted("bob")
    assert len({TINY.digest(), a.digest(), b.digest()}) == 3
    assert not set(block_hashes(PROMPT, a)) & set(block_hashes(PROMPT, b))


def test_tenant_is_a_nonzero_kvp_tenant() -> None:
    tenants = {dataclasses.replace(TINY, salt=str(i)).tenant() for i in range(200)}
    assert all(0 < t < 1 << TENANT_BITS for t in tenants)
    assert len(tenants) > 190  # spread over the 16-bit space


def test_block_bytes_of_presets() -> None:
    assert TINY.kv_bytes_per_token == 4096
    llama = ModelIdentity("llama3-8b-kv", "bfloat16", 32, 8, 128, 256)
    assert llama.kv_bytes_per_token == 128 << 10 and llama.block_bytes == 32 << 20
    with pytest.raises(ValueError, match="unknown KV dtype"):
        dtype_size("float64x")


@pytest.mark.parametrize("bad", [{"num_layers": 0}, {"head_size": -1}, {"block_tokens": True}, {"name": ""}])
def test_invalid_identity_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(TINY, **bad)
