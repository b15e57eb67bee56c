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
