"""Shared pieces of the Mininet coherence tests (test_coherence.py, test_hostile_hosts.py, test_fabric_coherence.py).

Each test module starts one testbed and one `kvtesting.coherence` agent per host; blocks are written and read
through the agents, every read judged against the test's `StorageModel`, and each scenario's figures saved to
`out/coherence/<module>.json`. The operator's actions go to the controller's HTTP API (what the CLI sends).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from kvpool.blocks import chunk_count
from kvpool.client import ClientOptions, KVPClient
from kvtesting.coherence import Figures, HostAgent, StorageModel, Tally
from topo.switches import REPO
from topo.testbed import Testbed

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
WAIT = 30.0
"""Seconds any one expected change (admission, a refill, a reconnect) may take before the test fails."""
OUT = REPO / "out" / "coherence"


@dataclass(frozen=True)
class Block:
    """One version of a block: its prefix hash, version and bytes (unique per version, same length)."""

    prefix_hash: int
    version: int
    data: bytes

    @classmethod
    def of(cls, prefix_hash: int, version: int, size: int = 200, tag: str = "") -> Block:
        text = f"{tag or 'blk'}:{prefix_hash:x}:v{version}:"
        return cls(prefix_hash, version, (text * (size // len(text) + 1)).encode()[:size])

    @property
    def chunks(self) -> int:
        return chunk_count(len(self.data))

    @property
    def key(self) -> str:
        """The controller's name of the block (tenant 0)."""
        return f"0:{self.prefix_hash:016x}"

    def chunk_key(self, i: int = 0) -> str:
        return f"{self.key}:{i}"

    @property
    def news(self) -> str:
        """What a writer of this version tells readers once it is acknowledged (`Pool.put` with `notify`)."""
        return f"{self.key} v{self.version} acknowledged"


class Pool:
    """The testbed, its host agents, the model of what was written, and the figures of this module."""

    def __init__(self, bed: Testbed, hosts: tuple[str, ...], figures: Figures) -> None:
        self.bed = bed
        self.model = StorageModel()
        self.figures = figures
        self.agents = {h: HostAgent(bed.net[h], "10.0.0.100", REPO, ENV) for h in hosts}

    def close(self) -> None:
        for agent in self.agents.values():
            agent.close()
        self.figures.save()

    # ---- the operator (the controller's API, as the CLI calls it) --------------------------------------------

    def api(self, method: str, path: str, body: dict | None = None, device_id: int = 1,
            check: bool = True) -> tuple[int, object]:
        request = urllib.request.Request(f"http://{self.bed.api_address(device_id)}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, data = reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            status, data = exc.code, json.loads(exc.read() or b"null")
        if check:
            assert status == 200, f"{method} {path} {body}: {status} {data}"
        return status, data

    def pin(self, block: Block, device_id: int = 1) -> None:
        self.api("POST", "/pins", {"key": block.key}, device_id)

    def unpin(self, block: Block, device_id: int = 1) -> None:
        self.api("DELETE", f"/pins/{block.key}", device_id=device_id, check=False)

    def evict(self, block: Block, device_id: int = 1) -> None:
        self.unpin(block, device_id)
        self.api("POST", "/evict", {"key": block.key}, device_id)

    def resident(self, block: Block, device_id: int = 1) -> bool:
        _, rows = self.api("GET", f"/blocks?key={block.key}", device_id=device_id, check=False)
        slots = {row["key"]: row.get("slot") for row in rows} if isinstance(rows, list) else {}
        return all(slots.get(block.chunk_key(i)) is not None for i in range(block.chunks))

    def status(self, device_id: int = 1) -> dict:
        return self.api("GET", "/status", device_id=device_id)[1]  # type: ignore[return-value]

    # ---- writes and reads through the agents --------------------------------------------------------------

    def put(self, host: str, block: Block, tally: Tally | None = None, expect_ok: bool = True,
            notify: Sequence[tuple[str, int]] = ()) -> dict:
        """`host` writes `block`; once acknowledged, it sends `block.news` to the hosts at `notify` (ip, UDP port)
        through the network (`kvtesting.coherence.tell`)."""
        answer = self.agents[host].call("put", ph=block.prefix_hash, data=block.data.hex(), version=block.version,
                                        notify=[list(address) for address in notify], news=block.news)
        ok = self.model.record(block.prefix_hash, block.version, block.data, answer)
        if tally is not None:
            tally.writes += 1
            tally.failed_writes += not ok
            if not ok and self.stored(block):
                tally.falsely_failed_writes += 1
        if expect_ok:
            assert ok, f"PUT {block.prefix_hash:#x} v{block.version} from {host}: {answer}"
        return answer

    def stored(self, block: Block) -> bool:
        """Whether the storage node holds exactly `block` (read over the management link, past every switch)."""
        with KVPClient(ClientOptions(server=self.bed.storage_address, timeout=0.5, retries=3)) as client:
            try:
                got = client.get_block(block.prefix_hash, block.chunks)
            except Exception:
                return False
        return got.version == block.version and got.data == block.data

    def reads(self, host: str, blocks: list[Block], tally: Tally, **how) -> list[dict]:
        """Reads in `host` (count / seconds / until_switch / seed, see the agent), judged and counted."""
        answer = self.agents[host].call("reads", blocks=[[b.prefix_hash, b.chunks] for b in blocks], **how)
        tally.count_reads(answer["reads"], self.model)
        self.figures.save()
        return answer["reads"]

    def read_until_switch(self, host: str, block: Block, tally: Tally, wait: float = WAIT) -> dict:
        """Read until a whole read is served by the switch (every read judged); that read."""
        reads = self.reads(host, [block], tally, until_switch=True, seconds=wait)
        last = reads[-1] if reads else {}
        if not all(last.get("switch") or [False]):
            pytest.fail(f"{block.prefix_hash:#x} not served by the switch to {host} within {wait:.0f} s: {last}")
        return last

    def concurrently(self, work: dict[str, tuple[str, dict]]) -> dict[str, dict]:
        """Send one request to each named agent at once, then collect the answers."""
        for host, (op, fields) in work.items():
            self.agents[host].send(op, **fields)
        return {host: self.agents[host].answer() for host in work}


def eventually(what: str, probe: Callable[[], object], timeout: float = WAIT, pause: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s (last: {value!r})")
        time.sleep(pause)


def assert_no_wrong(tally: Tally, errors_expected: bool = False) -> None:
    """No wrong read, no read the client refused as inconsistent, no falsely failed write; and, unless the
    scenario makes some reads fail (an outage), no read without a value."""
    assert tally.wrong_reads == 0, tally.wrong_examples
    assert tally.inconsistent_reads == 0, tally.wrong_examples
    assert tally.falsely_failed_writes == 0, tally
    if not errors_expected:
        assert tally.read_errors == 0, tally
