"""Match-action tables: entry validation and CRUD with P4Runtime error codes, and the per-packet lookup.

Three lookup strategies, chosen from the key's match kinds when the table is built:
- only `exact` keys: one dict keyed by the tuple of key values (one hash probe per packet);
- `exact` keys plus one `lpm` key: one dict per prefix length in use, probed longest first;
- anything with `ternary`/`range`/`optional` (or several lpm keys): entries sorted by priority, higher first
  (P4Runtime convention), ties broken by insertion order, scanned until the first match.

A lookup returns an `Outcome` whose `fn`/`args` are the bound action, so the caller runs `fn(state, *args)`
without any further dispatch. Actions are bound through a callback so this module stays independent of
how actions are compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from softswitch.runtime.externs import DirectCounterCell
from softswitch.target import Exact, Lpm, Match, OptionalMatch, Range, TableEntry, TargetError, Ternary

DEFAULT_TABLE_SIZE = 1024
"""p4c's BMv2 back end gives a table without `size` 1024 entries."""

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional")
_PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


@dataclass(frozen=True, slots=True)
class KeyField:
    """One field of a table key, named as P4Info names it."""

    name: str
    match_kind: str
    width: int


@dataclass(frozen=True, slots=True)
class ActionParam:
    name: str
    width: int
    signed: bool = False


@dataclass(frozen=True, slots=True)
class ActionRef:
    """An action a table may run, with its control-plane parameters."""

    name: str
    params: tuple[ActionParam, ...] = ()
    table_only: bool = False
    """`@tableonly`: not allowed as default action"""
    default_only: bool = False
    """`@defaultonly`: not allowed in entries"""


class Outcome:
    """The result of one lookup: the action to run, its arguments, and the entry that matched (if any)."""

    __slots__ = ("action", "args", "counter", "default_params", "entry", "fn", "hit", "key", "seq", "tests")

    def __init__(self, hit: bool, action: str, fn: Callable, args: tuple, entry: TableEntry | None) -> None:
        self.hit = hit
        self.action = action
        self.fn = fn
        self.args = args
        self.entry = entry
        self.counter: DirectCounterCell | None = None
        self.key: tuple = ()
        self.seq = 0
        self.tests: tuple = ()
        self.default_params: dict[str, int] = {}
        """The action data of a default outcome, by parameter name (what table_get_default returns)."""


ActionBinder = Callable[[str], Callable]
"""Given a fully qualified action name, the compiled callable `fn(state, *args)`."""


