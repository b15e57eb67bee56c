"""P4Runtime helpers shared by the switch's server and the controller's client; depends only on the `p4runtime` protos.

`bytestrings`: the canonical byte strings of P4Runtime 1.4 §8.4. `wire`: the few pieces of the protobuf wire
format the hot paths write and read by hand (the pure-Python protobuf 3.20 that p4runtime needs is slow).
"""
