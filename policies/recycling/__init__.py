"""Recycling policies: where an evicted block goes (a lower tier, or nowhere). One module per policy."""
