"""Reading the switch's per-slot hit counters and crediting the hits to the chunks that own the slots.

Counters are per slot and cumulative, so a chunk's hits are the counter minus its baseline when it took the
slot; a counter below that (the switch restarted) restarts the baseline. The fast poll reads only the slots of
chunks admitted within `first_hit_window` (to time the first switch hit); the regular poll reads every slot.
The counter reads (P4Runtime RPCs) run without the pool lock, so digests and punts are never held up by a poll;
a slot whose owner changed meanwhile is skipped (its counts may be the old owner's).
"""

from __future__ import annotations

from controller.ledger import SlotLedger
from kvpool.keys import ChunkKey


def poll(ledger: SlotLedger, now: float | None = None, only_pending: bool = False) -> int:
    """Read the counters, feed new hits to the policies, time first hits. Returns slots with new hits."""
    with ledger.lock:
        if only_pending:
            owners = fast_poll_owners(ledger, ledger.clock() if now is None else now)
            if not owners:
                return 0
        else:
            owners = {s: (k, ledger.tracked[k].admitted_at) for k, s in ledger.slots.items() if k in ledger.tracked}
    counts = ledger.dataplane.slot_hits(sorted(owners))
    with ledger.lock:
        now = ledger.clock() if now is None else now
        changed = 0
        for slot, total in counts.items():
            key = ledger.slots.key_at(slot)
            if key is None or slot not in owners or owners[slot][0] != key:
                continue
            assert isinstance(key, ChunkKey)
            entry = ledger.track(key, now)
            if entry.admitted_at != owners[slot][1]:
                continue  # evicted and re-admitted while we were reading
            if total < entry.hit_baseline + entry.switch_hits:  # the switch's counters restarted from zero
                entry.hit_baseline = -entry.switch_hits
            delta = total - entry.hit_baseline - entry.switch_hits
            if delta <= 0:
                continue
            changed += 1
            entry.switch_hits += delta
            entry.accesses += delta
            ledger.slotpool.hit(entry.info, now, min(delta, ledger.options.hit_weight_cap))
            entry.score = ledger.slotpool.admission.score(entry.info, now)
            entry.stored = True  # a switch hit: the slot held the value
            if entry.first_hit_at is None:
                entry.first_hit_at = now
                ledger.pending_first_hit.discard(key)
                if entry.first_digest_at is not None:
                    ledger.metrics.latency("hot_to_first_hit", now - entry.first_digest_at)
        return changed


def fast_poll_owners(ledger: SlotLedger, now: float) -> dict[int, tuple[ChunkKey, float | None]]:
    """{slot: (key, admitted_at)} of the fast first-hit poll: chunks admitted within `first_hit_window`, the
    newest `first_hit_max_slots` of them; older ones leave the fast poll for good."""
    horizon = now - ledger.options.first_hit_window
    recent = []
    for key in list(ledger.pending_first_hit):
        entry, slot = ledger.tracked.get(key), ledger.slots.slot_of(key)
        if entry is None or slot is None or entry.admitted_at is None or entry.admitted_at < horizon:
            ledger.pending_first_hit.discard(key)  # the regular poll still records its first hit
            continue
        recent.append((entry.admitted_at, slot, key))
    recent.sort(reverse=True)
    return {slot: (key, admitted) for admitted, slot, key in recent[: ledger.options.first_hit_max_slots]}
