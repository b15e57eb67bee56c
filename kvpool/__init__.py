"""Host side of kvswitch: the KVP wire protocol, prefix hashing, the client and the storage node.

Importing the package has no side effects; `kvpool.protocol` (the Scapy layer) is imported only by those who
build or dissect packets, so `kvpool.constants` and `kvpool.prefix_hash` stay cheap to import.
"""
