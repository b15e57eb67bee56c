"""DigestList batching (P4Runtime spec, DigestEntry): group digest data per digest, flush on size or age.

`max_list_size` caps a list (0: no cap), `max_timeout_ns` bounds how long data waits (0: sent as soon as the
packet that produced it is done), `ack_timeout_ns` suppresses repeats of data already sent in a list the
controller has not acknowledged yet (the spec's "avoid sending duplicate data" until ack or timeout).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from p4rt import bytestrings
from softswitch.p4runtime.pipeline import Pipeline
from softswitch.target import DigestMessage

SendDigestList = Callable[[p4runtime_pb2.DigestList], None]


@dataclass
class _Pending:
    started_ns: int
    data: list[tuple[tuple[str, int], ...]] = field(default_factory=list)


@dataclass
class _Outstanding:
    sent_ns: int
    digest_id: int
    data: set[tuple[tuple[str, int], ...]]


class DigestBatcher:
    """Turns the target's `DigestMessage`s into DigestLists for the primary controller."""

    def __init__(self, send: SendDigestList, clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._send = send
        self._clock = clock_ns
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._outstanding: dict[tuple[int, int], _Outstanding] = {}
        self._next_list_id = 1
        self._pipeline: Pipeline | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._timer, name="digest-timer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def reset(self, pipeline: Pipeline | None) -> None:
        """A new pipeline was committed: drop what was pending for the old one."""
        with self._lock:
            self._pipeline = pipeline
            self._pending.clear()
            self._outstanding.clear()

    def add(self, messages: Iterable[DigestMessage]) -> None:
        now = self._clock()
        ready: list[p4runtime_pb2.DigestList] = []
        with self._lock:
            p = self._pipeline
            if p is None:
                return
            self._expire_acks(now, p)
            for msg in messages:
                info = p.index.digest_by_name.get(msg.name)
                if info is None or info.id not in p.digest_configs:
                    continue  # not configured: the spec says the device sends nothing
                cfg = p.digest_configs[info.id]
                data = tuple(msg.fields)
                if cfg.ack_timeout_ns and any(o.digest_id == info.id and data in o.data
                                              for o in self._outstanding.values()):
                    continue
                pend = self._pending.setdefault(info.id, _Pending(now))
                if data in pend.data:
                    continue
                pend.data.append(data)
                if cfg.max_list_size and len(pend.data) >= cfg.max_list_size:
                    ready.append(self._take(info.id, now, p))
            for did in list(self._pending):
                if p.digest_configs.get(did) and p.digest_configs[did].max_timeout_ns == 0:
                    ready.append(self._take(did, now, p))
        for dl in ready:
            self._send(dl)
        self._wake.set()

    def ack(self, digest_id: int, list_id: int) -> None:
        with self._lock:
            self._outstanding.pop((digest_id, list_id), None)

    def _take(self, digest_id: int, now: int, p: Pipeline) -> p4runtime_pb2.DigestList:
        pend = self._pending.pop(digest_id)
        dl = p4runtime_pb2.DigestList(digest_id=digest_id, list_id=self._next_list_id, timestamp=time.time_ns())
        self._next_list_id += 1
        order = [name for name, _ in p.index.digests[digest_id].fields]
        for data in pend.data:
            values = dict(data)
            names = order if set(order) == set(values) else [name for name, _ in data]
            member = dl.data.add()
            for name in names:  # struct member order from P4Info; the target already masked each value
                member.struct.members.add(bitstring=bytestrings.encode(values[name]))
        if p.digest_configs[digest_id].ack_timeout_ns:
            self._outstanding[(digest_id, dl.list_id)] = _Outstanding(now, digest_id, set(pend.data))
        return dl

    def _expire_acks(self, now: int, p: Pipeline) -> None:
        for key, o in list(self._outstanding.items()):
            cfg = p.digest_configs.get(o.digest_id)
            if cfg is None or now - o.sent_ns >= cfg.ack_timeout_ns:
                del self._outstanding[key]

    def _next_deadline(self) -> float | None:
        """Seconds until the oldest pending list is due, None when nothing waits."""
        with self._lock:
            p = self._pipeline
            if p is None or not self._pending:
                return None
            now = self._clock()
            due = [pend.started_ns + p.digest_configs[did].max_timeout_ns
                   for did, pend in self._pending.items() if did in p.digest_configs]
        return max(0.0, (min(due) - now) / 1e9) if due else 0.0

    def _timer(self) -> None:
        """Flushes lists whose max_timeout_ns has passed; sleeps until the next one is due (or new data)."""
        while not self._stop.is_set():
            self._wake.wait(timeout=self._next_deadline())
            self._wake.clear()
            now = self._clock()
            ready = []
            with self._lock:
                p = self._pipeline
                if p is None:
                    continue
                for did, pend in list(self._pending.items()):
                    cfg = p.digest_configs.get(did)
                    if cfg is None:
                        del self._pending[did]
                    elif now - pend.started_ns >= cfg.max_timeout_ns:
                        ready.append(self._take(did, now, p))
            for dl in ready:
                self._send(dl)
