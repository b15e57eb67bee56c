"""`--mooncake-shared`: two storage nodes of a steered pool over one Mooncake Store, a bucket failing over from
one to the other and back (controller/steering.py). Without it the node that gets the bucket back would keep
serving the version it remembered; with it, it reads what the other node committed meanwhile."""

from __future__ import annotations

import pytest

from kvpool.constants import Status
from tests.kvpool.fake_mooncake import FakeStore
from tests.kvpool.test_backends import get, mooncake_node, write


@pytest.mark.parametrize("shared", [True, False])
def test_a_node_that_gets_its_bucket_back_sees_the_other_nodes_writes_only_when_shared(shared: bool) -> None:
    store = FakeStore()
    home, replica = mooncake_node(store, shared=shared), mooncake_node(store, shared=shared)
    assert write(home, 0x77, b"1" * 200, 1) == {Status.OK}
    assert get(home, 0x77, 0, 2)[1][:3] == b"111"
    # the home node stops answering probes: the bucket goes to the replica, which commits v2
    assert get(replica, 0x77, 0, 2)[0].version == 1
    assert write(replica, 0x77, b"2" * 200, 2) == {Status.OK}
    # the home node answers again and gets the bucket back
    header, value = get(home, 0x77, 0, 2)
    if shared:
        assert (header.status, header.version, value[:3]) == (Status.HIT_SERVER, 2, b"222")
        assert write(home, 0x77, b"3" * 200, 3) == {Status.OK}
        assert get(replica, 0x77, 1, 2)[0].version == 3
    else:
        assert header.version == 1, "why --mooncake-shared exists: the old record is kept in the process"


def test_an_unreadable_record_is_not_an_absent_one_the_node_decides_nothing_until_it_reads_again() -> None:
    """A record whose replica sits on a dead node's segment: `get` says b"" (as for an absent key) but
    `is_exist` says 1. Taking it for absent would accept v2 over the committed v3 (a stale value for every later
    reader); the node answers MISS and ERR_FULL instead, and judges again once the record reads."""
    store = FakeStore()
    node = mooncake_node(store, shared=True)
    assert write(node, 0x78, b"3" * 200, 3) == {Status.OK}
    store.unreadable.add("kvp/0/0000000000000078/newest")
    assert get(node, 0x78, 0, 2)[0].status == Status.MISS
    assert write(node, 0x78, b"2" * 200, 2) == {Status.ERR_FULL}
    assert write(node, 0x78, b"4" * 200, 4) == {Status.ERR_FULL}
    assert node.counters["store_unavailable"] >= 3
    store.unreadable.clear()
    header, value = get(node, 0x78, 1, 2)
    assert (header.status, header.version, value[:3]) == (Status.HIT_SERVER, 3, b"333")
    assert write(node, 0x78, b"2" * 200, 2) == {Status.ERR_STALE}
    assert write(node, 0x78, b"4" * 200, 4) == {Status.OK}


def test_cached_bytes_are_not_served_for_a_version_committed_again_with_other_bytes() -> None:
    """A node that lost a block's record and object with a dead node's segment may see the version committed
    again by another node with other bytes; a node that cached the first bytes must not serve them."""
    store = FakeStore()
    first, second = mooncake_node(store, shared=True), mooncake_node(store, shared=True)
    assert write(first, 0x79, b"a" * 200, 1) == {Status.OK}
    assert get(first, 0x79, 0, 2)[1][:1] == b"a"  # cached in `first`
    store.objects.clear()  # the record and the object were on the dead node's segment
    assert write(second, 0x79, b"b" * 200, 1) == {Status.OK}
    header, value = get(first, 0x79, 0, 2)
    assert (header.status, value[:1]) == (Status.HIT_SERVER, b"b")
