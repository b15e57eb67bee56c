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


def test_frames_read_together_reach_the_switch_as_one_burst_in_arrival_order() -> None:
    """With `on_burst`, what the ports read together arrives in one call (the switch then queues the burst's
    copies towards their egress ports: the congestion mark's queue depths), in the same arrival order."""
    if os.geteuid() != 0:
        pytest.skip("veth pairs and raw sockets need root")
    from kvtesting.veth import HostPorts, VethPairs

    pairs = VethPairs((1, 2), tag="ab").create()
    bursts: list[list[tuple[int, int]]] = []
    done = threading.Event()
    total = 12

    def on_burst(frames) -> None:
        ours = [(port, int.from_bytes(f[14:16], "big")) for port, f in frames if f[12:14] == b"\x88\xb5"]
        if ours:
            bursts.append(ours)
        if sum(len(b) for b in bursts) >= total:
            done.set()

    ports = PortSet([PortSpec(p.port, p.switch_end) for p in pairs], lambda port, frame: None, on_burst=on_burst)
    hosts = HostPorts(pairs)
    try:
        ports.open()
        sent = [(1, i) for i in range(5)] + [(2, 5)] + [(1, i) for i in range(6, total)]
        for port, tag in sent:
            hosts.send(port, _frame(tag))
            time.sleep(0.001)
        time.sleep(0.2)  # all of them wait in the sockets before the port thread starts
        ports.start()
        assert done.wait(10), bursts
        assert bursts == [sent], "queued before the switch read anything: one burst, in arrival order"
    finally:
        ports.close()
        hosts.close()
        pairs.close()
