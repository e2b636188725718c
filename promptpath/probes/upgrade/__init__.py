"""The ``upgrade`` probe: a WebSocket upgrade of its own, and how it failed."""
