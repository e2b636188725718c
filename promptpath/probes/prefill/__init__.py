"""The ``prefill`` probe: where time to first token goes (wire, fixed part, prefill), and
whether the prefix cache works."""
