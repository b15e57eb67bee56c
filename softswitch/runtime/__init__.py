"""The executor of softswitch: a v1model program (typed IR from `softswitch.frontend`) compiled to Python.

    sw = SoftSwitch.load("p4src/kvswitch.p4", cpu_port=510)   # implements softswitch.target.Target
    sw.table_insert(TableEntry(...)); outputs = sw.process(1, frame)

Modules, one concept each:
- `bits`: bit<W>/int<W> arithmetic (reference semantics, constant folding);
- `hashing`: BMv2-exact hash/checksum algorithms and field-list packing;
- `externs`: register arrays, counters, meters, random;
- `tables`: match engine and entry CRUD with P4Runtime error codes;
- `replication`: multicast groups, clone sessions, instance_type values;
- `layout`: the flat per-packet frame (one slot per field/variable);
- `lower`: IR → generated Python functions (parser states, actions, tables, controls);
- `switch`: `SoftSwitch`, the v1model pipeline and traffic manager as BMv2 simple_switch runs them.
"""

from softswitch.runtime.lower import LoweringError
from softswitch.runtime.switch import SoftSwitch

__all__ = ["LoweringError", "SoftSwitch"]
