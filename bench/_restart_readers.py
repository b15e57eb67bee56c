"""Readers that kill the switch under themselves: the client side of the switch-restart test on veth
(tests/kvpool/test_switch_restart_veth.py; the leading underscore keeps it out of `python -m bench all`).

Run in the client's namespace as ``python -m bench._restart_readers --server IP --phs A,B --size N
--kill-pid PID``. Reader i is its own process with the client's default `ClientOptions` (only `give_up` may
be raised, so the verdict does not depend on how fast a loaded machine restarts the switch); it reads the block
`phs[i % len(phs)]`, whose bytes are `bench._incast_bed.block_data(ph & 0xFFFF, size)`, and verifies them.

The kill comes from the readers themselves so that it lands mid-read on any machine, however loaded: the
first reply datagram that brings every reader to at least `--kill-after` replies sends SIGKILL to the switch
process (`--kill-pid`, a process of the root namespace: pids are not per network namespace) before it is handed
to the client. The orchestrator waits for that process to end, waits, and restarts it.

Prints one JSON line: per reader its completion time (also as CLOCK_MONOTONIC, which every namespace shares), whether its bytes verified, the error if any, the
replies it had when the switch was killed and in all, the longest silence between two replies (the outage
as the reader saw it), and the client's sent/resent counts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import signal
import time
from typing import Any

from kvpool.transport import Transport


class KillingTransport:
    """Passes datagrams through; counts this reader's replies, times the silences between them, and fires the
    kill once every reader has `kill_after` replies."""

    def __init__(self, inner: Transport, index: int, counts: Any, at_kill: Any, fired: Any, kill_pid: int,
                 kill_after: int) -> None:
        self.inner = inner
        self.peer = inner.peer
        self.index = index
        self.counts = counts
        """Shared `mp.Array` of every reader's reply count."""
        self.at_kill = at_kill
        """Shared `mp.Array`: `counts` as they were when the kill was sent."""
        self.fired = fired
        """Shared `mp.Value`: 0 until the kill is sent, then the monotonic time it was sent."""
        self.kill_pid = kill_pid
        self.kill_after = kill_after
        self.replies = 0
        self.last_reply: float | None = None
        self.longest_silence = 0.0

    def send(self, data: bytes) -> None:
        self.inner.send(data)

    def recv(self, timeout: float) -> bytes | None:
        data = self.inner.recv(timeout)
        if data is None:
            return None
        now = time.monotonic()
        if self.last_reply is not None:
            self.longest_silence = max(self.longest_silence, now - self.last_reply)
        self.last_reply = now
        self.replies += 1
        with self.counts.get_lock():
            self.counts[self.index] = self.replies
            if not self.fired.value and min(self.counts) >= self.kill_after:
                os.kill(self.kill_pid, signal.SIGKILL)
                self.fired.value = now
                self.at_kill[:] = self.counts[:]
        return data

    def close(self) -> None:
        self.inner.close()


def main(argv: list[str] | None = None) -> int:
    from bench._incast_bed import TENANT, block_data
    from kvpool.client import ClientOptions, KVPClient
    from kvpool.transport import UdpTransport

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--phs", required=True, help="reader i reads block phs[i %% len]")
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--kill-pid", type=int, required=True)
    parser.add_argument("--kill-after", type=int, default=100, help="replies every reader has before the kill")
    parser.add_argument("--give-up", type=float, default=None, help="ClientOptions.give_up (default: the client's)")
    args = parser.parse_args(argv)

    phs = [int(p, 0) for p in args.phs.split(",")]
    digests = {ph: hashlib.sha256(block_data(ph & 0xFFFF, args.size)).hexdigest() for ph in set(phs)}
    ctx = mp.get_context("fork")
    counts = ctx.Array("l", args.readers)
    at_kill = ctx.Array("l", args.readers, lock=False)
    fired = ctx.Value("d", 0.0, lock=False)
    results = ctx.Queue()

    def read(i: int) -> None:
        ph = phs[i % len(phs)]
        extra = {} if args.give_up is None else {"give_up": args.give_up}
        options = ClientOptions(server=(args.server, 7420), tenant=TENANT, **extra)
        transport = KillingTransport(UdpTransport(options.server), i, counts, at_kill, fired, args.kill_pid,
                                     args.kill_after)
        client = KVPClient(options, transport)
        out: dict[str, Any] = {"i": i, "ph": ph, "time": None, "verified": False, "error": None}
        began = time.monotonic()
        try:
            block = client.get_block(ph)
            out["finished_monotonic"] = time.monotonic()
            out["time"] = out["finished_monotonic"] - began
            out["verified"] = hashlib.sha256(block.data).hexdigest() == digests[ph]
            out["chunks"] = len(block.chunks)
        except Exception as exc:  # a reader's failure is a result to report, not a crash of the run
            out["error"] = f"reader {i}: {exc!r}"
        out.update(replies=transport.replies, replies_at_kill=at_kill[i] if fired.value else None,
                   longest_silence_s=transport.longest_silence, sent=client.sent, resent=client.resent,
                   killed_at_s=(fired.value - began) if fired.value else None)
        client.close()
        results.put(out)

    procs = [ctx.Process(target=read, args=(i,), daemon=True) for i in range(args.readers)]
    for p in procs:
        p.start()
    got = [results.get() for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps(sorted(got, key=lambda r: r["i"])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
