"""Kept for importers of the old path (bench/_vethnet.py): P4Info lookups live in `p4rt.p4info`."""

from p4rt.p4info import P4Info, enum_from_source

__all__ = ["P4Info", "enum_from_source"]
