"""Lookahead: the one signal about the future a serving system really has is its request queue.

A pool that sees the requests queued for the next W seconds (scheduler-aware eviction, as CachedAttention
does with its job queue) knows the next use of every block those requests read. It evicts the resident block
whose next use is furthest among those it can see, and when some resident blocks have no use in sight, the
least recently used of those. W = 0 is LRU; W → ∞ is Belady's MIN. Hit ratios over W trace the curve between.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Sequence

from evaluation.prefix import HitCounter
from evaluation.stream import BlockStream


def next_use_times(stream: BlockStream) -> list[float]:
    """For each reference, the arrival time (s) of the next reference to the same block (inf if none)."""
    times = [0.0] * len(stream)
    for now, start, end in stream.request_slices():
        for i in range(start, end):
            times[i] = now
    following = [math.inf] * len(stream)
    seen: dict = {}
    blocks = stream.blocks
    for i in range(len(blocks) - 1, -1, -1):
        key = blocks[i].key
        following[i] = seen.get(key, math.inf)
        seen[key] = times[i]
    return following


def lookahead_counter(stream: BlockStream, capacity: int, window_s: float,
                      following: Sequence[float] | None = None) -> HitCounter:
    """Replay with a pool of `capacity` blocks that sees the queue `window_s` seconds ahead."""
    if capacity < 1 or window_s < 0:
        raise ValueError("capacity must be ≥ 1 and window_s ≥ 0")
    following = next_use_times(stream) if following is None else following
    resident: OrderedDict = OrderedDict()  # key → next use time; first = least recently used
    furthest: list[tuple[float, int, object]] = []  # max-heap on next use: (−time, tie, key)
    counter = HitCounter()
    blocks = stream.blocks
    tie = 0
    for now, start, end in stream.request_slices():
        horizon = now + window_s
        hits = []
        for i in range(start, end):
            key = blocks[i].key
            nxt = following[i]
            if key in resident:
                hits.append(True)
                resident.move_to_end(key)
            else:
                hits.append(False)
                if len(resident) >= capacity:
                    while -furthest[0][0] != resident.get(furthest[0][2], -1.0):
                        heapq.heappop(furthest)  # stale entry
                    top = -furthest[0][0]
                    if top <= horizon:  # every resident block is used again within sight
                        victim = heapq.heappop(furthest)[2]
                    else:
                        victim = next(k for k, t in resident.items() if t > horizon)
                    del resident[victim]
            resident[key] = nxt
            tie += 1
            heapq.heappush(furthest, (-nxt, tie, key))
        counter.add(hits)
        if len(furthest) > 4 * capacity + 64:
            furthest = [(-t, n, k) for n, (k, t) in enumerate(resident.items())]
            heapq.heapify(furthest)
    return counter


def lookahead_curve(stream: BlockStream, capacity: int, windows_s: Sequence[float]) -> dict[float, HitCounter]:
    following = next_use_times(stream)
    return {w: lookahead_counter(stream, capacity, w, following) for w in windows_s}
