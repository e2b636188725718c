"""The ``dns-cache`` probe: the lookups, the signals found in them, the verdict."""
