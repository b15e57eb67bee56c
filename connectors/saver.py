"""Writing pool blocks off the engine's back: a child process with its own pool client.

An engine step must not wait for the pool, and must not share its interpreter with the writes either: a saver
thread would hold the GIL between datagrams and delay every torch call of the next prefill (measured: +77 % TTFT
on a loaded 2-core machine). So the engine only copies a block out of its cache and queues it (`submit`, never
blocking: a full queue drops the block and counts it); a feeder thread hands queued blocks to a child process
(`python -m connectors.saver`) through its stdin, and the child asks the pool in one round trip which blocks of
a batch it holds already and writes the others (`PoolStore.put`), each under `connectors.blockcodec`'s header.
The child reports its counters as JSON lines on its stdout.

The child is a plain subprocess, not a `multiprocessing` one: vLLM runs its workers as daemonic processes, which
may not have multiprocessing children. It runs at a lower CPU priority (`nice`): on a host whose cores the
engine needs, saving waits; a saver that falls behind drops blocks at the queue (counted), it never slows a
prefill down.

    frame on the child's stdin: key (8 bytes) ‖ identity JSON length (4) ‖ payload length (4), big-endian,
                                then the identity as JSON, then the payload
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from connectors import blockcodec
from connectors.identity import ModelIdentity
from connectors.store import PoolStore

BATCH = 16
"""Blocks probed together before writing those the pool lacks."""
COUNTERS = ("saved_blocks", "saved_bytes", "save_skipped_present", "save_failed", "save_dropped_full",
            "save_pool_failures", "saver_busy_us")
"""What the child counts."""
_FRAME = struct.Struct(">QII")
_REPO = Path(__file__).resolve().parents[1]

Item = tuple[int, ModelIdentity, bytes | bytearray]


class SaverProcess:
    """The engine's side of the saver: a bounded queue, a feeder thread, a child process."""

    def __init__(self, pool: str, store_options: dict[str, Any], queue_size: int, nice: int = 10) -> None:
        """`nice`: how much lower than the engine the child's CPU priority is (0: the same)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO),
                                                                          os.environ.get("PYTHONPATH")]))}
        self._child = subprocess.Popen(
            [sys.executable, "-m", "connectors.saver", "--pool", pool, "--options", json.dumps(store_options),
             "--nice", str(nice)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=_REPO)
        self._queue: queue.Queue[Item | None] = queue.Queue(queue_size)
        self._counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.dropped_queue_full = 0
        """Blocks not queued: the saver was behind by `queue_size` blocks."""
        self._closed = False
        self._feeder = threading.Thread(target=self._feed, name="kvswitch-saver-feed", daemon=True)
        self._reader = threading.Thread(target=self._read_counters, name="kvswitch-saver-counters", daemon=True)
        self._feeder.start()
        self._reader.start()

    def submit(self, key: int, identity: ModelIdentity, payload: bytes | bytearray) -> bool:
        """Queue one block to write; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait((key, identity, payload))
        except queue.Full:
            self.dropped_queue_full += 1
            return False
        return True

    def counters(self) -> dict[str, int]:
        """The child's latest counters, and the drops at the queue."""
        return {**self._counters, "save_dropped_queue_full": self.dropped_queue_full}

    def _feed(self) -> None:
        stdin = self._child.stdin
        assert stdin is not None
        try:
            while (item := self._queue.get()) is not None:
                key, identity, payload = item
                text = json.dumps(asdict(identity)).encode()
                stdin.write(_FRAME.pack(key, len(text), len(payload)) + text)
                stdin.write(payload)
                stdin.flush()
        except (BrokenPipeError, OSError):  # the child died: later saves are dropped at the queue
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _read_counters(self) -> None:
        stdout = self._child.stdout
        assert stdout is not None
        for line in stdout:
            with contextlib.suppress(ValueError):
                self._counters.update(json.loads(line))

    def close(self, timeout: float) -> None:
        """Write what is queued (up to `timeout` seconds), then stop the child."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._feeder.join(timeout)
        try:
            self._child.wait(timeout)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._reader.join(1.0)


# ---- the child ------------------------------------------------------------------------------------------------

def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def _read_item(stream: BinaryIO) -> Item | None:
    """The next block on stdin, None at its end."""
    head = _read_exactly(stream, _FRAME.size)
    if head is None:
        return None
    key, text_len, payload_len = _FRAME.unpack(head)
    text = _read_exactly(stream, text_len)
    payload = _read_exactly(stream, payload_len)
    if text is None or payload is None:
        return None
    return key, ModelIdentity(**json.loads(text)), payload


def _more_waiting(stream: BinaryIO) -> bool:
    readable, _, _ = select.select([stream], [], [], 0)
    return bool(readable)


def serve(pool: str, store_options: dict[str, Any], stream: BinaryIO, report: Any) -> None:
    """Write the blocks framed on `stream` until it ends; counters as JSON lines on `report`."""
    counters = dict.fromkeys(COUNTERS, 0)
    with PoolStore(pool, **store_options) as store:
        done = False
        while not done:
            batch: list[Item] = []
            while len(batch) < BATCH:
                item = _read_item(stream)
                if item is None:
                    done = True
                    break
                batch.append(item)
                if not _more_waiting(stream):
                    break
            if not batch:
                continue
            begin = time.perf_counter()
            stored = store.present([key for key, _, _ in batch])
            for (key, identity, payload), there in zip(batch, stored, strict=True):
                if there:
                    counters["save_skipped_present"] += 1
                elif store.put(key, blockcodec.encode(identity, payload, key)):
                    counters["saved_blocks"] += 1
                    counters["saved_bytes"] += len(payload)
                else:
                    counters["save_failed"] += 1
            counters["saver_busy_us"] += int((time.perf_counter() - begin) * 1e6)
            counters["save_dropped_full"] = store.stats.dropped_full
            counters["save_pool_failures"] = store.stats.failures + store.stats.skipped
            report.write(json.dumps(counters) + "\n")
            report.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.saver", description=__doc__.splitlines()[0])
    parser.add_argument("--pool", required=True)
    parser.add_argument("--options", default="{}", help="PoolStore options as JSON")
    parser.add_argument("--nice", type=int, default=10)
    args = parser.parse_args(argv)
    if args.nice:
        os.nice(args.nice)
    serve(args.pool, json.loads(args.options), sys.stdin.buffer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
