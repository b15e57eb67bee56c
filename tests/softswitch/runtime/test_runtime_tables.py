"""Match engine: every match kind, priorities, defaults, and P4Runtime error codes for bad entries."""

import pytest

from softswitch.runtime.tables import ActionParam, ActionRef, KeyField, Table
from softswitch.target import Exact, Lpm, OptionalMatch, Range, TableEntry, TargetError, Ternary


def _fn(name):
    def action(state, *args):
        state.append((name, args))
    return action


def make(keys, size=16, actions=None, default=("drop", {})):
    actions = actions or [ActionRef("fwd", (ActionParam("port", 9),)), ActionRef("drop"),
                          ActionRef("only_default", default_only=True)]
    return Table("t", [KeyField(*k) for k in keys], actions, _fn, default, size=size)


def run(table, *key):
    out = table.lookup(tuple(key))
    state = []
    out.fn(state, *out.args)
    return out.hit, state[0]


def entry(match, action="fwd", params=None, priority=0):
    return TableEntry("t", match, action, {"port": 1} if params is None and action == "fwd" else (params or {}), priority)


def test_exact_table_hits_on_equal_key_and_misses_to_default():
    t = make([("k", "exact", 16)])
    t.insert(entry({"k": Exact(7)}, params={"port": 3}))
    assert run(t, 7) == (True, ("fwd", (3,)))
    assert run(t, 8) == (False, ("drop", ()))


def test_lpm_longest_prefix_wins_regardless_of_insertion_order():
    t = make([("dst", "lpm", 32)])
    t.insert(entry({"dst": Lpm(0x0A000000, 8)}, params={"port": 1}))
    t.insert(entry({"dst": Lpm(0x0A010200, 24)}, params={"port": 3}))
    t.insert(entry({"dst": Lpm(0x0A010000, 16)}, params={"port": 2}))
    assert run(t, 0x0A010203)[1] == ("fwd", (3,))
    assert run(t, 0x0A01FF01)[1] == ("fwd", (2,))
    assert run(t, 0x0AFF0000)[1] == ("fwd", (1,))
    assert run(t, 0x0B000000)[0] is False


def test_lpm_default_route_is_prefix_length_zero_and_delete_restores_shorter_match():
    t = make([("dst", "lpm", 32)])
    t.insert(entry({}, params={"port": 9}))  # missing lpm field = /0
    t.insert(entry({"dst": Lpm(0x0A000000, 8)}, params={"port": 1}))
    assert run(t, 0x0A000001)[1] == ("fwd", (1,))
    t.delete({"dst": Lpm(0x0A000000, 8)})
    assert run(t, 0x0A000001)[1] == ("fwd", (9,))


def test_exact_plus_lpm_key_matches_both():
    t = make([("vrf", "exact", 8), ("dst", "lpm", 32)])
    t.insert(entry({"vrf": Exact(1), "dst": Lpm(0x0A000000, 8)}, params={"port": 1}))
    t.insert(entry({"vrf": Exact(2), "dst": Lpm(0x0A010000, 16)}, params={"port": 2}))
    assert run(t, 1, 0x0A010101)[1] == ("fwd", (1,))
    assert run(t, 2, 0x0A010101)[1] == ("fwd", (2,))
    assert run(t, 2, 0x0A020101)[0] is False


def test_ternary_higher_priority_wins_over_earlier_insert():
    t = make([("k", "ternary", 16)])
    t.insert(entry({"k": Ternary(0x0000, 0x0000)}, params={"port": 1}, priority=1))
    t.insert(entry({"k": Ternary(0x1200, 0xFF00)}, params={"port": 2}, priority=10))
    assert run(t, 0x1234)[1] == ("fwd", (2,))
    assert run(t, 0x1334)[1] == ("fwd", (1,))


def test_range_and_optional_keys_match_inclusively_and_wildcard_when_absent():
    t = make([("r", "range", 16), ("o", "optional", 8)])
    t.insert(entry({"r": Range(10, 20), "o": OptionalMatch(5)}, params={"port": 1}, priority=2))
    t.insert(entry({"r": Range(10, 20)}, params={"port": 2}, priority=1))
    assert run(t, 10, 5)[1] == ("fwd", (1,))
    assert run(t, 20, 6)[1] == ("fwd", (2,))
    assert run(t, 21, 5)[0] is False


def test_set_default_changes_miss_action_and_get_default_reports_it():
    t = make([("k", "exact", 8)])
    t.set_default("fwd", {"port": 4})
    assert run(t, 1) == (False, ("fwd", (4,)))
    assert t.get_default() == ("fwd", {"port": 4})


