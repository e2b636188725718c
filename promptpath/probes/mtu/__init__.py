"""The ``mtu`` probe: handshakes with a clamped MSS, and the path-MTU verdict."""
