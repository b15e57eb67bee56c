"""Trace replay, cost model and plots that answer kvswitch's research questions.

`traces` and `synthetic` make requests, `stream` flattens them into block references, `replay` drives the
switch pool policies (`policies.pool.Pool`), `bounds` gives MIN and the ideal, `cluster` models nodes and
tiers, `costs`/`ttft` price them (`sharing`: which concurrent reads of a block a switch mechanism merges),
`arrivals` measures how far apart the readers of a shared block start, `testbed` sets the model against the
benchmarks' N-reader rows, `experiments` runs the four questions, `report` and `plots` write them up.
"""
