"""Eviction policies: which resident block leaves when the pool is full. One module per policy."""
