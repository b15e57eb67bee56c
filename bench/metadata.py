"""Block metadata lookups: answered by the data plane, by the controller, or by the storage node itself.

    python -m bench metadata [--quick]      (root: veth pairs and network namespaces)

The bed is `kvtesting.vethnet.VethNet`: client and storage node in their own namespaces, `python -m softswitch`
running kvswitch.p4 between them. One client, one request outstanding (`kvtesting.kvagent`'s `wire_loop`:
requests packed with `kvpool.wire`, no Scapy in the loop), alternating rounds of three paths:

* **data plane**: LOOKUP_META of an indexed block whose slot holds it: the switch answers (steer.p4,
  `answer_lookup_meta`), one pass through the pipeline;
* **controller**: LOOKUP_META of a block the switch does not index: punted over P4Runtime's stream to a
  responder in this process that builds the reply with `controller.client_ops` (dissect, `reply_frame`) from a
  dict and sends it back as a packet-out; the real controller adds its PoolManager lock and policies on top;
* **storage node**: STAT of the block, forwarded by the switch to `kvpool.server`, which answers from its own
  index (the node's own metadata answer: a KVP storage node answers LOOKUP_META only when no switch is on the
  path, since a switch punts it).

Writes metadata.json, metadata.md (with the IBM paper's context, docs/storage-backends.md) and metadata.png.
The softswitch is pure Python: absolute figures are not BMv2's or an ASIC's, and the three paths share the
machine's two cores with the client; ratios between them are the result.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

NAME = "metadata"
TENANT = 0
INDEXED, UNKNOWN = 0xAE7A_0001, 0xAE7A_0002
"""The block the switch indexes (and holds), and one it never indexes (punted)."""
PATHS = ("data_plane", "controller", "storage_node")
LABELS = {"data_plane": "data plane (switch answers LOOKUP_META)",
          "controller": "controller (LOOKUP_META punted, packet-out)",
          "storage_node": "storage node (STAT through the switch)"}

PAPER = {
    "source": "Y. Zhu, H. Yu, C. Wang, Z. Liu, E. K. Lee, \"Towards Efficient Key-Value Cache Management for Prefix "
              "Prefilling in LLM Inference\", IEEE CLOUD 2025, arXiv:2505.21919 "
              "(https://arxiv.org/abs/2505.21919)",
    "figures": None,
    "what_we_found": "The abstract (arXiv:2505.21919; research.ibm.com) says CHIME and Sherman (RDMA) outperform "
                     "Redis in search efficiency but show highly variable p99 latency for KVC block metadata "
                     "retrieval. The numeric throughput and latency figures of its evaluation were not in the "
                     "excerpts our search tool returned, so none are quoted here; a third-party summary "
                     "(emergentmind) mentions '10.3% and 5.5%' without saying of what, and is not used.",
}
"""What the IBM paper reports, as far as we could read it (no number is invented here)."""


@dataclass(frozen=True)
class Sizes:
    lookups: int
    """Lookups per path, over all rounds."""
    rounds: int


FULL = Sizes(lookups=2000, rounds=5)
QUICK = Sizes(lookups=200, rounds=2)


class PuntResponder:
    """A minimal controller: primary on the switch, answers punted LOOKUP_META from a dict by packet-out."""

    def __init__(self, address: str, p4info_path: Path, known: dict[tuple[int, int, int], tuple[int, int]]) -> None:
        from p4rt.connection import SwitchConnection, SwitchOptions
        from p4rt.p4info import P4Info

        self.known = known
        self.answered = 0
        self._lock = threading.Lock()
        self.switch = SwitchConnection(SwitchOptions(address, 0, election_id=10), P4Info.load(p4info_path),
                                       on_packet_in=self._on_packet_in)

    def _on_packet_in(self, packet) -> None:
        from controller.client_ops import parse, reply_frame
        from kvpool.constants import Opcode, Status

        request, _problem = parse(packet.payload)
        if request is None or request.header.opcode != Opcode.LOOKUP_META:
            return
        h = request.header
        bitmap, version = self.known.get((h.tenant, h.prefix_hash, h.chunk_idx), (0, 0))
        reply = reply_frame(request, h.replace(opcode=Opcode.LOOKUP_META_REPLY, flags=0, value_len=0,
                                               value_csum=0, aux=bitmap, version=version,
                                               status=Status.OK if bitmap else Status.MISS))
        self.switch.packet_out(reply, {"egress_port": packet.metadata.get("ingress_port", 0)})
        with self._lock:
            self.answered += 1


def _summary(latencies: list[float], elapsed: float, statuses: dict[str, int], lost: int) -> dict:
    us = np.asarray(latencies) * 1e6 if latencies else np.asarray([0.0])
    return {"lookups": len(latencies), "lookups_per_s": len(latencies) / elapsed if elapsed else 0.0,
            "latency_us": {"p50": float(np.percentile(us, 50)), "p99": float(np.percentile(us, 99)),
                           "mean": float(us.mean())},
            "statuses": statuses, "lost": lost}


def _measure(net, sizes: Sizes, progress) -> tuple[dict, dict[str, list[float]]]:
    from kvpool.constants import Opcode

    requests = {"data_plane": (Opcode.LOOKUP_META, INDEXED), "controller": (Opcode.LOOKUP_META, UNKNOWN),
                "storage_node": (Opcode.STAT, INDEXED)}
    acc: dict[str, dict[str, Any]] = {p: {"latencies": [], "elapsed": 0.0, "statuses": {}, "lost": 0} for p in PATHS}
    per_round = max(1, sizes.lookups // sizes.rounds)
    task = progress.add_task("metadata: rounds of the three paths", total=sizes.rounds * len(PATHS))
    for opcode, ph in requests.values():  # warm every path once
        net.request("wire_loop", ph=ph, opcode=int(opcode), count=10)
    for _ in range(sizes.rounds):
        for path, (opcode, ph) in requests.items():
            got = net.request("wire_loop", ph=ph, opcode=int(opcode), count=per_round)
            a = acc[path]
            a["latencies"] += got["latencies"]
            a["elapsed"] += got["elapsed"]
            a["lost"] += got.get("lost", 0)
            for status, n in got["statuses"].items():
                a["statuses"][status] = a["statuses"].get(status, 0) + n
            progress.advance(task)
    return ({p: _summary(a["latencies"], a["elapsed"], a["statuses"], a["lost"]) for p, a in acc.items()},
            {p: a["latencies"] for p, a in acc.items()})


def _table(result: dict) -> str:
    lines = ["| metadata lookup (one client, one outstanding, softswitch over veth) | lookups/s | p50 µs | p99 µs |"
             " answered |",
             "|---|---:|---:|---:|---|"]
    for path in PATHS:
        s = result["paths"][path]
        lines.append(f"| {LABELS[path]} | {s['lookups_per_s']:.0f} | {s['latency_us']['p50']:.0f} | "
                     f"{s['latency_us']['p99']:.0f} | {s['statuses']} |")
    paper = result["paper"]
    lines += ["", f"IBM paper: {paper['source']}.", "", paper["what_we_found"], "",
              "Not a like-for-like comparison: the paper's stores ran on their own servers (RDMA NICs for CHIME "
              "and Sherman), these figures come from a pure-Python P4 target on 2 shared cores."]
    return "\n".join(lines) + "\n"


def _plot(latencies: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, color in zip(PATHS, ("tab:blue", "tab:orange", "tab:red"), strict=True):
        if latencies[name]:
            us = np.sort(np.asarray(latencies[name]) * 1e6)
            ax.plot(us, np.arange(1, len(us) + 1) / len(us), color=color, label=LABELS[name])
    ax.set_xscale("log")
    ax.set_xlabel("lookup latency (µs, client send → reply)")
    ax.set_ylabel("fraction of lookups")
    ax.set_title("kvswitch: where block metadata is answered")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(out_dir: Path, quick: bool = False) -> dict:
    """Build the veth bed, measure, tear it down; writes metadata.json, metadata.md and metadata.png."""
    from rich.progress import Progress

    from kvtesting.vethnet import VethNet, VethNetOptions
    from p4rt.entities import Exact, TableEntry

    sizes = QUICK if quick else FULL
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with Progress(transient=True) as progress:
        setup = progress.add_task("starting switch, storage node, client (veth + netns)", total=None)
        with VethNet(VethNetOptions(tag="m")) as net:
            progress.remove_task(setup)
            net.request("put", ph=INDEXED, data=bytes(range(128)).hex(), version=1)
            assert net.switch is not None
            net.switch.close()  # p4runtime-shell steps back: the responder becomes primary
            net.switch = None
            p4info = net.workdir / "build" / "kvswitch.p4info.txtpb"
            responder = PuntResponder(net.grpc_address, p4info, {(TENANT, UNKNOWN, 0): (1 << 2, 1)})
            responder.switch.open()
            try:
                responder.switch.insert(TableEntry(
                    "MyIngress.kv_index", {"hdr.kvp.tenant": Exact(TENANT), "hdr.kvp.prefix_hash": Exact(INDEXED),
                                           "hdr.kvp.chunk_idx": Exact(0)},
                    "MyIngress.set_slot", {"slot": 1, "min_version": 1, "generation": 1}))
                net.request("get_loop", ph=INDEXED, chunks=1, count=3)  # the storage node's reply fills the slot
                paths, latencies = _measure(net, sizes, progress)
            finally:
                responder.switch.close()
    result = {"benchmark": NAME, "quick": quick, "sizes": asdict(sizes), "paths": paths,
              "controller_answered": responder.answered, "paper": PAPER,
              "notes": "softswitch (pure Python) over veth, 2 shared cores; one request outstanding; the "
                       "controller path is a minimal responder (punt + client_ops + packet-out), the storage node "
                       "path a STAT answered by kvpool.server; not comparable with the paper's hardware"}
    (out_dir / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / f"{NAME}.md").write_text(_table(result))
    _plot(latencies, out_dir / f"{NAME}.png")
    return result
