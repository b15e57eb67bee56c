"""P4Runtime shared by the switch's server, the controller and the test harness; depends only on the `p4runtime`
protos and grpc.

`connection`: the project's one P4Runtime client (`SwitchConnection`: arbitration, reconnects, writes, reads,
stream messages), used by the controller and by `kvtesting.p4rt`. `errors`: the one error type (`TargetError`,
and `P4RuntimeError` for a client's view of a refused RPC with its per-update errors). `p4info`: look-ups by
name. `entities`, `codec`: target-neutral table entries and their protobufs. `bytestrings`: the canonical byte
strings of P4Runtime 1.4 §8.4. `wire`: the few pieces of the protobuf wire format the hot paths write and read
by hand (the pure-Python protobuf 3.20 that p4runtime needs is slow), the counter-cell decoder among them.
"""
