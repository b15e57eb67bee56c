"""Packet tests for kvswitch's P4 targets, importable outside this repository.

See docs/packet-tests.md. Modules: `require_targets` (a pytest plugin CI uses so BMv2 cases cannot skip).
"""
