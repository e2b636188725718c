"""Probes: each a small class that reads a traced result (and may send more requests)."""
