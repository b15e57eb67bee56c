"""P4Runtime for the embedded target: P4Info generation, the gRPC server, and the device it drives."""
