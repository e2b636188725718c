"""The ``tls`` probe: expiry, version, chain and name from the trace and one handshake."""
