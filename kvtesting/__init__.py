"""Packet tests for P4 programs on kvswitch's targets, importable outside this repository (docs/packet-tests.md).

    packets          send X on port p / expect Y on port q, over the in-process switch, the softswitch process, BMv2
    kvnet            KVP frames and table set-up for kvswitch.p4 (the data-plane tests' network of two hosts)
    switch_process   compile a program and start a switch process behind veth pairs (softswitch or BMv2)
    remote           the `softswitch.target.Target` interface over P4Runtime and raw sockets
    expect           wait for what a correct switch does (frames, digests, counters), never for a quiet gap
    p4rt, veth       the P4Runtime session and the veth pairs underneath
    vethnet, kvagent hosts in network namespaces around a switch, with a client agent, for process-level tests
    require_targets  a pytest plugin for CI: a test of a required target (bmv2) may not skip
"""
