"""One committed forwarding pipeline: P4Info, device config, the loaded target and the state P4Runtime keeps.

The target has no read-back for multicast groups, clone sessions, meter or digest configurations, so the pipeline
keeps the entries as written (P4Runtime reads must return them) and forwards each change to the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from softswitch.p4runtime.index import P4InfoIndex
from softswitch.p4runtime.read_response import TableEntryEncoder
from softswitch.target import Target


@dataclass
class Pipeline:
    p4info: p4info_pb2.P4Info
    device_config: bytes
    target: Target
    cookie: int = 0
    index: P4InfoIndex = field(init=False)
    entry_encoder: TableEntryEncoder = field(init=False)
    """Writes this pipeline's table entries in wire format for Read (keeps per-table look-ups)."""
    multicast_groups: dict[int, p4runtime_pb2.MulticastGroupEntry] = field(default_factory=dict)
    clone_sessions: dict[int, p4runtime_pb2.CloneSessionEntry] = field(default_factory=dict)
    digest_configs: dict[int, p4runtime_pb2.DigestEntry.Config] = field(default_factory=dict)
    entry_metadata: dict[tuple, tuple[int, bytes]] = field(default_factory=dict)
    """(table, match items, priority) → (controller_metadata, metadata) the controller stored with an entry."""
    meter_configs: dict[tuple[int, int], p4runtime_pb2.MeterConfig] = field(default_factory=dict)
    """(meter id, index) → config as written; absent means unconfigured (every packet green)."""

    def __post_init__(self) -> None:
        self.index = P4InfoIndex(self.p4info)
        self.entry_encoder = TableEntryEncoder(self.index)
