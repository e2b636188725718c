"""The ``idle-timeout`` probe: keep-alive and paused-stream watches, and verdicts."""
