"""Reconciling the controller's slot map with the switch's index after a restart of either.

* `restore`, after the controller (re)starts: pins and the slot map come back from SQLite and are matched
  with the index entries the switch still holds;
* `resync`, after the switch reconnects (it may have restarted and lost everything): the switch's index is
  made equal to our slot map.

Every entry (re)installed here carries a fresh admission generation (docs/dataplane.md, *Coherence*), so a slot filled before the
restart is never served to the new admission; an entry kept as it is keeps the generation the switch reports,
and no generation at or below one seen on the switch is handed out again. A lost connection mid-way defers the
rest to the next reconnect's resync instead of failing.
"""

from __future__ import annotations

import logging

from controller.dataplane import DataPlane, connection_lost
from controller.ledger import SlotLedger
from kvpool.keys import ChunkKey
from policies.base import Tier

log = logging.getLogger("controller.pool")


def switch_entries(dataplane: DataPlane) -> dict[ChunkKey, tuple[int, int]]:
    """The switch's index as key → (slot, generation)."""
    return dataplane.installed_entries()


def _bind(ledger: SlotLedger, key: ChunkKey, slot: int, generation: int, admitted: float, now: float,
          version: int = 0, read_counter: bool = True) -> None:
    """Take `key` at `slot` in our map; its hit baseline is the slot counter now (0 when not read: a resync
    re-installing it reads it then)."""
    entry = ledger.track(key, now)
    ledger.slotpool.claim(entry.info, slot, generation, now)
    entry.admitted_at = admitted
    entry.version = max(entry.version, version)
    entry.hit_baseline = ledger.slot_counter(slot) if read_counter else 0
    entry.switch_hits = 0
    ledger.tiers.add(key, Tier.SWITCH)


def restore(ledger: SlotLedger, now: float | None = None) -> dict[str, int]:
    """Load pins and the slot map from SQLite, then reconcile them with the index the switch still holds.

    * in both, same slot: kept (a controller restart changes nothing on the switch);
    * on the switch only: adopted (we learn the slot from the entry);
    * in SQLite only (switch restarted or entry lost): re-installed under a fresh generation; the next storage
      reply refills it;
    * on both with different slots: the switch's entry is replaced by ours, under a fresh generation.

    Pinned chunks left without a slot are the caller's to admit (`PoolManager.restore`); counts["deferred"] > 0
    means the switch went away mid-way.
    """
    with ledger.lock:
        now = ledger.clock() if now is None else now
        counts = {"kept": 0, "adopted": 0, "reinstalled": 0, "pins": 0, "dropped": 0, "deferred": 0}
        saved: dict[int, tuple[ChunkKey, float, int, int]] = {}
        if ledger.state is not None:
            for pin in ledger.state.pins():
                if pin.active(now):
                    ledger.slotpool.restore_pin(pin)
                    counts["pins"] += 1
                else:
                    ledger.state.drop_pin(pin.key)
            saved = ledger.state.slots()
        on_switch = switch_entries(ledger.dataplane)
        generations = ledger.slotpool.generations
        generations.above(max([g for _, g in on_switch.values()] + [g for *_, g in saved.values()], default=0))
        wanted = {key: (slot, admitted, version) for slot, (key, admitted, version, _) in saved.items()}
        lost = False  # the switch went away mid-run: the rest is bound in our map only, for the next resync
        for key, (slot, admitted, version) in sorted(wanted.items(), key=lambda kv: kv[1][0]):
            have = on_switch.get(key)
            if have is not None and have[0] == slot:
                _bind(ledger, key, slot, have[1] or generations.next(), admitted, now, version, read_counter=not lost)
                counts["kept"] += 1
                continue
            generation = generations.next()
            if lost:
                _bind(ledger, key, slot, generation, admitted, now, version, read_counter=False)
                counts["deferred"] += 1
                continue
            try:
                if have is not None:
                    ledger.dataplane.remove(key)
                ledger.dataplane.install(key, slot, min_version=version, generation=generation)
            except Exception as exc:
                if connection_lost(exc):
                    log.warning("switch went away while restoring the index (%s); the remaining entries wait "
                                "for the next reconnect's resync", exc)
                    lost = True
                    _bind(ledger, key, slot, generation, admitted, now, version, read_counter=False)
                    counts["deferred"] += 1
                    continue
                log.warning("re-installing %s at slot %d failed: %s", key, slot, exc)
                if ledger.state is not None:
                    ledger.state.free_slot(slot)
                counts["dropped"] += 1
                continue
            _bind(ledger, key, slot, generation, admitted, now, version)
            if ledger.state is not None:
                ledger.state.bind_slot(slot, key, admitted, version, generation)
            ledger.log_decision("reinstall", key, f"in saved state, missing on the switch (generation {generation})",
                              slot=slot, now=now)
            counts["reinstalled"] += 1
        for key, (slot, generation) in on_switch.items():
            if key in wanted or lost:  # adopting needs the switch; the resync removes what we did not adopt
                continue
            if ledger.slots.key_at(slot) is not None or not 0 <= slot < ledger.slots.capacity:
                ledger.dataplane.remove(key)  # conflicts with our map: ours wins
                counts["dropped"] += 1
                continue
            generation = generation or generations.next()
            _bind(ledger, key, slot, generation, now, now)
            if ledger.state is not None:
                ledger.state.bind_slot(slot, key, now, 0, generation)
            ledger.log_decision("adopt", key, "found on the switch, not in saved state", slot=slot, now=now)
            counts["adopted"] += 1
        ledger.sync_occupancy()
        return counts


