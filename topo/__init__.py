"""The Mininet testbed behind `make run`, `make stop`, `make demo` and `make compile`.

Modules: `topologies` (topology.json: the data, its checks and `KvTopo`, the Topo built from it; the shipped
files are in `layouts/`), `plan` (routes and port roles per switch: the hosts.json the controller reads),
`switches` (SoftP4Switch, Bmv2P4Switch, BridgeSwitch, with per-switch logs and pcaps), `build` (compiling
p4src/), `testbed` (start/stop of the whole thing, and `topo stop` of exactly what a testbed recorded),
`demo` and `replay` (trace replay and its report), `cli`.
"""
