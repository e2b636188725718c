"""The ``buffering`` probe: its request, the delivery shape, the mechanism and verdict."""
