"""Admission policies: does a block that missed deserve a slot. One module per policy."""
