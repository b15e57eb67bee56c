"""The Mininet testbed behind `make run`, `make stop`, `make demo` and `make compile`.

Modules: `topologies` (the plans as Mininet Topo data), `plan` (routes per switch and the hosts.json format
the controller reads), `switches` (SoftP4Switch, Bmv2P4Switch, BridgeSwitch), `build` (compiling p4src/),
`testbed` (start/stop of the whole thing), `demo` and `replay` (trace replay and its report), `cli`.
"""
