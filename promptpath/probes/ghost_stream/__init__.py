"""The ``ghost-stream`` probe: a client that leaves, and whether the model stopped."""
