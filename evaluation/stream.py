"""A trace flattened into the block-reference stream every replay walks, built once and shared.

Building the `BlockInfo` of every reference once (they are frozen) keeps the per-policy replay loop to one
`Pool.access` call per reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.traces import BLOCK_TOKENS, Trace
from policies.base import BlockInfo
from policies.request import AnnotatorOptions, RequestAnnotator


@dataclass(frozen=True)
class BlockStream:
    """Block references in trace order, with request boundaries and per-reference times."""

    trace: Trace
    blocks: tuple[BlockInfo, ...]
    """One BlockInfo per reference, in order."""
    starts: tuple[int, ...]
    """Index in `blocks` where each request begins; a final sentinel equals len(blocks)."""
    times: tuple[float, ...]
    """Arrival time (s) of each request."""
    unique_blocks: int

    @classmethod
    def from_trace(cls, trace: Trace, block_tokens: int = BLOCK_TOKENS) -> BlockStream:
        """Annotate every request as it arrives (depth, parent, tail, conversation turn; no look-ahead)."""
        annotator = RequestAnnotator(AnnotatorOptions(block_tokens=block_tokens))
        blocks: list[BlockInfo] = []
        starts: list[int] = []
        for request in trace.requests:
            starts.append(len(blocks))
            # The annotator shows a request's output length only to the conversation's *next* turn (by then
            # generation has finished), never to the request itself.
            blocks.extend(annotator.blocks(request.blocks, request.input_tokens,
                                           output_length=request.output_tokens))
        starts.append(len(blocks))
        return cls(trace, tuple(blocks), tuple(starts), tuple(r.arrival_s for r in trace.requests),
                   len({b.key for b in blocks}))

    def __len__(self) -> int:
        return len(self.blocks)

    def request_slices(self):
        """(time, first index, end index) per request."""
        for i, now in enumerate(self.times):
            yield now, self.starts[i], self.starts[i + 1]

    def capacity(self, fraction: float) -> int:
        """A pool size given as a fraction of the unique blocks (≥ 1 block)."""
        return max(1, round(self.unique_blocks * fraction))