def resync(ledger: SlotLedger, now: float | None = None) -> dict[str, int]:
    """After a reconnect: make the switch's index equal to our slot map (a restarted switch gets it all back,
    each entry under a fresh generation)."""
    with ledger.lock:
        now = ledger.clock() if now is None else now
        on_switch = switch_entries(ledger.dataplane)
        ledger.slotpool.generations.above(max((g for _, g in on_switch.values()), default=0))
        counts = {"kept": 0, "reinstalled": 0, "removed": 0, "deferred": 0}
        mine = sorted(ledger.slots.items(), key=lambda kv: kv[1])
        for done, (key, slot) in enumerate(mine):
            assert isinstance(key, ChunkKey)
            have = on_switch.get(key)
            if have is not None and have[0] == slot and have[1] in (0, ledger.slotpool.generation_of(key)):
                counts["kept"] += 1
                continue
            entry = ledger.track(key, now)
            generation = ledger.slotpool.regenerate(key)
            try:
                if have is not None:
                    ledger.dataplane.remove(key)
                ledger.dataplane.install(key, slot, min_version=entry.version, generation=generation)
            except Exception as exc:
                if connection_lost(exc):
                    counts["deferred"] = len(mine) - done
                    log.warning("switch went away during the resync (%s); %d entries wait for the next "
                                "reconnect's resync", exc, counts["deferred"])
                    return counts
                log.warning("re-installing %s failed: %s", key, exc)
                continue
            if ledger.state is not None:
                ledger.state.bind_slot(slot, key, entry.admitted_at or now, entry.version, generation)
            entry.hit_baseline, entry.switch_hits = ledger.slot_counter(slot), 0
            counts["reinstalled"] += 1
        for key in on_switch:
            if key in ledger.slots:
                continue
            try:
                ledger.dataplane.remove(key)
            except Exception as exc:
                if connection_lost(exc):
                    log.warning("switch went away during the resync (%s); stale entries wait for the next "
                                "reconnect's resync", exc)
                    return counts
                log.warning("removing the stale index entry of %s failed: %s", key, exc)
                continue
            counts["removed"] += 1
        if counts["reinstalled"] or counts["removed"]:
            log.info("resynchronised the switch's index: %s", counts)
        return counts
