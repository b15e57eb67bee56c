"""The scheduler side of a KV connector, engine-neutral: which pool blocks a request loads and which it saves.

A pool block is a group of `engine_blocks` consecutive engine blocks (vLLM's paged blocks): `block_tokens`
tokens, keyed by `connectors.identity.block_hashes`. For each request the planner

* answers the engine's "how many more tokens can the pool give?" with the pool's leading hits beyond what the
  engine computed itself (never the last prompt token: the engine must compute at least one to sample);
* once the engine allocated blocks, turns the hit into loads: the pool blocks and the engine blocks to fill,
  skipping engine blocks the engine already holds;
* after each scheduled step, turns the prompt's pool blocks that this step completes into saves, each once
  (blocks that came from the pool are not saved again); a failed load moves the save mark back, so blocks
  recomputed after a failed load are saved from their recomputation, never from the step that used bad KV.

It does no I/O: `match` gets the pool's answer through a callable (`PoolStore.leading_hits`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from connectors.identity import ModelIdentity, block_hashes


@dataclass(frozen=True, slots=True)
class BlockLoad:
    """One pool block to read into the engine's cache."""

    key: int
    """Its prefix hash."""
    block_ids: tuple[int, ...]
    """Engine blocks of this pool block, in order (all `engine_blocks` of them)."""
    first: int
    """Index in `block_ids` of the first engine block to fill (the ones before it the engine holds already)."""


@dataclass(frozen=True, slots=True)
class BlockSave:
    """One pool block to store from the engine's cache after this step's forward pass."""

    key: int
    block_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RequestLoad:
    """Everything one request loads in one step, in prompt order (a failed block fails the ones after it)."""

    request_id: str
    salt: str
    blocks: tuple[BlockLoad, ...]


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What the worker side does in one engine step."""

    loads: tuple[RequestLoad, ...] = ()
    saves: tuple[tuple[str, str, BlockSave], ...] = ()
    """(request id, salt, block) for every pool block to save after this step."""


@dataclass(slots=True)
class _Request:
    keys: list[int]
    """Prefix hashes of the prompt's full pool blocks."""
    salt: str
    num_computed: int = 0
    """Tokens the engine asked the pool about (its own prefix-cache hit, block-aligned)."""
    hit_blocks: int = 0
    """Pool blocks from the start that the pool holds or the engine holds: loaded, never saved."""
    block_ids: list[int] = field(default_factory=list)
    saved: int = 0
    """Pool blocks from the start that are stored or known stored (the next save starts here)."""
    load_tokens: tuple[int, int] | None = None
    """Tokens [from, to) to load in the request's next scheduled step."""


class Planner:
    """Per-request bookkeeping of one engine's scheduler (one instance per scheduler, not thread-safe)."""

    def __init__(self, identity: ModelIdentity, engine_block_tokens: int) -> None:
        if identity.block_tokens % engine_block_tokens:
            raise ValueError(f"a pool block ({identity.block_tokens} tokens) must be a whole number of engine "
                             f"blocks ({engine_block_tokens} tokens)")
        self.identity = identity
        self.engine_block_tokens = engine_block_tokens
        self.engine_blocks = identity.block_tokens // engine_block_tokens
        """Engine blocks per pool block."""
        self._requests: dict[str, _Request] = {}

    @property
    def block_tokens(self) -> int:
        return self.identity.block_tokens

    def keys(self, prompt: Sequence[int], salt: str = "") -> list[int]:
        """Prefix hashes of the prompt's full pool blocks under this identity (and the request's salt)."""
        return block_hashes(prompt, self.identity.salted(salt))

    # ---- scheduler hooks ----------------------------------------------------------------------------------

    def match(self, request_id: str, prompt: Sequence[int], num_computed: int,
              leading_hits: Callable[[Sequence[int]], int], salt: str = "") -> int:
        """Tokens beyond `num_computed` the pool can give this request (0 if none). Asks the pool only about
        the blocks the engine does not hold, and never counts the prompt's last token."""
        state = self._requests.get(request_id)
        if state is None or state.salt != salt:
            state = _Request(self.keys(prompt, salt), salt)
            self._requests[request_id] = state
        size = self.block_tokens
        loadable = min(len(state.keys), (len(prompt) - 1) // size)
        start = num_computed // size
        state.num_computed = num_computed
        state.hit_blocks = start
        if start >= loadable:
            state.saved = max(state.saved, start)
            return 0
        hits = leading_hits(state.keys[start:loadable])
        state.hit_blocks = start + hits
        state.saved = max(state.saved, state.hit_blocks)
        return max(0, state.hit_blocks * size - num_computed)

    def allocated(self, request_id: str, num_external: int) -> None:
        """The engine allocated blocks and will take `num_external` tokens from the pool (0: none)."""
        state = self._requests.get(request_id)
        if state is None or num_external <= 0:
            if state is not None:
                state.load_tokens = None
            return
        end = state.hit_blocks * self.block_tokens
        state.load_tokens = (end - num_external, end)

    def scheduled(self, request_id: str, block_ids: Iterable[int] | None, replace_blocks: bool,
                  computed_after_step: int) -> tuple[RequestLoad | None, list[BlockSave]]:
        """A step scheduled the request: its new engine blocks (all of them when `replace_blocks`, as for a
        request resumed after preemption), and the tokens it will have computed after the step. Returns its
        load for this step (if any) and the pool blocks to save after it."""
        state = self._requests.get(request_id)
        if state is None:
            return None, []
        if replace_blocks:
            state.block_ids = list(block_ids or ())
        elif block_ids:
            state.block_ids.extend(block_ids)
        load = self._load(request_id, state)
        saves = []
        full = min(computed_after_step // self.block_tokens, len(state.keys),
                   len(state.block_ids) // self.engine_blocks)
        for index in range(state.saved, full):
            saves.append(BlockSave(state.keys[index], self._engine_blocks_of(state, index)))
        state.saved = max(state.saved, full)
        return load, saves

    def _load(self, request_id: str, state: _Request) -> RequestLoad | None:
        if state.load_tokens is None:
            return None
        first_token, end_token = state.load_tokens
        state.load_tokens = None
        size, engine = self.block_tokens, self.engine_block_tokens
        blocks = []
        for index in range(first_token // size, end_token // size):
            if (index + 1) * self.engine_blocks > len(state.block_ids):
                break
            first = max(0, first_token - index * size) // engine
            blocks.append(BlockLoad(state.keys[index], self._engine_blocks_of(state, index), first))
        return RequestLoad(request_id, state.salt, tuple(blocks)) if blocks else None

    def _engine_blocks_of(self, state: _Request, index: int) -> tuple[int, ...]:
        return tuple(state.block_ids[index * self.engine_blocks:(index + 1) * self.engine_blocks])

    def load_failed(self, invalid_block_ids: set[int]) -> list[str]:
        """The worker could not load these engine blocks: the engine recomputes them, and the save mark of
        every request holding one moves back to that block's pool block. Returns the requests affected."""
        affected = []
        for request_id, state in self._requests.items():
            for position, block_id in enumerate(state.block_ids):
                if block_id in invalid_block_ids:
                    state.saved = min(state.saved, position // self.engine_blocks)
                    affected.append(request_id)
                    break
        return affected

    def salt_of(self, request_id: str) -> str:
        """The cache salt the request was keyed with ("" when none or unknown)."""
        state = self._requests.get(request_id)
        return state.salt if state is not None else ""

    def finished(self, request_id: str) -> None:
        """The request is done; forget it."""
        self._requests.pop(request_id, None)

    def __len__(self) -> int:
        return len(self._requests)
