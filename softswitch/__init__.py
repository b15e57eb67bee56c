"""softswitch: an embedded pure-Python v1model target (front end, executor, P4Runtime server)."""