class Table:
    """One P4 table's entries and default action."""

    def __init__(
        self,
        name: str,
        keys: Sequence[KeyField],
        actions: Sequence[ActionRef],
        bind: ActionBinder,
        default_action: tuple[str, Mapping[str, int]],
        size: int = DEFAULT_TABLE_SIZE,
        const_default: bool = False,
        direct_counter: str | None = None,
    ) -> None:
        self.name = name
        self.keys = tuple(keys)
        self.actions = {a.name: a for a in actions}
        self.size = size
        self.const_default = const_default
        self.const_entries = False
        self.direct_counter = direct_counter
        self._bind = bind
        for k in self.keys:
            if k.match_kind not in MATCH_KINDS:
                raise ValueError(f"table {name}: key {k.name} has unsupported match kind {k.match_kind!r}")
        self._key_index = {k.name: i for i, k in enumerate(self.keys)}
        kinds = [k.match_kind for k in self.keys]
        self.needs_priority = any(kind in _PRIORITY_KINDS for kind in kinds)
        lpm_positions = [i for i, kind in enumerate(kinds) if kind == "lpm"]
        if not self.keys:
            self._mode = "keyless"
        elif all(kind == "exact" for kind in kinds):
            self._mode = "exact"
        elif not self.needs_priority and len(lpm_positions) == 1:
            self._mode = "lpm"
            self._lpm_pos = lpm_positions[0]
            self._lpm_width = self.keys[self._lpm_pos].width
        else:
            self._mode = "scan"
        self._by_key: dict[tuple, Outcome] = {}
        self.exact_entries: dict[tuple, Outcome] = {}
        """An exact-only table's entries by key tuple (its generated code looks up here directly)."""
        self._levels: dict[int, dict] = {}
        self._level_order: list[tuple[int, dict]] = []
        self._scan: list[Outcome] = []
        self._seq = 0
        self.default_outcome = self._make_default(*default_action)
        """What a miss runs (a keyless table runs nothing else: its generated code reads this directly, no
        lookup call; `set_default` replaces it)."""
        self.lookup = self._choose_lookup()

    # ---- lookup (per packet) ---------------------------------------------------------------------------

    def _choose_lookup(self) -> Callable[[tuple], Outcome]:
        if self._mode == "keyless":
            return self._lookup_keyless
        if self._mode == "exact":
            return self._lookup_exact
        if self._mode == "lpm":
            return self._lookup_lpm_single if len(self.keys) == 1 else self._lookup_lpm
        return self._lookup_scan

    def _lookup_keyless(self, key: tuple) -> Outcome:
        return self.default_outcome

    def _lookup_exact(self, key: tuple) -> Outcome:
        return self.exact_entries.get(key, self.default_outcome)

    def _lookup_lpm_single(self, key: tuple) -> Outcome:
        value = key[0]
        for mask, level in self._level_order:
            out = level.get(value & mask)
            if out is not None:
                return out
        return self.default_outcome

    def _lookup_lpm(self, key: tuple) -> Outcome:
        pos = self._lpm_pos
        value = key[pos]
        rest = key[:pos] + key[pos + 1 :]
        for mask, level in self._level_order:
            out = level.get((rest, value & mask))
            if out is not None:
                return out
        return self.default_outcome

    def _lookup_scan(self, key: tuple) -> Outcome:
        for out in self._scan:
            for k, (m, v, lo, hi) in zip(key, out.tests):  # noqa: B905 - same length by construction
                if (k & m) != v or k < lo or k > hi:
                    break
            else:
                return out
        return self.default_outcome

    # ---- default action -------------------------------------------------------------------------------

    def _bind_action(self, action: str, params: Mapping[str, int], as_default: bool) -> tuple[Callable, tuple]:
        ref = self.actions.get(action)
        if ref is None:
            raise TargetError("INVALID_ARGUMENT", f"table {self.name}: action {action!r} is not one of its actions "
                              f"({', '.join(sorted(self.actions))})")
        if as_default and ref.table_only:
            raise TargetError("INVALID_ARGUMENT", f"table {self.name}: action {action} is @tableonly")
        if not as_default and ref.default_only:
            raise TargetError("INVALID_ARGUMENT", f"table {self.name}: action {action} is @defaultonly")
        given = set(params)
        wanted = [p.name for p in ref.params]
        if given != set(wanted):
            missing = sorted(set(wanted) - given)
            extra = sorted(given - set(wanted))
            raise TargetError("INVALID_ARGUMENT", f"table {self.name}: action {action} parameters: "
                              f"missing {missing}, unknown {extra}")
        args = []
        for p in ref.params:
            value = params[p.name]
            if not isinstance(value, int) or not 0 <= value < (1 << p.width):
                raise TargetError("INVALID_ARGUMENT", f"table {self.name}: action {action} parameter {p.name}="
                                  f"{value!r} does not fit bit<{p.width}>")
            if p.signed and value >> (p.width - 1):
                value -= 1 << p.width
            args.append(value)
        return self._bind(action), tuple(args)

    def _make_default(self, action: str, params: Mapping[str, int]) -> Outcome:
        fn, args = self._bind_action(action, params, as_default=True)
        out = Outcome(False, action, fn, args, None)
        out.default_params = dict(params)
        return out

    def set_default(self, action: str, params: Mapping[str, int] | None = None) -> None:
        if self.const_default:
            raise TargetError("PERMISSION_DENIED", f"table {self.name}: default action is const")
        self.default_outcome = self._make_default(action, params or {})

    def get_default(self) -> tuple[str, Mapping[str, int]]:
        return self.default_outcome.action, dict(self.default_outcome.default_params)

    # ---- entries ---------------------------------------------------------------------------------------

    def _canonical(self, match: Mapping[str, Match], priority: int) -> tuple[tuple, tuple]:
        """Validate a match; return (identity key, per-field tests (mask, value, lo, hi))."""
        if self.needs_priority:
            if priority <= 0:
                raise TargetError("INVALID_ARGUMENT", f"table {self.name}: priority > 0 required (ternary/range/optional key)")
        elif priority != 0:
            raise TargetError("INVALID_ARGUMENT", f"table {self.name}: priority must be 0 (no ternary/range/optional key)")
        for name in match:
            if name not in self._key_index:
                raise TargetError("INVALID_ARGUMENT", f"table {self.name}: no key field {name!r} "
                                  f"(fields: {', '.join(k.name for k in self.keys)})")
        ident: list[object] = []
        tests: list[tuple[int, int, int, int]] = []
        for k in self.keys:
            full = (1 << k.width) - 1
            m = match.get(k.name)
            kind = k.match_kind

            def bad(why: str, k: KeyField = k) -> TargetError:
                return TargetError("INVALID_ARGUMENT", f"table {self.name}: key {k.name} ({k.match_kind}, "
                                   f"bit<{k.width}>): {why}")

            def fits(v: int, full: int = full) -> bool:
                return isinstance(v, int) and 0 <= v <= full

            if kind == "exact":
                if not isinstance(m, Exact):
                    raise bad("an exact value is required" if m is None else f"got {type(m).__name__}")
                if not fits(m.value):
                    raise bad(f"value {m.value!r} does not fit")
                ident.append(m.value)
                tests.append((full, m.value, 0, full))
            elif kind == "lpm":
                if m is None:
                    m = Lpm(0, 0)
                if not isinstance(m, Lpm):
                    raise bad(f"got {type(m).__name__}")
                if not fits(m.value) or not 0 <= m.prefix_len <= k.width:
                    raise bad(f"value {m.value!r}/{m.prefix_len} does not fit")
                pmask = full ^ ((1 << (k.width - m.prefix_len)) - 1)
                if m.value & ~pmask:
                    raise bad(f"value {m.value:#x} has bits set beyond prefix length {m.prefix_len}")
                ident.append((m.value, m.prefix_len))
                tests.append((pmask, m.value, 0, full))
            elif kind == "ternary":
                if m is None:
                    m = Ternary(0, 0)
                if not isinstance(m, Ternary):
                    raise bad(f"got {type(m).__name__}")
                if not fits(m.value) or not fits(m.mask):
                    raise bad(f"value/mask {m.value!r}/{m.mask!r} do not fit")
                if m.value & ~m.mask:
                    raise bad(f"value {m.value:#x} has bits outside mask {m.mask:#x}")
                ident.append((m.value, m.mask))
                tests.append((m.mask, m.value, 0, full))
            elif kind == "range":
                if m is None:
                    m = Range(0, full)
                if not isinstance(m, Range):
                    raise bad(f"got {type(m).__name__}")
                if not fits(m.low) or not fits(m.high) or m.low > m.high:
                    raise bad(f"range {m.low!r}..{m.high!r} is empty or does not fit")
                ident.append((m.low, m.high))
                tests.append((0, 0, m.low, m.high))
            else:  # optional
                if m is None:
                    ident.append(None)
                    tests.append((0, 0, 0, full))
                    continue
                if not isinstance(m, OptionalMatch):
                    raise bad(f"got {type(m).__name__}")
                if not fits(m.value):
                    raise bad(f"value {m.value!r} does not fit")
                ident.append(m.value)
                tests.append((full, m.value, 0, full))
        if self.needs_priority:
            ident.append(priority)
        return tuple(ident), tuple(tests)

    def insert(self, entry: TableEntry, *, force: bool = False) -> None:
        """Add an entry; `force` lets the program's own `const entries` in."""
        if self.const_entries and not force:
            raise TargetError("PERMISSION_DENIED", f"table {self.name}: entries are const")
        ident, tests = self._canonical(entry.match, entry.priority)
        if ident in self._by_key:
            raise TargetError("ALREADY_EXISTS", f"table {self.name}: entry already exists")
        if len(self._by_key) >= self.size:
            raise TargetError("RESOURCE_EXHAUSTED", f"table {self.name}: full ({self.size} entries)")
        fn, args = self._bind_action(entry.action, entry.params, as_default=False)
        out = Outcome(True, entry.action, fn, args, entry)
        out.key = ident
        out.tests = tests
        out.counter = DirectCounterCell() if self.direct_counter else None
        self._seq += 1
        out.seq = self._seq
        self._by_key[ident] = out
        self._place(out)

    def modify(self, entry: TableEntry) -> None:
        if self.const_entries:
            raise TargetError("PERMISSION_DENIED", f"table {self.name}: entries are const")
        ident, _ = self._canonical(entry.match, entry.priority)
        out = self._by_key.get(ident)
        if out is None:
            raise TargetError("NOT_FOUND", f"table {self.name}: no such entry")
        fn, args = self._bind_action(entry.action, entry.params, as_default=False)
        # mutate in place: the same Outcome object sits in the lookup structures
        out.action, out.fn, out.args, out.entry = entry.action, fn, args, entry

    def delete(self, match: Mapping[str, Match], priority: int = 0) -> None:
        if self.const_entries:
            raise TargetError("PERMISSION_DENIED", f"table {self.name}: entries are const")
        ident, _ = self._canonical(match, priority)
        out = self._by_key.pop(ident, None)
        if out is None:
            raise TargetError("NOT_FOUND", f"table {self.name}: no such entry")
        self._unplace(out)

    def find(self, match: Mapping[str, Match], priority: int = 0) -> Outcome:
        ident, _ = self._canonical(match, priority)
        out = self._by_key.get(ident)
        if out is None:
            raise TargetError("NOT_FOUND", f"table {self.name}: no such entry")
        return out

    def entries(self) -> list[TableEntry]:
        return [out.entry for out in sorted(self._by_key.values(), key=lambda o: o.seq) if out.entry is not None]

    def clear(self) -> None:
        for out in list(self._by_key.values()):
            self._unplace(out)
        self._by_key.clear()

    def __len__(self) -> int:
        return len(self._by_key)

    # ---- lookup structures --------------------------------------------------------------------------------

    def _lpm_parts(self, out: Outcome) -> tuple[int, object]:
        pos = self._lpm_pos
        value, plen = out.key[pos]
        if len(self.keys) == 1:
            return plen, value
        rest = out.key[:pos] + out.key[pos + 1 :]
        return plen, (rest, value)

    def _rebuild_levels(self) -> None:
        w = self._lpm_width
        full = (1 << w) - 1
        self._level_order = [
            (full ^ ((1 << (w - plen)) - 1), level)
            for plen, level in sorted(self._levels.items(), reverse=True)
        ]

    def _place(self, out: Outcome) -> None:
        if self._mode == "exact":
            self.exact_entries[out.key] = out
        elif self._mode == "lpm":
            plen, k = self._lpm_parts(out)
            level = self._levels.get(plen)
            if level is None:
                level = self._levels[plen] = {}
                level[k] = out
                self._rebuild_levels()
            else:
                level[k] = out
        elif self._mode == "scan":
            self._scan.append(out)
            # priority high first; equal priorities keep insertion order (sort is stable)
            self._scan.sort(key=lambda o: -o.key[-1] if self.needs_priority else 0)

    def _unplace(self, out: Outcome) -> None:
        if self._mode == "exact":
            del self.exact_entries[out.key]
        elif self._mode == "lpm":
            plen, k = self._lpm_parts(out)
            level = self._levels[plen]
            del level[k]
            if not level:
                del self._levels[plen]
                self._rebuild_levels()
        elif self._mode == "scan":
            self._scan.remove(out)
