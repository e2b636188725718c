"""The ``path`` probe: the hop-by-hop trace below HTTP, read as an expert reads mtr."""
