"""The softswitch process takes frames of all its ports in the order they arrived, as BMv2's one input buffer.

Request coalescing depends on it: readers' GETs that reached the switch before the storage node's reply must be
processed before it (they join the pending entry), not after (the reply already freed it, each GET goes on to the
storage node). A port set that drains one port's backlog before looking at the next reorders exactly that."""

from __future__ import annotations

import os
import threading
import time

import pytest

from softswitch.ports import PortSet, PortSpec

pytestmark = [pytest.mark.slow, pytest.mark.root]


def _frame(tag: int) -> bytes:
    return bytes.fromhex("02000000000102000000000288b5") + tag.to_bytes(2, "big") + bytes(44)


def test_frames_of_two_ports_are_taken_in_arrival_order() -> None:
    if os.geteuid() != 0:
        pytest.skip("veth pairs and raw sockets need root")
    from kvtesting.veth import HostPorts, VethPairs

    pairs = VethPairs((1, 2), tag="ao").create()
    got: list[tuple[int, int]] = []
    done = threading.Event()
    total = 12

    def on_frame(port: int, frame: bytes) -> None:
        if frame[12:14] == b"\x88\xb5":
            got.append((port, int.from_bytes(frame[14:16], "big")))
            if len(got) == total:
                done.set()

    ports = PortSet([PortSpec(p.port, p.switch_end) for p in pairs], on_frame)
    hosts = HostPorts(pairs)
    try:
        ports.open()
        # a burst of "GETs" on port 1, a "reply" on port 2, more "GETs" on port 1, all queued before the switch
        # reads anything
        sent = [(1, i) for i in range(5)] + [(2, 5)] + [(1, i) for i in range(6, total)]
        for port, tag in sent:
            hosts.send(port, _frame(tag))
            time.sleep(0.001)  # distinct arrival times
        ports.start()
        assert done.wait(10), got
        assert got == sent
    finally:
        ports.close()
        hosts.close()
        pairs.close()
