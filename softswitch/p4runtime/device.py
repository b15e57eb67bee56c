"""The switch as ports see it: frames in, the committed pipeline's target runs them, frames out.

One lock serialises `Target.process` (the executor is single-threaded) and pipeline swaps. Frames for the
CPU port and digests go to callbacks the P4Runtime server installs; the rest go to `send` (the port set).
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Sequence

from softswitch.p4runtime.pipeline import Pipeline
from softswitch.runtime.switch import SoftSwitch
from softswitch.target import DROP_PORT, DigestMessage

log = logging.getLogger(__name__)

SendFrame = Callable[[int, bytes], None]


def settle_heap() -> None:
    """Move everything alive now (the loaded program: IR, parse trees, lowered closures) out of the collector's
    sight. The old pipeline's cycles are collected first. Without this every few thousand allocations on the
    packet and write paths pay a full collection over the program's objects: with it, batched table inserts
    run about eight times faster (bench/softswitch_p4runtime.py)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class Device:
    """Holds the committed pipeline and moves packets through it."""

    def __init__(self, device_id: int, cpu_port: int | None, send: SendFrame) -> None:
        self.device_id = device_id
        self.cpu_port = cpu_port
        self._send = send
        self.lock = threading.RLock()
        self.pipeline: Pipeline | None = None
        self.on_cpu_frame: Callable[[bytes], None] = lambda frame: None
        self.on_digests: Callable[[Sequence[DigestMessage]], None] = lambda msgs: None
        self.frames_in = 0
        self.frames_out = 0
        self.errors = 0

    def commit(self, pipeline: Pipeline | None) -> None:
        with self.lock:
            self.pipeline = pipeline
            settle_heap()

    def receive(self, port: int, frame: bytes) -> None:
        """A frame arrived on `port` (for the CPU port: a packet-out with its header already added)."""
        with self.lock:
            p = self.pipeline
            if p is None:
                return
            self.frames_in += 1
            try:
                outputs = p.target.process(port, frame)
                digests = p.target.drain_digests()
            except Exception:  # the target promises not to raise; a bug there must not kill the port thread
                self.errors += 1
                log.exception("target failed on a %d-byte frame from port %d", len(frame), port)
                return
        self._deliver(outputs, digests)

    def receive_burst(self, frames: Sequence[tuple[int, bytes]]) -> None:
        """Frames the ports read together, in arrival order: their copies queue towards their egress ports
        as a burst does (`SoftSwitch.process_burst`), so the program sees real queue depths."""
        with self.lock:
            p = self.pipeline
            if p is None:
                return
            self.frames_in += len(frames)
            try:
                if isinstance(p.target, SoftSwitch):
                    outputs = p.target.process_burst(frames)
                else:
                    outputs = [out for port, frame in frames for out in p.target.process(port, frame)]
                digests = p.target.drain_digests()
            except Exception:  # the target promises not to raise; a bug there must not kill the port thread
                self.errors += 1
                log.exception("target failed on a burst of %d frames", len(frames))
                return
        self._deliver(outputs, digests)

    def _deliver(self, outputs: Sequence[tuple[int, bytes]], digests: Sequence[DigestMessage]) -> None:
        for out_port, data in outputs:
            if out_port == DROP_PORT:
                continue
            if self.cpu_port is not None and out_port == self.cpu_port:
                self.on_cpu_frame(data)
            else:
                self.frames_out += 1
                self._send(out_port, data)
        if digests:
            self.on_digests(digests)
