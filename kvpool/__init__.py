"""Host side of kvswitch: the KVP wire protocol, prefix hashing, the client and the storage node.

* `constants`: every number of docs/protocol.md (port, magic, opcodes, status codes, flags, tiers).
* `wire`: the header as a struct and the validity rules (`check`), for hot paths; no Scapy.
* `protocol`: the Scapy layers `KVP` / `KVPValue` (building, dissecting, `answers`), and `check` again.
* `prefix_hash`: chained BLAKE2b-64 prefix hashes of token prompts and of trace block ids.
* `blocks`: a block split into 128-byte chunks and reassembled, checked.
* `client`: `KVPClient` and `python -m kvpool.client`.
* `server`: `StorageNode` and `python -m kvpool.server`.

Importing the package has no side effects; only `protocol` (and `client`) import Scapy.
"""
