"""kvswitch control plane: a P4Runtime controller that decides which KV-cache blocks live in the switch pool.

Layers, each in its own module: `p4info` (names → ids), `switch` (one P4Runtime connection per switch),
`dataplane` (pool operations expressed in the P4 program's tables, counters, digests and packet-outs),
`pool` (admission, eviction, recycling, pins: the decisions), `tiers`, `state` (SQLite), `metrics`,
`api` (local JSON API) and `cli` (the `python -m controller` commands).
"""
