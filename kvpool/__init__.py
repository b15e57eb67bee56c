"""Host side of kvswitch: the KVP wire protocol, prefix hashing, the client and the storage node.

* `constants`: every number of docs/protocol.md (port, magic, opcodes, status codes, flags, tiers).
* `wire`: the header as a struct and the validity rules (`check`), for hot paths; no Scapy.
* `protocol`: the Scapy layers `KVP` / `KVPValue` (building, dissecting, `answers`), and `check` again.
* `prefix_hash`: chained BLAKE2b-64 prefix hashes of token prompts and of trace block ids.
* `blocks`: a block split into 128-byte chunks and reassembled, checked.
* `errors`: what a client call fails with (`KVPError`, `KVPTimeout`, `BlockNotFound`).
* `transport`: how a client's datagrams travel (UDP; in-process and lossy ones for tests).
* `window`: a window of requests in flight, resending only the late ones.
* `stream`: where a block's stream is, as a reader that takes its pushed chunks sees it (what to ask for).
* `client`: `KVPClient` and `python -m kvpool.client`.
* `staging`: writes in progress at the storage node (per writer, bounded, expiring) and recent commits.
* `trust`: which addresses may send controller-only requests.
* `backends`: where the storage node keeps committed blocks (`memory`, `mooncake`; docs/storage-backends.md).
* `server`: `StorageNode` and `python -m kvpool.server`.
* `mooncake_master`: a local Mooncake master for tests and the testbed (`python -m kvpool.mooncake_master`).

Importing the package has no side effects; only `protocol` (and `client`) import Scapy.
"""