def test_modify_replaces_action_of_existing_entry():
    t = make([("k", "exact", 8)])
    t.insert(entry({"k": Exact(1)}, params={"port": 1}))
    t.modify(entry({"k": Exact(1)}, action="drop"))
    assert run(t, 1) == (True, ("drop", ()))
    assert t.entries()[0].action == "drop"


@pytest.mark.parametrize(("keys", "bad", "code"), [
    ([("k", "exact", 8)], entry({"k": Exact(256)}), "INVALID_ARGUMENT"),           # value too wide
    ([("k", "exact", 8)], entry({}), "INVALID_ARGUMENT"),                         # exact cannot be wildcard
    ([("k", "exact", 8)], entry({"x": Exact(1)}), "INVALID_ARGUMENT"),            # unknown field
    ([("k", "exact", 8)], entry({"k": Lpm(1, 8)}), "INVALID_ARGUMENT"),           # wrong match kind
    ([("k", "lpm", 8)], entry({"k": Lpm(0xFF, 4)}), "INVALID_ARGUMENT"),          # bits beyond prefix
    ([("k", "lpm", 8)], entry({"k": Lpm(0, 9)}), "INVALID_ARGUMENT"),             # prefix too long
    ([("k", "ternary", 8)], entry({"k": Ternary(1, 1)}), "INVALID_ARGUMENT"),     # missing priority
    ([("k", "ternary", 8)], entry({"k": Ternary(3, 1)}, priority=1), "INVALID_ARGUMENT"),  # value outside mask
    ([("k", "exact", 8)], entry({"k": Exact(1)}, priority=5), "INVALID_ARGUMENT"),  # priority on exact table
    ([("k", "range", 8)], entry({"k": Range(5, 4)}, priority=1), "INVALID_ARGUMENT"),
    ([("k", "exact", 8)], entry({"k": Exact(1)}, action="nope"), "INVALID_ARGUMENT"),
    ([("k", "exact", 8)], entry({"k": Exact(1)}, params={"port": 512}), "INVALID_ARGUMENT"),
    ([("k", "exact", 8)], entry({"k": Exact(1)}, params={"prt": 1}), "INVALID_ARGUMENT"),
    ([("k", "exact", 8)], entry({"k": Exact(1)}, action="only_default"), "INVALID_ARGUMENT"),
])
def test_bad_entries_are_refused_with_invalid_argument(keys, bad, code):
    t = make(keys)
    with pytest.raises(TargetError) as err:
        t.insert(bad)
    assert err.value.code == code


def test_duplicate_insert_is_already_exists_and_missing_delete_is_not_found():
    t = make([("k", "exact", 8)])
    t.insert(entry({"k": Exact(1)}))
    with pytest.raises(TargetError) as err:
        t.insert(entry({"k": Exact(1)}))
    assert err.value.code == "ALREADY_EXISTS"
    with pytest.raises(TargetError) as err:
        t.delete({"k": Exact(2)})
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(TargetError) as err:
        t.modify(entry({"k": Exact(2)}))
    assert err.value.code == "NOT_FOUND"


def test_same_ternary_match_with_other_priority_is_a_distinct_entry():
    t = make([("k", "ternary", 8)])
    t.insert(entry({"k": Ternary(1, 0xFF)}, priority=1))
    t.insert(entry({"k": Ternary(1, 0xFF)}, priority=2))
    assert len(t) == 2


def test_full_table_refuses_with_resource_exhausted():
    t = make([("k", "exact", 8)], size=2)
    t.insert(entry({"k": Exact(1)}))
    t.insert(entry({"k": Exact(2)}))
    with pytest.raises(TargetError) as err:
        t.insert(entry({"k": Exact(3)}))
    assert err.value.code == "RESOURCE_EXHAUSTED"


def test_const_default_cannot_be_changed():
    t = Table("t", [KeyField("k", "exact", 8)], [ActionRef("drop")], _fn, ("drop", {}), const_default=True)
    with pytest.raises(TargetError) as err:
        t.set_default("drop")
    assert err.value.code == "PERMISSION_DENIED"


def test_entries_are_listed_in_insertion_order():
    t = make([("k", "exact", 8)])
    for k in (5, 1, 3):
        t.insert(entry({"k": Exact(k)}))
    assert [e.match["k"].value for e in t.entries()] == [5, 1, 3]
