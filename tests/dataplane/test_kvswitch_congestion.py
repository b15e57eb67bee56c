"""The congestion mark (p4src/congestion.p4; docs/dataplane.md, "Congestion mark"): a KVP reply that finds
CONGESTED_QDEPTH or more packets queued ahead of it on its egress port leaves with F_CONGESTED; one that finds
fewer, or any request, leaves unmarked. Runs on every target of `conftest.target`.

How each target gets a queue it certainly has:

- in-process: `SoftSwitch.process_burst` runs the ingress of every packet of a burst before any egress, so the
  i-th reply towards one port finds exactly i packets ahead of it (no clock, no threads);
- the switch processes: the process is stopped while the burst is sent (`kvtesting.switch_process.paused`:
  SIGSTOP, then every thread seen stopped), so every frame is waiting in its socket when it runs again
  (SIGCONT) and reads them together. The softswitch hands such a burst to
  `process_burst` (exact depths again); BMv2's ingress thread queues them while its egress threads drain,
  so there the test lowers the threshold to one packet and asks for some marked replies, not which.
"""

from __future__ import annotations

import time

from scapy.layers.l2 import Ether

from kvpool.constants import Flag, Opcode, Status
from kvpool.protocol import KVP, KVPValue
from kvtesting.kvnet import CLIENT_PORT, STORAGE_PORT, KvNet, chunk_key, kvp_frame, value_chunk
from kvtesting.switch_process import paused

CONGESTED_QDEPTH = 32
"""The program's default threshold (`CONGESTED_QDEPTH` in p4src/include/constants.p4), in packets."""
CONFIG = "MyEgress.congestion_config"
SET_THRESHOLD = "MyEgress.set_congestion_threshold"
SETTLE_S = 0.5
"""After sending a burst to a stopped switch: time for the kernel to put every frame in the switch's
sockets (veth delivery takes microseconds; the margin is for a busy machine)."""
BURST_CAP_S = 60.0
"""Longest wait for a burst's frames from the softswitch process, which forwards every one (a bound, not a
timing goal: a quiet machine returns in milliseconds)."""


def reply(i: int) -> bytes:
    """The storage node's GET_REPLY number `i` (distinct chunks, nothing indexed: forwarded to the client)."""
    key = chunk_key(tenant=9, prefix_hash=0x0C0C_0000_0000_0000 + i, chunk_idx=i)
    kvp = KVP(opcode=Opcode.GET_REPLY, status=Status.HIT_SERVER, tenant=key.tenant, prefix_hash=key.prefix_hash,
              chunk_idx=key.chunk_idx, chunk_count=4, req_id=i, version=1) / KVPValue.from_bytes(value_chunk(i))
    return bytes(kvp_frame(kvp, to_storage=False))


def get(i: int) -> bytes:
    key = chunk_key(tenant=9, prefix_hash=0x0C0C_0000_0000_0000 + i, chunk_idx=i)
    kvp = KVP(opcode=Opcode.GET, tenant=key.tenant, prefix_hash=key.prefix_hash, chunk_idx=key.chunk_idx,
              chunk_count=4, req_id=i)
    return bytes(kvp_frame(kvp))


def marked(data: bytes) -> bool:
    return bool(Ether(data)[KVP].flags & Flag.CONGESTED)


def by_req_id(outputs: list[tuple[int, bytes]]) -> dict[int, bool]:
    return {Ether(d)[KVP].req_id: marked(d) for _, d in outputs}


def burst(target, request, port: int, frames: list[bytes]) -> list[tuple[int, bytes]]:
    """Every frame of `frames` arriving on `port` together (see the module docstring)."""
    if hasattr(target, "process_burst"):
        return target.process_burst([(port, f) for f in frames])
    kind = request.node.callspec.params["target"].removesuffix("-process")
    proc = request.getfixturevalue("dataplane_switches")._running[kind][0].proc
    target.late_frames.extend(target._collect_ready())  # nothing from before is counted as ours
    with paused(proc.pid):
        for f in frames:
            target.ports.send(port, f)
        time.sleep(SETTLE_S)
    out = target._collect_until_quiet()
    if is_bmv2(request):  # BMv2 may lose frames at its input: what came until it was quiet
        return out
    # the softswitch forwards every frame: wait for all of them, however long a loaded machine pauses it
    # between two (a pause longer than the harness's quiet gap must not cut the burst short)
    deadline = time.monotonic() + BURST_CAP_S
    while len(out) < len(frames) and time.monotonic() < deadline:
        out.extend(target._collect_until_quiet())
    return out


def is_bmv2(request) -> bool:
    return request.node.callspec.params["target"] == "bmv2-process"


def test_a_lone_reply_is_not_marked(net: KvNet) -> None:
    out = net.send(STORAGE_PORT, reply(0), frames=1)
    assert [p for p, _ in out] == [CLIENT_PORT]
    assert not marked(out[0][1])


def test_replies_behind_a_full_queue_are_marked_and_the_first_are_not(net: KvNet, target, request) -> None:
    n = CONGESTED_QDEPTH + 8
    out = burst(target, request, STORAGE_PORT, [reply(i) for i in range(n)])
    marks = by_req_id(out)
    if is_bmv2(request):
        # at most i packets can be ahead of the i-th: those under the threshold are certainly unmarked
        assert out and {p for p, _ in out} == {CLIENT_PORT}
        assert not any(m for i, m in marks.items() if i < CONGESTED_QDEPTH), marks
    else:
        assert [p for p, _ in out] == [CLIENT_PORT] * n
        assert marks == {i: i >= CONGESTED_QDEPTH for i in range(n)}


def test_the_controller_may_lower_the_threshold(net: KvNet, target, request) -> None:
    target.table_set_default(CONFIG, SET_THRESHOLD, {"qdepth": 0})
    out = net.send(STORAGE_PORT, reply(0), frames=1)
    assert marked(out[0][1]), "every queue, an empty one too, is at a threshold of 0"
    target.table_set_default(CONFIG, SET_THRESHOLD, {"qdepth": 1})
    out = net.send(STORAGE_PORT, reply(0), frames=1)
    assert not marked(out[0][1]), "an empty queue is under any threshold above 0"
    if is_bmv2(request):
        # BMv2's egress threads drain while its ingress thread queues, on an idle machine fast enough that no
        # reply of a burst need find another ahead of it: nothing to assert about a burst there
        return
    n = 24
    out = burst(target, request, STORAGE_PORT, [reply(i) for i in range(n)])
    assert by_req_id(out) == {i: i >= 1 for i in range(n)}


def test_requests_are_never_marked_however_long_the_queue(net: KvNet, target, request) -> None:
    target.table_set_default(CONFIG, SET_THRESHOLD, {"qdepth": 1})
    n = 24
    out = burst(target, request, CLIENT_PORT, [get(i) for i in range(n)])
    assert out and {p for p, _ in out} == {STORAGE_PORT}
    assert not any(marked(d) for _, d in out)
