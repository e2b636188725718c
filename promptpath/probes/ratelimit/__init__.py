"""The ``ratelimit`` probe: rate-limit headers and who answered a 429."""
